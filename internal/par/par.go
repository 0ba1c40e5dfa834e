// Package par runs independent pieces of CPU-bound work on every core.
package par

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// For calls f(i) for every i in [0, n), on up to GOMAXPROCS goroutines
// with at least minPerWorker calls each; with fewer calls than that, on
// the caller's goroutine. It returns when every call has returned. The
// calls must be safe to run concurrently.
func For(n, minPerWorker int, f func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n/max(minPerWorker, 1))
	if workers <= 1 {
		for i := range n {
			f(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				f(int(i))
			}
		})
	}
	wg.Wait()
}
