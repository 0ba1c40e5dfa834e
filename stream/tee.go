package stream

import (
	"context"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// Tee returns a Sink that stores every write in first, then in second,
// and acknowledges it only when both have: the pipeline commits offsets
// behind both (the decisions topic after ClickHouse). A retried write
// skips the sink that already stored it, so first does not take the rows
// twice because second failed. Both are written through their appender.Batcher
// form when they have one.
func Tee(first, second appender.Sink) appender.Sink { return tee{first, second} }

type tee struct{ first, second appender.Sink }

func (t tee) Write(ctx context.Context, rows []schema.Row) error {
	// Without batches there is no state between attempts: a retry
	// writes first again, which its contract allows (the store
	// deduplicates).
	if err := t.first.Write(ctx, rows); err != nil {
		return err
	}
	return t.second.Write(ctx, rows)
}

func (t tee) NewBatch() appender.Batch {
	return &teeBatch{first: appender.NewBatch(t.first), second: appender.NewBatch(t.second)}
}

var _ appender.Batcher = tee{}

// teeBatch is a write to both sinks; firstDone remembers, between
// attempts, that first has stored it.
type teeBatch struct {
	first, second appender.Batch
	firstDone     bool
}

func (b *teeBatch) Append(rows []schema.Row) {
	b.first.Append(rows)
	b.second.Append(rows)
}

func (b *teeBatch) Len() int  { return b.first.Len() }
func (b *teeBatch) Size() int { return b.first.Size() + b.second.Size() }

func (b *teeBatch) Write(ctx context.Context) error {
	if !b.firstDone {
		if err := b.first.Write(ctx); err != nil {
			return err
		}
		b.firstDone = true
	}
	return b.second.Write(ctx)
}

func (b *teeBatch) Reset() {
	b.first.Reset()
	b.second.Reset()
	b.firstDone = false
}

// Reserve passes the sizes on to the batches that take them.
func (b *teeBatch) Reserve(rows, bytes int) {
	for _, x := range []appender.Batch{b.first, b.second} {
		if r, ok := x.(appender.Reserver); ok {
			r.Reserve(rows, bytes)
		}
	}
}
