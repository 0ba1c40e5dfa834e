package stream

import (
	"context"
	"unsafe"

	"github.com/toolaudit/toolaudit/schema"
)

// Sink stores decision rows: the end of the pipeline, and the point after
// which Kafka offsets are committed.
//
// Write returns nil only when every row is durably stored. Any error that
// does not wrap [ErrPermanent] is retried, with the same rows, with
// exponential backoff until it succeeds or the pipeline stops: the
// partition stalls, nothing is dropped or skipped. A row may be written
// more than once (a retry after a partial write, a partition that moved
// before its commit): the store keeps one row per (AnalysisID, CallKey).
// An error wrapping ErrPermanent stops the pipeline: Run returns it.
//
// Write must return soon after ctx is done: revocation and shutdown wait
// for it (up to Config.DrainTimeout, after which ctx is canceled).
//
// The pipeline calls Write from one goroutine, its writer, which gathers
// the rows of every assigned partition. Write must not retain rows or
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
// they arrive (a ClickHouse sink: encoded columns), rather than as a slice
// of rows, which at a batch of 100k rows would hold tens of megabytes of
// pointers for the garbage collector to scan. The pipeline writes through
// NewBatch when the sink has it, and through Write otherwise.
type Batcher interface {
	Sink
	NewBatch() Batch
}

// Batch is a sink write being gathered. The pipeline keeps two: one being
// filled, one being written; it Resets a batch once it is stored and
// fills it again.
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
// they were produced (Config.ArchiveCalls): Write returns nil only once
// the records are stored too. sink.Batch is one.
type Archiver interface {
	Batch
	// AppendEvents adds records, copying what it keeps.
	AppendEvents(evs []schema.CallEvent)
}

// reserver is a Batch that can size its buffers for what it will hold
// (sink.Batch): the pipeline tells a new batch BatchRows and BatchBytes.
type reserver interface {
	Reserve(rows, bytes int)
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

func newBatch(s Sink) Batch {
	if bs, ok := s.(Batcher); ok {
		return bs.NewBatch()
	}
	return &rowsBatch{s: s}
}
