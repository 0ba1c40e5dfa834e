// Package appender is the contract of a store of decision rows: the batch
// appender every writer implements (the ClickHouse sink, the decisions
// topic) and every caller writes through (the pipeline, the re-analysis),
// and the one rule that says a write failed for good. It is the storage
// interface of package sink, kept apart from the ClickHouse driver so that
// callers and other stores depend on the contract alone (as Prometheus'
// storage.Appender and the OpenTelemetry collector's consumererror are).
//
// A write returns nil only when every row is durably stored. Any error
// that does not wrap [ErrPermanent] may be retried, with the same rows,
// and is by every caller here: with backoff until it succeeds (the
// pipeline, whose partitions stall, nothing dropped) or for a bounded time
// (the re-analysis). A row may be written more than once (a retry after a
// partial write, a partition that moved before its commit): a store keeps
// one row per (AnalysisID, CallKey). An error wrapping ErrPermanent
// ([Permanent]) means retrying cannot help (a row the store rejects, a
// schema mismatch): the caller stops, or drops what it cannot store, and
// says so.
package appender

import (
	"context"
	"errors"
	"fmt"
	"unsafe"

	"github.com/toolaudit/toolaudit/schema"
)

// Sink stores decision rows.
//
// Write returns nil only when every row is durably stored; its errors are
// as the package documentation says. Write must return soon after ctx is
// done: callers wait for it on shutdown. Write must not retain rows or
// anything it points to after returning: the slice is reused.
type Sink interface {
	Write(ctx context.Context, rows []schema.Row) error
}

// SinkFunc adapts a function to a [Sink].
type SinkFunc func(ctx context.Context, rows []schema.Row) error

// Write calls f.
func (f SinkFunc) Write(ctx context.Context, rows []schema.Row) error { return f(ctx, rows) }

var _ Sink = SinkFunc(nil)

// Batcher is a Sink that gathers the rows of a write in its own form as
// they arrive (the ClickHouse sink: encoded columns), rather than as a
// slice of rows, which at a batch of 100k rows would hold tens of
// megabytes of pointers for the garbage collector to scan. [NewBatch]
// uses it when a Sink has it.
type Batcher interface {
	Sink
	NewBatch() Batch
}

// Batch is a write being gathered. A caller may keep two, one being
// filled while the other is written; it Resets a batch once it is stored
// and fills it again.
//
// Every part of a write is a method here, none an optional interface
// found by type assertion: a wrapper (Tee) must then forward each, so it
// cannot drop one silently (a Tee that forwarded Reserve but not
// AppendEvents once refused --archive-calls beside --decisions-topic). A
// store that cannot take a part says so: Archives reports false, and a
// Write after AppendEvents fails for good rather than drop the records.
type Batch interface {
	// Append adds rows, copying what it keeps: rows are reused after.
	Append(rows []schema.Row)
	// AppendEvents adds the call records of the rows, as they were
	// produced, copying what it keeps: Write stores them too (table
	// call_events) and returns nil only once they are. A batch whose
	// store keeps no archive (Archives false) fails its next Write with
	// ErrNoArchive.
	AppendEvents(evs []schema.CallEvent)
	// Archives reports whether the batch stores the records AppendEvents
	// gives it; callers check it once, before they archive.
	Archives() bool
	// Reserve says how far the batch will be filled, at most rows rows
	// or bytes bytes (Size), so that it can size its buffers once; a
	// batch with nothing to size ignores it.
	Reserve(rows, bytes int)
	// Len is the number of rows appended since the last Reset.
	Len() int
	// Size is about how many bytes the appended rows take in the batch.
	Size() int
	// Write stores the batch with Sink.Write's contract (errors, retries,
	// ErrPermanent); after an error it is called again on the same batch.
	Write(ctx context.Context) error
	// Reset empties the batch for reuse.
	Reset()
}

// ErrNoArchive is the permanent error of a Write whose batch was given
// call records by a store that keeps no archive.
var ErrNoArchive = Permanent(errors.New("call records given to a store that keeps no archive of them"))

// NewBatch returns a new batch of s: its own (Batcher), or else a batch
// that holds the rows themselves and writes them through s.Write.
func NewBatch(s Sink) Batch {
	if bs, ok := s.(Batcher); ok {
		return bs.NewBatch()
	}
	return &rowsBatch{s: s}
}

// rowsBatch is the Batch of a Sink without NewBatch: the rows themselves.
type rowsBatch struct {
	s      Sink
	rows   []schema.Row
	bytes  int
	events bool // AppendEvents was called: Write fails, nothing to archive them in
}

func (b *rowsBatch) Append(rows []schema.Row) {
	b.rows = append(b.rows, rows...)
	for i := range rows {
		r := &rows[i]
		// The row, and the strings that can be large; the others are
		// names and ids.
		b.bytes += int(unsafe.Sizeof(*r)) + len(r.ArgsRaw) + len(r.ArgsShape) + len(r.Reason) + len(r.Path)
	}
}
func (b *rowsBatch) AppendEvents(evs []schema.CallEvent) { b.events = b.events || len(evs) > 0 }
func (b *rowsBatch) Archives() bool                      { return false }
func (b *rowsBatch) Reserve(rows, bytes int)             {}
func (b *rowsBatch) Len() int                            { return len(b.rows) }
func (b *rowsBatch) Size() int                           { return b.bytes }
func (b *rowsBatch) Write(ctx context.Context) error {
	if b.events {
		return ErrNoArchive
	}
	return b.s.Write(ctx, b.rows)
}
func (b *rowsBatch) Reset() {
	clear(b.rows) // drop the references to the calls' strings
	b.rows = b.rows[:0]
	b.bytes = 0
	b.events = false
}

// ErrPermanent marks a write error that retrying cannot fix (a row the
// store rejects, a schema mismatch). A store marks its errors with
// [Permanent], or with an error type whose Is method matches ErrPermanent
// (sink.Permanent); callers ask [IsPermanent] and nothing else.
var ErrPermanent = errors.New("permanent")

// Permanent wraps err so that callers do not retry it (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPermanent, err)
}

// IsPermanent reports whether err wraps ErrPermanent: whether retrying the
// write cannot fix it.
func IsPermanent(err error) bool { return errors.Is(err, ErrPermanent) }
