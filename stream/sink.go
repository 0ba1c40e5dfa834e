package stream

import (
	"context"

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
// The pipeline calls Write from one goroutine per assigned partition, so
// implementations must be safe for concurrent use. Write must not retain
// rows or anything it points to after returning: the slice is reused.
type Sink interface {
	Write(ctx context.Context, rows []schema.Row) error
}

// SinkFunc adapts a function to a [Sink].
type SinkFunc func(ctx context.Context, rows []schema.Row) error

// Write calls f.
func (f SinkFunc) Write(ctx context.Context, rows []schema.Row) error { return f(ctx, rows) }

var _ Sink = SinkFunc(nil)
