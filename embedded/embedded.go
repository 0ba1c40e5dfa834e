// Package embedded runs the local stack resolverd needs when no external
// service is given: a Kafka-protocol broker (franz-go's kfake, persisted
// under a data directory) and the ClickHouse engine (package chengine),
// both on loopback. It backs `resolverd run --embedded DIR`, the demo and
// end-to-end tests; production points at real Kafka and ClickHouse.
//
// The engine is supervised (chengine.Supervise): when it exits on its own
// or stops answering, it is restarted on its data and ports after a
// backoff, the cause is logged and the restart counted, and Ready reports
// the stack not ready until the new engine answers. The engine's native
// port is guarded (chengine.Options.Guard): a failed login, a TLS
// ClientHello or a client's reset, each of which aborts this engine, is
// answered or absorbed in front of it. The broker runs in this process
// and ends only with it.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/schema"
)

// Defaults of Options: fixed ports, so that `ingest` and a browser find
// the stack without being told.
const (
	DefaultKafkaPort      = 19092
	DefaultClickHouseTCP  = 19000
	DefaultClickHouseHTTP = 18123
	DefaultCallPartitions = 6
)

// Topics created on first start.
var Topics = map[string]int32{
	schema.TopicCalls:    DefaultCallPartitions,
	schema.TopicListings: 3,
	schema.TopicCallsDLQ: 1,
	schema.TopicAudit:    DefaultCallPartitions, // the API's audit trail (package audit)
}

// Options of Start. Dir is required.
type Options struct {
	Dir            string // data of both services: Dir/kafka, Dir/clickhouse
	KafkaPort      int    // default DefaultKafkaPort; -1 picks a free port
	ClickHouseTCP  int    // default DefaultClickHouseTCP; -1 picks
	ClickHouseHTTP int    // default DefaultClickHouseHTTP; -1 picks
	CallPartitions int32  // partitions of tool-calls when created; default 6
	Lib            string // libchdb.so; default: chengine.Find
	// ClickHouseConfig is a server configuration file merged over the
	// engine's (chengine.Options.ConfigFile); "" for none.
	ClickHouseConfig string
	Logger           *slog.Logger
	// Registerer receives the engine supervisor's metrics
	// (toolaudit_engine_up, toolaudit_engine_restarts_total, ...); nil
	// registers none.
	Registerer prometheus.Registerer
	// Supervise tunes the engine's supervision (tests shorten its backoff
	// and probe); nil keeps chengine's defaults.
	Supervise []chengine.SuperviseOption
}

// Stack is a running broker and a supervised ClickHouse engine.
type Stack struct {
	Kafka      *kfake.Cluster
	ClickHouse *chengine.Supervisor
	Brokers    []string
}

// Ready returns nil while the stack serves, or why not (the engine is
// down and being restarted).
func (s *Stack) Ready() error { return s.ClickHouse.Ready() }

// Start starts both services; on error nothing is left running.
func Start(ctx context.Context, o Options) (*Stack, error) {
	if o.Dir == "" {
		return nil, errors.New("embedded: Options.Dir is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	port := func(p, def int) int {
		switch {
		case p == 0:
			return def
		case p < 0:
			return 0
		}
		return p
	}
	if o.CallPartitions <= 0 {
		o.CallPartitions = DefaultCallPartitions
	}
	kdir := filepath.Join(o.Dir, "kafka")
	if err := os.MkdirAll(kdir, 0o755); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	opts := []kfake.Opt{
		kfake.Ports(port(o.KafkaPort, DefaultKafkaPort)),
		kfake.DataDir(kdir),
		kfake.DefaultNumPartitions(int(o.CallPartitions)),
	}
	if _, err := os.Stat(filepath.Join(kdir, "topics.json")); errors.Is(err, os.ErrNotExist) {
		for t, n := range Topics {
			if t == schema.TopicCalls {
				n = o.CallPartitions
			}
			opts = append(opts, kfake.SeedTopics(n, t))
		}
	}
	if err := chengine.Built(); err != nil {
		return nil, fmt.Errorf("embedded: %w", err)
	}
	k, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded: start Kafka broker: %w", err)
	}
	lib := o.Lib
	if lib == "" {
		if lib, err = chengine.Find(""); err != nil { // its error says how to fetch it
			k.Close()
			return nil, fmt.Errorf("embedded: %w", err)
		}
	}
	sup := append([]chengine.SuperviseOption{chengine.WithRegisterer(o.Registerer)}, o.Supervise...)
	ch, err := chengine.Supervise(ctx, chengine.Options{
		Dir:        filepath.Join(o.Dir, "clickhouse"),
		TCPPort:    port(o.ClickHouseTCP, DefaultClickHouseTCP),
		HTTPPort:   port(o.ClickHouseHTTP, DefaultClickHouseHTTP),
		Lib:        lib,
		Logger:     o.Logger,
		ConfigFile: o.ClickHouseConfig,
		Guard:      true, // a stray connection must not abort a development stack's engine
	}, sup...)
	if err != nil {
		k.Close()
		return nil, fmt.Errorf("embedded: start ClickHouse: %w", err)
	}
	s := &Stack{Kafka: k, ClickHouse: ch, Brokers: k.ListenAddrs()}
	o.Logger.Info("embedded stack up", "kafka", s.Brokers, "clickhouse", ch.Addr(), "clickhouse_http", ch.HTTPAddr(), "dir", o.Dir)
	return s, nil
}

// Close stops the engine and its supervision, then the broker (which
// persists its data).
func (s *Stack) Close() error {
	err := s.ClickHouse.Stop()
	s.Kafka.Close()
	return err
}
