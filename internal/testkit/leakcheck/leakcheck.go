// Package leakcheck is the TestMain of the module's test binaries: it runs
// the tests, then fails the run when a goroutine outlived them (goleak),
// so that a writer, pool, server or connection a test forgot to close is
// a failure, not a slow leak in production.
//
//	func TestMain(m *testing.M) { leakcheck.Main(m) }
//
// A binary that shares an engine among its tests runs them through
// chenginetest.Main, which stops the engine before the check:
//
//	func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }
package leakcheck

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Option changes how Main runs the tests or what it ignores.
type Option func(*config)

type config struct {
	run    func(*testing.M) int
	after  []func()
	ignore []goleak.Option
}

// Run runs the tests through run instead of m.Run: chenginetest.Main, say,
// which stops the binary's shared engine after them.
func Run(run func(*testing.M) int) Option { return func(c *config) { c.run = run } }

// After runs f after the tests and before the check: closing what the
// tests share (a connection of the package's fixture).
func After(f func()) Option { return func(c *config) { c.after = append(c.after, f) } }

// IgnoreIdleHTTP ignores the goroutines of idle keep-alive connections of
// an HTTP client the tests do not own (the MCP SDK's): they end when the
// server closes them, not when the tests do.
func IgnoreIdleHTTP() Option {
	return func(c *config) {
		c.ignore = append(c.ignore,
			goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
			goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		)
	}
}

// Main runs the tests, then the leak check when they passed, and exits:
// with the tests' status, or 1 when goroutines outlived them (listed on
// stderr).
func Main(m *testing.M, opts ...Option) {
	os.Exit(run(m, opts...))
}

func run(m *testing.M, opts ...Option) int {
	c := config{run: (*testing.M).Run}
	for _, o := range opts {
		o(&c)
	}
	code := c.run(m)
	for _, f := range c.after {
		f()
	}
	if code == 0 {
		if err := goleak.Find(c.ignore...); err != nil {
			fmt.Fprintln(os.Stderr, "leakcheck: goroutines outlived the tests:", err)
			code = 1
		}
	}
	return code
}
