package chengine_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
)

// cpuSelf is this process's CPU time (user and system): the client's,
// and with the guard the guard's too, not the engine child's.
func cpuSelf() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkGuard: what the guard (Options.Guard) adds to the data path,
// the same engine reached through the guard and directly: an INSERT of
// 100k rows (~3.5 MB on the wire), a SELECT of 1M rows (~16 MB), and a
// new connection's ping (the guard checks its login over HTTP). The
// cpu-µs/op metric is this process's CPU (client plus guard): the
// difference between the two paths is the guard's.
func BenchmarkGuard(b *testing.B) {
	srv := chenginetest.Start(b, chengine.Options{Guard: true})
	ctx := context.Background()
	type path struct {
		name, table string
		conn        clickhouse.Conn
		addr        string
	}
	var paths []path
	for _, p := range []path{{name: "direct", addr: srv.EngineAddr()}, {name: "guarded", addr: srv.Addr()}} {
		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{p.addr}, MaxOpenConns: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		p.conn, p.table = conn, "default.bench_"+p.name
		for _, q := range []string{"DROP TABLE IF EXISTS " + p.table,
			"CREATE TABLE " + p.table + " (k UInt64, s String, v Float64) ENGINE = MergeTree ORDER BY k"} {
			if err := conn.Exec(ctx, q); err != nil {
				b.Fatal(err)
			}
		}
		paths = append(paths, p)
	}
	ops := []struct {
		name string
		f    func(b *testing.B, p path)
	}{
		{"insert-100k", func(b *testing.B, p path) {
			batch, err := p.conn.PrepareBatch(ctx, "INSERT INTO "+p.table)
			if err != nil {
				b.Fatal(err)
			}
			for i := range 100_000 {
				batch.Append(uint64(i), fmt.Sprintf("value-%08d", i), float64(i))
			}
			if err := batch.Send(); err != nil {
				b.Fatal(err)
			}
		}},
		{"select-1M", func(b *testing.B, p path) {
			rows, err := p.conn.Query(ctx, "SELECT number, toString(number) FROM system.numbers LIMIT 1000000")
			if err != nil {
				b.Fatal(err)
			}
			var n uint64
			var s string
			for rows.Next() {
				rows.Scan(&n, &s)
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
			rows.Close()
		}},
		{"connect-ping", func(b *testing.B, p path) {
			c, err := clickhouse.Open(&clickhouse.Options{Addr: []string{p.addr}})
			if err != nil {
				b.Fatal(err)
			}
			if err := c.Ping(ctx); err != nil {
				b.Fatal(err)
			}
			c.Close()
		}},
	}
	// Each operation on both paths in turn, so that load on the machine
	// falls on both alike.
	for _, op := range ops {
		for _, p := range paths {
			b.Run(op.name+"/"+p.name, func(b *testing.B) {
				c0 := cpuSelf()
				for b.Loop() {
					op.f(b, p)
				}
				b.ReportMetric(float64((cpuSelf()-c0).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
