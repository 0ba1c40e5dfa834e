package embedded

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

// TestMain checks that a closed stack leaves no goroutine behind (the
// engine's supervisor, the broker).
func TestMain(m *testing.M) { leakcheck.Main(m) }

func needEngine(t *testing.T) { need.Engine(t) }

// TestStackPersists: records and ClickHouse data survive a restart of the
// stack on the same directory.
func TestStackPersists(t *testing.T) {
	needEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := Options{Dir: dir, KafkaPort: -1, ClickHouseTCP: -1, ClickHouseHTTP: -1}
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tool-calls", Key: []byte("k"), Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ConsumeTopics("tool-calls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v1" {
		t.Fatalf("after restart: %d records", len(recs))
	}
	conn, err = clickhouse.Open(&clickhouse.Options{Addr: []string{s.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var x uint8
	if err := conn.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 7 {
		t.Fatalf("after restart: x=%d err=%v", x, err)
	}
}

// TestStackRestartsEngine: the stack's engine, killed, comes back on its
// data and address; Ready says not ready meanwhile, and the restart shows
// in the Registerer's metrics.
func TestStackRestartsEngine(t *testing.T) {
	needEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	s, err := Start(ctx, Options{Dir: t.TempDir(), KafkaPort: -1, ClickHouseTCP: -1, ClickHouseHTTP: -1, Registerer: reg,
		Supervise: []chengine.SuperviseOption{chengine.WithBackoff(300*time.Millisecond, time.Second), chengine.WithProbe(100*time.Millisecond, time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ready(); err != nil {
		t.Fatalf("fresh stack not ready: %v", err)
	}
	addr := s.ClickHouse.Addr()
	syscall.Kill(s.ClickHouse.Server().PID(), syscall.SIGKILL)
	for s.Ready() == nil {
		if ctx.Err() != nil {
			t.Fatal("still ready after the engine was killed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for s.Ready() != nil {
		if ctx.Err() != nil {
			t.Fatalf("not ready again: %v", s.Ready())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := chenginetest.EngineMetric(t, reg, "toolaudit_engine_restarts_total"); got != 1 || s.ClickHouse.Addr() != addr {
		t.Fatalf("restarts %v, addr %s (was %s)", got, s.ClickHouse.Addr(), addr)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("restarted engine: %v", err)
	}
}
