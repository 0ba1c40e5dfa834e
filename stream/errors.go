package stream

import (
	"errors"
	"fmt"
)

var (
	// ErrPermanent marks a sink error that retrying cannot fix (a row the
	// store rejects, a schema mismatch). It stops the pipeline; Run returns
	// it, and the uncommitted records are decided again after a restart.
	ErrPermanent = errors.New("permanent")
	// ErrConfig wraps what Config.Validate reports.
	ErrConfig = errors.New("stream config")
	// ErrRunning is returned by a second call of Run.
	ErrRunning = errors.New("pipeline already ran")
)

// Permanent wraps err so that the pipeline does not retry it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// IsPermanent reports whether err wraps ErrPermanent.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }
