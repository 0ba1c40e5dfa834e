package stream

import (
	"context"
	"time"

	"github.com/toolaudit/toolaudit/internal/ratelog"
)

// every lets one log line through per interval and counts the rest, so a
// stalled partition does not flood the log with the same retry.
type every = ratelog.Every

// backoff returns the wait before retry attempt n (0-based): min doubled n
// times, capped at max.
func backoff(n int, min, max time.Duration) time.Duration {
	d := min
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	if d > max {
		d = max
	}
	return d
}

// sleep waits d or until ctx is done, and reports whether it waited d.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
