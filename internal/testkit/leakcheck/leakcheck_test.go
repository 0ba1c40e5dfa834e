package leakcheck

import (
	"testing"
)

func TestMain(m *testing.M) { Main(m) }

// TestRun: a goroutine left running fails a passing run, unless an After
// hook ends it first; a failing run keeps its status; After runs after
// the tests.
func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int  // the tests' status
		leak      bool // a goroutine outlives the tests
		stopAfter bool // an After hook ends it
		want      int
	}{
		{"clean", 0, false, false, 0},
		{"leak", 0, true, false, 1},
		{"leak ended by After", 0, true, true, 0},
		{"failed", 3, false, false, 3},
		{"failed and leaked", 3, true, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stop := make(chan struct{})
			var order []string
			tests := func(*testing.M) int {
				order = append(order, "tests")
				if tc.leak {
					go func() { <-stop }()
				}
				return tc.code
			}
			opts := []Option{Run(tests), After(func() { order = append(order, "after") })}
			if tc.stopAfter {
				opts = append(opts, After(func() { close(stop) }))
			}
			if got := run(nil, opts...); got != tc.want {
				t.Errorf("status %d, want %d", got, tc.want)
			}
			if !tc.stopAfter {
				close(stop)
			}
			if len(order) != 2 || order[0] != "tests" || order[1] != "after" {
				t.Errorf("ran %v, want tests then after", order)
			}
		})
	}
}
