package appender

import (
	"context"

	"github.com/toolaudit/toolaudit/schema"
)

// Tee returns a Sink that stores every write in first, then in second,
// and acknowledges it only when both have: the pipeline commits offsets
// behind both (the decisions topic after ClickHouse). A retried write
// skips the sink that already stored it, so first does not take the rows
// twice because second failed. Both are written through their Batcher
// form when they have one. Its batches archive (Batch.Archives) when
// either's do, and the call records go to those that do: with the
// decisions topic second, ClickHouse's call_events keeps them.
func Tee(first, second Sink) Batcher { return tee{first, second} }

type tee struct{ first, second Sink }

func (t tee) Write(ctx context.Context, rows []schema.Row) error {
	// Without batches there is no state between attempts: a retry
	// writes first again, which its contract allows (the store
	// deduplicates).
	if err := t.first.Write(ctx, rows); err != nil {
		return err
	}
	return t.second.Write(ctx, rows)
}

func (t tee) NewBatch() Batch {
	return &teeBatch{first: NewBatch(t.first), second: NewBatch(t.second)}
}

// teeBatch is a write to both sinks; firstDone remembers, between
// attempts, that first has stored it.
type teeBatch struct {
	first, second Batch
	firstDone     bool
}

func (b *teeBatch) Append(rows []schema.Row) {
	b.first.Append(rows)
	b.second.Append(rows)
}

// AppendEvents gives the records to each batch that archives them, and
// to first when neither does, whose Write then fails (ErrNoArchive).
func (b *teeBatch) AppendEvents(evs []schema.CallEvent) {
	switch fa, sa := b.first.Archives(), b.second.Archives(); {
	case fa || !sa:
		b.first.AppendEvents(evs)
		if sa {
			b.second.AppendEvents(evs)
		}
	default:
		b.second.AppendEvents(evs)
	}
}

func (b *teeBatch) Archives() bool { return b.first.Archives() || b.second.Archives() }

func (b *teeBatch) Reserve(rows, bytes int) {
	b.first.Reserve(rows, bytes)
	b.second.Reserve(rows, bytes)
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
