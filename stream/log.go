package stream

import "github.com/toolaudit/toolaudit/internal/ratelog"

// every lets one log line through per interval and counts the rest, so a
// stalled partition does not flood the log with the same retry.
type every = ratelog.Every
