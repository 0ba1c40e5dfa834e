// Package chenginetest gives tests a real ClickHouse engine (package chengine)
// and decides what happens when the engine library has not been fetched.
//
// The gate is the test kit's one rule (internal/testkit/need): if
// libchdb.so cannot be found, tests that ask for a server are skipped with
// a message saying how to fetch it, unless TOOLAUDIT_REQUIRE=1 (CI sets
// it), in which case they fail. Any other start failure always fails. So
// a machine without the library never passes silently in CI.
// Tests that never ask for a server are unaffected either way.
//
// Typical use, one server per test binary (a start costs 0.3-1 s and ~210 MB):
//
//	func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }
//
// (package internal/testkit/leakcheck: Main runs the tests, then checks
// that no goroutine outlived them; or os.Exit(chenginetest.Main(m)).)
//
//	func TestX(t *testing.T) {
//		srv := chenginetest.Server(t)
//		conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
//		...
//	}
//
// Tests sharing that server should use their own database or table names.
// Start gives a test a private server instead, Supervise a private server
// that is restarted when it dies.
package chenginetest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

var (
	mainCalled bool
	once       sync.Once
	shared     *chengine.Server
	sharedDir  string
	sharedErr  error // why shared is nil
)

// Main runs the tests and then stops the shared server, if a test started it,
// and removes its data; call it from TestMain as os.Exit(chenginetest.Main(m)).
// The server starts on the first call to Server, so a run whose selected
// tests need no engine costs nothing.
func Main(m *testing.M) int {
	mainCalled = true
	code := m.Run()
	if shared != nil {
		if err := shared.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "chenginetest:", err)
			code = 1
		}
	}
	if sharedDir != "" {
		os.RemoveAll(sharedDir)
	}
	return code
}

// Server returns the test binary's shared server, starting it on first use
// with its data in a temporary directory. Without a library it skips tb, or
// fails it when the run requires everything (need.Engine); any other
// start failure fails tb.
func Server(tb testing.TB) *chengine.Server {
	tb.Helper()
	if !mainCalled {
		tb.Fatal("chenginetest.Server needs TestMain to call chenginetest.Main (which stops the server)")
	}
	once.Do(func() {
		if sharedDir, sharedErr = os.MkdirTemp("", "chenginetest-"); sharedErr == nil {
			shared, sharedErr = chengine.Start(context.Background(), chengine.Options{Dir: sharedDir})
		}
	})
	if shared == nil {
		gate(tb, sharedErr)
	}
	return shared
}

// Start starts a private server with its data in tb.TempDir() (or opts.Dir if
// set), stopped when the test ends. Gating is as for Server.
func Start(tb testing.TB, opts chengine.Options) *chengine.Server {
	tb.Helper()
	return private(tb, opts, func(o chengine.Options) (*chengine.Server, error) {
		return chengine.Start(context.Background(), o)
	})
}

// Supervise starts a private supervised engine (chengine.Supervise) with
// its data in tb.TempDir() (or opts.Dir if set), stopped when the test ends.
// Gating is as for Server.
func Supervise(tb testing.TB, opts chengine.Options, o ...chengine.SuperviseOption) *chengine.Supervisor {
	tb.Helper()
	return private(tb, opts, func(op chengine.Options) (*chengine.Supervisor, error) {
		return chengine.Supervise(context.Background(), op, o...)
	})
}

// private starts an engine for one test with start, gated as for Server.
func private[E interface{ Stop() error }](tb testing.TB, opts chengine.Options, start func(chengine.Options) (E, error)) E {
	tb.Helper()
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	e, err := start(opts)
	if err != nil {
		gate(tb, err)
	}
	tb.Cleanup(func() {
		if err := e.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return e
}

// EngineMetric is the value of one of a supervisor's metrics (a counter
// or gauge without labels, such as toolaudit_engine_restarts_total) in g.
func EngineMetric(tb testing.TB, g prometheus.Gatherer, name string) float64 {
	tb.Helper()
	mfs, err := g.Gather()
	if err != nil {
		tb.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	tb.Fatalf("no metric %s", name)
	return 0
}

// gate skips or fails tb for a start that failed with err, by the one
// rule (need.EngineErr).
func gate(tb testing.TB, err error) {
	tb.Helper()
	need.EngineErr(tb, err)
}
