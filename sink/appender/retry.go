package appender

import (
	"context"
	"errors"
	"time"
)

// Retry is the one retry loop of the writers here (the pipeline's writer,
// the re-analysis, the history recorders): it calls write until it
// succeeds, fails with an error retrying cannot fix (IsPermanent), ctx
// ends, or failed stops it, waiting from minWait, doubling up to maxWait,
// between failures.
//
// failed is told each failure, the number of the attempt (from 1) and the
// wait before the next one (0 when the failure is permanent: there is no
// next); it returns nil to go on, or the error Retry returns instead (a
// bound on the time spent, a permanent error wrapped with what it
// refused). A failure caused by ctx ending is not reported. Retry returns
// nil, the permanent error (the caller drops what it could not write, and
// says so) or failed's, ctx's error, or ctx's error joined with the last
// failure when ctx ends during a wait.
func Retry(ctx context.Context, minWait, maxWait time.Duration, write func(context.Context) error, failed func(err error, attempt int, wait time.Duration) error) error {
	wait := minWait
	for attempt := 1; ; attempt++ {
		err := write(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if IsPermanent(err) {
			if ferr := failed(err, attempt, 0); ferr != nil {
				return ferr
			}
			return err
		}
		if ferr := failed(err, attempt, wait); ferr != nil {
			return ferr
		}
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
