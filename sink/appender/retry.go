package appender

import (
	"context"
	"errors"
	"time"
)

// Retry calls write until it succeeds, fails with an error retrying cannot
// fix (IsPermanent), or ctx ends, waiting from minWait, doubling up to
// maxWait, between failures. failed is told each failure and the wait
// before the next try (0 when the failure is permanent); a failure caused
// by ctx ending is not reported. Retry returns nil, the permanent error
// (the caller drops what it could not write, and says so), or ctx's
// error joined with the last failure.
func Retry(ctx context.Context, minWait, maxWait time.Duration, write func(context.Context) error, failed func(err error, wait time.Duration)) error {
	wait := minWait
	for {
		err := write(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if IsPermanent(err) {
			failed(err, 0)
			return err
		}
		failed(err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
	}
}
