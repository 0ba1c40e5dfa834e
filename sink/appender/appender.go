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
type Batch interface {
	// Append adds rows, copying what it keeps: rows are reused after.
	Append(rows []schema.Row)
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

// Archiver is a Batch that also stores the call records of its rows as
// they were produced: Write returns nil only once the records are stored
// too. sink.Batch is one.
type Archiver interface {
	Batch
	// AppendEvents adds records, copying what it keeps.
	AppendEvents(evs []schema.CallEvent)
}

// Reserver is a Batch that can size its buffers for what it will hold
// (sink.Batch): a caller tells a new batch the most rows and bytes it
// will gather.
type Reserver interface {
	Reserve(rows, bytes int)
}

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
	s     Sink
	rows  []schema.Row
	bytes int
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
func (b *rowsBatch) Len() int                        { return len(b.rows) }
func (b *rowsBatch) Size() int                       { return b.bytes }
func (b *rowsBatch) Write(ctx context.Context) error { return b.s.Write(ctx, b.rows) }
func (b *rowsBatch) Reset() {
	clear(b.rows) // drop the references to the calls' strings
	b.rows = b.rows[:0]
	b.bytes = 0
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
