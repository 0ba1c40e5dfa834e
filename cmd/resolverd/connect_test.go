package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var up atomic.Bool // false: reset every connection; true: relay to the engine
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !up.Load() {
				c.(*net.TCPConn).SetLinger(0) // a reset, not a clean close
				c.Close()
				continue
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
	}()
	cfg := sink.Config{Addr: []string{ln.Addr().String()}, Database: "connect_test"}
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

	time.AfterFunc(time.Second, func() { up.Store(true) })
	ch, err := connectClickHouse(ctx, log, cfg, 30*time.Second, sink.WithMigrate())
	if err != nil {
		t.Fatalf("up after 1s: %v", err)
	}
	ch.Close()

	// A refused login is not waited for.
	bad := cfg
	bad.Username = "nobody"
	start = time.Now()
	if _, err := connectClickHouse(ctx, log, bad, 30*time.Second); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("bad user: %v after %s", err, time.Since(start))
	}
}
