// Package need is the one rule for a test that runs software from outside
// the module (the ClickHouse engine, Chromium, promtool, node and the MCP
// npm packages): without it the test is skipped, with the reason and what
// to install, unless the run requires everything, and then it fails.
//
// One variable says so: TOOLAUDIT_REQUIRE=1 (.ci/run sets it, after it
// installed all of them). Any other value, or none, skips. The variables
// the rule once had (CHENGINE_REQUIRED, MCP_NPM_REQUIRED) fail every test
// that asks, so that a run setting them is not silently skipping.
//
// make test lists every skipped test with its reason at the end of the
// run (cmd/testreport). internal/layout's TestNeed keeps
// every such check here.
package need

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/toolaudit/toolaudit/chengine"
)

// Env is the variable that, set to 1, turns a missing piece of software
// into a failure.
const Env = "TOOLAUDIT_REQUIRE"

// retired are the variables of the rule before this package.
var retired = []string{"CHENGINE_REQUIRED", "MCP_NPM_REQUIRED"}

// Required reports whether the run requires every piece of software.
func Required() bool { return os.Getenv(Env) == "1" }

// Missing skips tb because what is missing, saying how to install it
// (hint), or fails it when the run requires everything.
func Missing(tb testing.TB, what, hint string) {
	tb.Helper()
	checkRetired(tb)
	msg := what
	if hint != "" {
		msg += ": " + hint
	}
	if Required() {
		tb.Fatalf("%s (%s=1: nothing may be skipped)", msg, Env)
	}
	tb.Skipf("%s (%s=1 makes this a failure)", msg, Env)
}

// Tool returns the path of the command name on PATH, or skips or fails
// tb (Missing) with hint, e.g. "apt-get install prometheus".
func Tool(tb testing.TB, name, hint string) string {
	tb.Helper()
	checkRetired(tb)
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(tb, fmt.Sprintf("%s not found on PATH", name), hint)
	}
	return path
}

func checkRetired(tb testing.TB) {
	tb.Helper()
	for _, v := range retired {
		if _, ok := os.LookupEnv(v); ok {
			tb.Fatalf("%s is no longer read: set %s=1 to require every piece of software the tests run", v, Env)
		}
	}
}

// Engine checks that the ClickHouse engine library can be found
// (chengine.Find), or skips or fails tb. chenginetest's servers ask it.
func Engine(tb testing.TB) {
	tb.Helper()
	EngineErr(tb, func() error { _, err := chengine.Find(""); return err }())
}

// EngineErr is Engine for the error of a start that already failed: a
// library not found skips or fails as Missing does; any other error
// fails tb, required or not.
func EngineErr(tb testing.TB, err error) {
	tb.Helper()
	switch {
	case err == nil:
	case errors.Is(err, chengine.ErrNotFound):
		Missing(tb, fmt.Sprintf("ClickHouse engine not found (%v)", err), "scripts/fetch-chengine.sh fetches it")
	default:
		tb.Fatal(err)
	}
}
