package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	"github.com/toolaudit/toolaudit/internal/connsec"
	"github.com/toolaudit/toolaudit/sink"
)

// Environment variables of the ClickHouse password. The RESOLVERD_ one
// was the --clickhouse-password flag's, which is gone (ps showed it); the
// variable keeps working for one release, with a warning.
const (
	envClickHousePassword           = "TOOLAUDIT_CLICKHOUSE_PASSWORD"
	envClickHousePasswordDeprecated = "RESOLVERD_CLICKHOUSE_PASSWORD"
)

// The default --clickhouse: ClickHouse's plain native port, and its
// secure one when TLS is on and the flag is not given.
const (
	defaultCHAddr    = "127.0.0.1:9000"
	defaultCHTLSAddr = "127.0.0.1:9440"
)

// chFlags are the ClickHouse flags of every command that opens ClickHouse.
type chFlags struct {
	addr, db, user, passwordFile, compression string
	addrGiven                                 bool // --clickhouse set (command line or environment)
	tls                                       connsec.TLS
}

// givenString is a string flag that records whether it was set.
type givenString struct {
	s     *string
	given *bool
}

func (g givenString) String() string {
	if g.s == nil {
		return ""
	}
	return *g.s
}

func (g givenString) Set(v string) error { *g.s, *g.given = v, true; return nil }

func (c *chFlags) register(fs *flag.FlagSet) {
	c.addr = defaultCHAddr
	fs.Var(givenString{&c.addr, &c.addrGiven}, "clickhouse", "ClickHouse native protocol `addresses`, comma-separated (default with --clickhouse-tls: "+defaultCHTLSAddr+", ClickHouse's secure native port)")
	fs.StringVar(&c.db, "database", sink.DefaultDatabase, "ClickHouse `database`")
	fs.StringVar(&c.user, "clickhouse-user", "default", "ClickHouse `user`")
	fs.StringVar(&c.passwordFile, "clickhouse-password-file", "", "`FILE` holding the password of --clickhouse-user (default: the "+envClickHousePassword+" variable, else none; never a flag value, which ps shows)")
	fs.StringVar(&c.compression, "clickhouse-compression", "auto", "native protocol `compression`: auto (none to a loopback address, lz4 to others), lz4, zstd or none")
	c.tls.Register(fs, "clickhouse", "ClickHouse")
}

// secured reports whether any TLS or password setting is given, which
// the embedded engine (plain TCP, no users) cannot honour.
func (c *chFlags) secured(getenv func(string) string) bool {
	return c.tls.Enabled() || c.passwordFile != "" || getenv(envClickHousePassword) != ""
}

// config resolves the flags into the sink's configuration: it reads the
// TLS files and the password (never logged: log gets where it came from).
// getenv is os.Getenv in production.
func (c *chFlags) config(getenv func(string) string, log *slog.Logger) (sink.Config, error) {
	cfg := sink.DefaultConfig()
	cfg.Addr = splitList(c.addr)
	if !c.addrGiven && c.addr == defaultCHAddr && c.tls.Enabled() {
		// The plain port's default would fail the handshake. A :9000
		// given with TLS stays as given (a server may take TLS there).
		cfg.Addr = []string{defaultCHTLSAddr}
		log.Info("clickhouse: TLS is on and --clickhouse is not given: using the secure native port", "addr", defaultCHTLSAddr)
	}
	cfg.Database, cfg.Username = c.db, c.user
	cfg.Compression = c.compression
	pw, from, err := connsec.Secret{File: c.passwordFile, Env: envClickHousePassword}.Read(getenv)
	switch {
	case errors.Is(err, connsec.ErrNoSecret):
		if old := getenv(envClickHousePasswordDeprecated); old != "" {
			pw, from = old, "environment variable "+envClickHousePasswordDeprecated
			log.Warn("deprecated: " + envClickHousePasswordDeprecated + " will stop working in the next release; use " + envClickHousePassword + " or --clickhouse-password-file")
		}
	case err != nil:
		return cfg, fmt.Errorf("clickhouse password: %w", err)
	default:
		if getenv(envClickHousePasswordDeprecated) != "" {
			log.Warn(envClickHousePasswordDeprecated+" is ignored: the password comes from the "+from, "user", c.user)
		}
	}
	cfg.Password = pw
	if cfg.TLS, err = c.tls.Config(); err != nil {
		return cfg, fmt.Errorf("clickhouse %w", err)
	}
	if from != "" {
		log.Debug("clickhouse password", "user", c.user, "from", from)
	}
	return cfg, cfg.Validate()
}

// clusterFlags lay the schema out on a ClickHouse cluster (run's start-up
// migration and migrate).
type clusterFlags struct {
	name       string
	replicated bool
}

func (c *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.name, "cluster", "", "ClickHouse `CLUSTER` (of remote_servers) to lay the schema out on: tables per shard (NAME_local), Distributed tables over them, decisions sharded by cityHash64(call_key) (default: one server)")
	fs.BoolVar(&c.replicated, "cluster-replicated", true, "with --cluster: Replicated engines and ON CLUSTER DDL, which need ClickHouse Keeper (false: plain shards without replicas; migrate every server)")
}

// cluster is the layout, nil for one server.
func (c *clusterFlags) cluster() (*sink.Cluster, error) {
	if c.name == "" {
		return nil, nil
	}
	cl := sink.Cluster{Name: c.name, Replicated: c.replicated}
	if err := cl.Validate(); err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	return &cl, nil
}
