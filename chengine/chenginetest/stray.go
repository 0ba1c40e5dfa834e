package chenginetest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// Login opens a native connection to addr as user with password in
// database db (empty: the user's default), pings and closes it: the
// login's error, nil when it was accepted.
func Login(tb testing.TB, addr, user, password, db string) error {
	tb.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, Auth: clickhouse.Auth{Username: user, Password: password, Database: db}})
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return conn.Ping(ctx)
}

// ResetIdle opens a native connection to addr, pings, and closes it with
// an RST (SO_LINGER 0) while the engine waits for its next query: what a
// client killed between queries does (chengine's package doc).
func ResetIdle(tb testing.TB, addr string) {
	tb.Helper()
	var last *net.TCPConn
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, MaxOpenConns: 1,
		DialContext: func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				last = c.(*net.TCPConn)
			}
			return c, err
		}})
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Ping(context.Background()); err != nil {
		tb.Fatal(err)
	}
	last.SetLinger(0)
	last.Close()
}
