package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestReport runs the real `go test -json` on the packages of
// testdata/mod: one passing with a skipped test, one failing with a skipped
// subtest, one that does not build, one that panics.
func TestReport(t *testing.T) {
	goBin := need.Tool(t, "go", "the test runs go test on its fixtures: put the Go toolchain on PATH")
	t.Chdir("testdata/mod")
	t.Setenv("GOWORK", "off")
	t.Setenv("GOFLAGS", "")
	tests := []struct {
		name    string
		args    []string
		code    int
		want    []string
		notWant []string
	}{
		{"skipped tests listed after ok", []string{"./pass"}, 0,
			[]string{"ok  \tfixture/pass\t", "SKIPPED: 1 tests did not run", "  fixture/pass: TestSkip\n      engine not fetched (see README)\n"},
			[]string{"hello from a passing test", "=== RUN", "--- PASS", "\nPASS\n", "--- SKIP"}},
		{"failures, build errors, panics", []string{"./..."}, 1,
			[]string{
				"ok  \tfixture/pass\t",
				"fail_test.go:6: boom", "--- FAIL: TestFail/sub", "FAIL\tfixture/fail\t",
				"declared and not used: x", "FAIL\tfixture/broken [build failed]",
				"before the panic", "panic: kaboom", "FAIL\tfixture/panics\t",
				"SKIPPED: 2 tests", "  fixture/fail: TestFail/subskip\n      nope 1\n",
			},
			[]string{"hello from a passing test", "=== RUN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--", goBin, "test", "-json", "-count=1"}, tt.args...)
			code := run(args, &out, &errb)
			all := out.String() + errb.String()
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("output lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(all, w) {
					t.Errorf("output has %q", w)
				}
			}
			if t.Failed() {
				t.Logf("output:\n%s", all)
			}
		})
	}
}

// TestExitStatus: the command's own status wins, and a command that cannot
// start is a failure.
func TestExitStatus(t *testing.T) {
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"--", "sh", "-c", "exit 3"}, 3},
		{[]string{"--", "sh", "-c", `echo '{"Action":"fail","Package":"p"}'`}, 1},
		{[]string{"--", "sh", "-c", "echo not json"}, 0},
		{[]string{"--", "/nonexistent/go"}, 1},
		{nil, 2},
	}
	for _, tt := range tests {
		var out bytes.Buffer
		if code := run(tt.args, &out, &out); code != tt.code {
			t.Errorf("%q: exit %d, want %d\n%s", tt.args, code, tt.code, out.String())
		}
	}
}
