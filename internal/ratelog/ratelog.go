// Package ratelog lets one log line of a kind through per interval and
// counts the others, so that a failure repeated thousands of times a
// second (a sink down, a broker gone) does not flood the log.
package ratelog

import (
	"sync"
	"time"
)

// Every lets one event through per Interval. The zero value lets every
// event through; it is safe for concurrent use.
type Every struct {
	Interval time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Allow reports whether to log now and how many events were suppressed
// since the last one let through.
func (e *Every) Allow() (bool, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < e.Interval {
		e.suppressed++
		return false, 0
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return true, n
}
