package main

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/connsec"
	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
	"github.com/toolaudit/toolaudit/sink"
)

// TestConnectClickHouseTLSRefused: a ClickHouse TLS port that requires a
// client certificate (a TLS-terminating proxy in front of the real
// engine) refuses resolverd's handshake without one at once and the
// error names the flag, as Kafka's does; no retries, no "a TLS port?".
func TestConnectClickHouseTLSRefused(t *testing.T) {
	srv := chenginetest.Start(t, chengine.Options{})
	certs := tlstest.New(t)
	p := tlstest.NewProxy(t, certs.Server(true), srv.Addr())
	c := chFlags{addr: p.Addr(), db: "connect_tls_test", user: "default", compression: "auto", tls: connsec.TLS{CA: certs.CAFile}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg, err := c.config(func(string) string { return "" }, log)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = connectClickHouse(context.Background(), log, cfg, 30*time.Second, sink.WithMigrate())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "check --clickhouse-tls-cert") || strings.Contains(err.Error(), "a TLS port?") {
		t.Fatalf("no client certificate: %v", err)
	}
	if took > time.Second {
		t.Errorf("failed after %s: a refused handshake is not retried", took)
	}
	if n := p.Handshakes() + p.Failed(); n != 1 {
		t.Errorf("%d handshakes, want 1", n)
	}
	// With the certificate it connects.
	c.tls.Cert, c.tls.Key = certs.ClientCertFile, certs.ClientKeyFile
	if cfg, err = c.config(func(string) string { return "" }, log); err != nil {
		t.Fatal(err)
	}
	ch, err := connectClickHouse(context.Background(), log, cfg, 30*time.Second, sink.WithMigrate())
	if err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	ch.Close()
}
