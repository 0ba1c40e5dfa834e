package appender_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// kindError is a store's own error type that is permanent through its Is
// method, as sink.Permanent is.
type kindError struct{ err error }

func (e kindError) Error() string        { return e.err.Error() }
func (e kindError) Unwrap() error        { return e.err }
func (e kindError) Is(target error) bool { return target == appender.ErrPermanent }

func TestIsPermanent(t *testing.T) {
	base := errors.New("column mismatch")
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"context", context.Canceled, false},
		{"Permanent", appender.Permanent(base), true},
		{"wrapped Permanent", fmt.Errorf("write of 3 rows: %w", appender.Permanent(base)), true},
		{"error type with Is", fmt.Errorf("x: %w", kindError{base}), true},
		{"joined", errors.Join(base, appender.Permanent(base)), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := appender.IsPermanent(tt.err); got != tt.want {
				t.Errorf("IsPermanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
	if err := appender.Permanent(base); !errors.Is(err, base) {
		t.Errorf("Permanent(%v) = %v: lost the cause", base, err)
	}
	if appender.Permanent(nil) != nil {
		t.Error("Permanent(nil) != nil")
	}
}

// batcher is a Batcher whose batches are its own.
type batcher struct{ appender.SinkFunc }

type ownBatch struct{ appender.Batch }

func (b batcher) NewBatch() appender.Batch { return ownBatch{} }

// TestNewBatch: a Batcher's own batch, else one that holds the rows,
// counts them, sizes them, writes them through Write and drops them on
// Reset.
func TestNewBatch(t *testing.T) {
	if _, ok := appender.NewBatch(batcher{}).(ownBatch); !ok {
		t.Fatal("NewBatch of a Batcher is not its own batch")
	}
	var got [][]schema.Row
	s := appender.SinkFunc(func(_ context.Context, rows []schema.Row) error {
		got = append(got, append([]schema.Row(nil), rows...))
		return nil
	})
	b := appender.NewBatch(s)
	b.Append([]schema.Row{{Tool: "a"}, {Tool: "b", ArgsRaw: "0123456789"}})
	b.Append([]schema.Row{{Tool: "c"}})
	if b.Len() != 3 {
		t.Fatalf("Len = %d, want 3", b.Len())
	}
	small := appender.NewBatch(s)
	small.Append([]schema.Row{{Tool: "a"}, {Tool: "b"}, {Tool: "c"}})
	if b.Size() != small.Size()+10 || small.Size() <= 0 {
		t.Fatalf("Size = %d, want %d (the same rows without 10 bytes of arguments) + 10", b.Size(), small.Size())
	}
	if err := b.Write(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got[0]) != 3 || got[0][2].Tool != "c" {
		t.Fatalf("written %v, want one write of a, b, c", got)
	}
	b.Reset()
	if b.Len() != 0 || b.Size() != 0 {
		t.Fatalf("after Reset: Len %d, Size %d", b.Len(), b.Size())
	}
}

// TestRetry: a write that fails is tried again, waits doubling up to the
// bound, until it succeeds; a permanent failure ends it at once; ctx's
// end is reported without a failure; failed's error ends it with that
// error.
func TestRetry(t *testing.T) {
	ctx := context.Background()
	var waits []time.Duration
	var attempts []int
	failed := func(_ error, attempt int, w time.Duration) error {
		waits, attempts = append(waits, w), append(attempts, attempt)
		return nil
	}
	n := 0
	err := appender.Retry(ctx, time.Millisecond, 3*time.Millisecond, func(context.Context) error {
		if n++; n < 5 {
			return errors.New("busy")
		}
		return nil
	}, failed)
	if err != nil || n != 5 || fmt.Sprint(waits) != "[1ms 2ms 3ms 3ms]" || fmt.Sprint(attempts) != "[1 2 3 4]" {
		t.Fatalf("err %v after %d writes, waits %v, attempts %v", err, n, waits, attempts)
	}
	waits = nil
	bad := appender.Permanent(errors.New("no such column"))
	if err := appender.Retry(ctx, time.Millisecond, time.Second, func(context.Context) error { return bad }, failed); !appender.IsPermanent(err) || fmt.Sprint(waits) != "[0s]" {
		t.Fatalf("permanent: %v, waits %v", err, waits)
	}
	cctx, cancel := context.WithCancel(ctx)
	waits = nil
	err = appender.Retry(cctx, time.Hour, time.Hour, func(context.Context) error { cancel(); return errors.New("down") }, failed)
	if !errors.Is(err, context.Canceled) || len(waits) != 0 {
		t.Fatalf("cancelled: %v, waits %v", err, waits)
	}

	// failed's error ends the loop, after a transient failure or a
	// permanent one, and is what Retry returns.
	down, stop := errors.New("down"), errors.New("giving up")
	for _, werr := range []error{down, bad} {
		n = 0
		err = appender.Retry(ctx, time.Millisecond, time.Millisecond, func(context.Context) error { n++; return werr },
			func(err error, attempt int, _ time.Duration) error {
				if attempt == 3 || appender.IsPermanent(err) {
					return fmt.Errorf("%w: %w", stop, err)
				}
				return nil
			})
		want := 3
		if werr == bad {
			want = 1
		}
		if !errors.Is(err, stop) || !errors.Is(err, werr) || n != want {
			t.Fatalf("stopped by failed (%v): %v after %d writes", werr, err, n)
		}
	}
}
