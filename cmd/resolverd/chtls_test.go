package main

import (
	"context"
	"crypto/tls"
	"flag"
	"io"
	"log/slog"
	"net"
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
	if n := p.Attempts(5 * time.Second); n != 1 {
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

// TestClickHouseTLSDefaultAddr: with TLS on and --clickhouse not given,
// the default address is ClickHouse's secure native port, 9440; a
// --clickhouse given stays as given, :9000 included. The real run
// migrates through a TLS proxy at 127.0.0.1:9440 in front of the engine.
func TestClickHouseTLSDefaultAddr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "127.0.0.1:9000"},
		{[]string{"--clickhouse-tls"}, "127.0.0.1:9440"},
		{[]string{"--clickhouse-tls-ca", "ca.pem"}, "127.0.0.1:9440"},
		{[]string{"--clickhouse-tls", "--clickhouse", "127.0.0.1:9000"}, "127.0.0.1:9000"},
		{[]string{"--clickhouse-tls", "--clickhouse", "ch.example:9441"}, "ch.example:9441"},
		{[]string{"--clickhouse", "127.0.0.1:9440"}, "127.0.0.1:9440"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		var c chFlags
		c.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		// The CA file is not read here: TLS on, without files.
		c.tls = connsec.TLS{Enable: c.tls.Enabled()}
		cfg, err := c.config(func(string) string { return "" }, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(cfg.Addr, ","); got != tc.want {
			t.Errorf("%v: address %s, want %s", tc.args, got, tc.want)
		}
	}

	srv := chenginetest.Start(t, chengine.Options{})
	certs := tlstest.New(t)
	if _, err := tlstest.NewProxyAt(t, certs.Server(false), "127.0.0.1:9440", srv.Addr()); err != nil {
		t.Skipf("cannot listen at ClickHouse's secure port here: %v", err)
	}
	code, _, stderr := runCmd(t, "", "migrate", "--clickhouse-tls-ca", certs.CAFile, "--database", "tls_default_addr")
	if code != 0 {
		t.Fatalf("migrate with --clickhouse-tls-ca and no --clickhouse: exit %d\n%s", code, stderr)
	}
}

// TestClickHouseTLSToPlainPort: --clickhouse-tls with a --clickhouse that
// is a plain port (the embedded engine's, guarded) fails at once, saying
// the port does not speak TLS and which is the secure one; the engine
// serves on.
func TestClickHouseTLSToPlainPort(t *testing.T) {
	srv := chenginetest.Start(t, chengine.Options{Guard: true})
	start := time.Now()
	code, _, stderr := runCmd(t, "", "migrate", "--clickhouse-tls", "--clickhouse", srv.Addr(), "--database", "tls_plain_port")
	if code == 0 || !strings.Contains(stderr, "does not speak TLS") || !strings.Contains(stderr, "9440") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("failed after %s, want at once", d)
	}
	time.Sleep(5 * time.Second) // an abort would end the engine within 4.5 s
	if err := chenginetest.Login(t, srv.Addr(), "default", "", ""); err != nil {
		t.Fatalf("the engine after a TLS ClientHello: %v", err)
	}
}

// TestConnectClickHouseResetWithTLS: a server that resets every
// connection is waited for a few seconds as before, but with TLS already
// on the error does not ask whether the port is a TLS one.
func TestConnectClickHouseResetWithTLS(t *testing.T) {
	rst, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer rst.Close()
	go func() {
		for {
			c, err := rst.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}()
	cfg := sink.Config{Addr: []string{rst.Addr().String()}, Database: "x", TLS: &tls.Config{}}
	_, err = connectClickHouse(context.Background(), slog.New(slog.DiscardHandler), cfg, 30*time.Second)
	if err == nil || strings.Contains(err.Error(), "a TLS port?") || !strings.Contains(err.Error(), "TLS is on") {
		t.Fatalf("reset with TLS on: %v", err)
	}
}
