package stream

import "errors"

var (
	// ErrConfig wraps what Config.Validate reports.
	ErrConfig = errors.New("stream config")
	// ErrRunning is returned by a second call of Run.
	ErrRunning = errors.New("pipeline already ran")
)
