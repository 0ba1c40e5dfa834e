package par

import (
	"sync/atomic"
	"testing"
)

// TestFor: every index is run exactly once, small or large n.
func TestFor(t *testing.T) {
	for _, n := range []int{0, 1, 31, 32, 1000, 100_000} {
		counts := make([]atomic.Int32, n)
		For(n, 32, func(i int) { counts[i].Add(1) })
		for i := range counts {
			if c := counts[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d ran %d times", n, i, c)
			}
		}
	}
}
