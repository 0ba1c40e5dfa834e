package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/sink"
)

// TestConnectClickHouseWaits: resolverd run started while ClickHouse is
// not answering yet (connections reset, as by an engine restarting)
// waits for it within --connect-timeout, and says so when it never comes.
func TestConnectClickHouseWaits(t *testing.T) {
	srv := chenginetest.Start(t, chengine.Options{})
	// A port nothing listens on until the relay to the engine starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := sink.Config{Addr: []string{addr}, Database: "connect_test"}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()

	start := time.Now()
	_, err = connectClickHouse(ctx, log, cfg, time.Second, sink.WithMigrate())
	if err == nil || !strings.Contains(err.Error(), "not reachable for 1s") {
		t.Fatalf("never up: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("gave up after %s, want about 1s", d)
	}

	relay := make(chan net.Listener, 1)
	time.AfterFunc(time.Second, func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			close(relay)
			return
		}
		relay <- ln
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				e, err := net.Dial("tcp", srv.Addr())
				if err != nil {
					return
				}
				defer e.Close()
				go io.Copy(e, c)
				io.Copy(c, e)
			}()
		}
	})
	ch, err := connectClickHouse(ctx, log, cfg, 30*time.Second, sink.WithMigrate())
	if err != nil {
		t.Fatalf("up after 1s: %v", err)
	}
	ch.Close()
	if ln, ok := <-relay; ok {
		defer ln.Close()
	}

	// A connection reset by the server every time (a plaintext client at
	// a TLS port) fails within resetWait, a refused login at once.
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
	bad := cfg
	bad.Addr = []string{rst.Addr().String()}
	start = time.Now()
	if _, err := connectClickHouse(ctx, log, bad, 30*time.Second); err == nil || !strings.Contains(err.Error(), "a TLS port?") || time.Since(start) > 8*time.Second {
		t.Fatalf("reset: %v after %s", err, time.Since(start))
	}
	bad = cfg
	bad.Addr = []string{srv.Addr()}
	bad.Username = "nobody"
	start = time.Now()
	if _, err := connectClickHouse(ctx, log, bad, 30*time.Second); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("bad user: %v after %s", err, time.Since(start))
	}
}
