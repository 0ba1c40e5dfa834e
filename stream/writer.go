package stream

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
)

// errWriterStopped is what a worker gets when it hands rows to a writer
// that has stopped (a permanent sink error, or shutdown).
var errWriterStopped = errors.New("stream: writer stopped")

// batch is one sink write: rows gathered from every partition worker, the
// DLQ records among them, and, per worker, the last record whose row it
// holds (the offset to commit once the batch is stored).
type batch struct {
	enc    Batch // the rows, in the sink's form
	dlq    []*kgo.Record
	last   map[*worker]kgo.Record
	counts [schema.NumClasses]int
	first  time.Time // when the first rows were added
	latest time.Time // when rows were last added
	urgent bool      // a draining worker waits for it: write it without waiting for BatchWait

	done chan struct{} // closed when the batch is committed, or failed for good
	err  error         // set before done is closed
}

// writer is the single sink writer of a Pipeline. Partition workers hand it
// decided rows (add); it gathers them into one batch of up to BatchRows
// rows, or what it has after BatchWait, and makes each batch durable in
// order: its bad records to the DLQ, its rows to the sink, then one commit
// of the offsets after the last record of every partition the batch holds
// rows of. One batch is written while the next one fills; when that one is
// full too, add blocks, the workers stop taking records and their
// partitions' fetching pauses (backpressure).
//
// Why one writer and not one per partition: ClickHouse's cost per row
// falls steeply with the size of an INSERT (each INSERT makes parts that
// background merges rewrite), and the rows of all partitions together make
// large inserts at any partition count. Batches are written one at a time,
// so the offsets committed for a partition only grow.
type writer struct {
	p *Pipeline

	mu      sync.Mutex
	cur     *batch
	changed chan struct{} // closed and replaced on every change of cur
	free    []Batch       // written batches' encoders, for reuse
	stopped error         // why add no longer accepts rows

	// commitMu orders commits with workers leaving: a worker marks itself
	// gone under it, so that once it has exited no commit for its
	// partition is issued or in flight (the partition may have a new owner).
	commitMu sync.Mutex

	logEvery every
}

func newWriter(p *Pipeline) *writer {
	return &writer{
		p:        p,
		cur:      &batch{done: make(chan struct{})},
		changed:  make(chan struct{}),
		logEvery: every{interval: time.Minute},
	}
}

// signalLocked wakes everything waiting for a change.
func (wr *writer) signalLocked() {
	close(wr.changed)
	wr.changed = make(chan struct{})
}

// add appends a worker's decided rows, with the DLQ records among them and
// the last record they cover, to the current batch, and returns the batch
// that holds them. It blocks while the current batch is full (the previous
// one is still being written) until there is room, ctx is done, or the
// writer stops. rows and dlq are copied; the caller may reuse them.
func (wr *writer) add(ctx context.Context, w *worker, rows []schema.Row, dlq []*kgo.Record, last kgo.Record, counts *[schema.NumClasses]int) (*batch, error) {
	for {
		wr.mu.Lock()
		if err := wr.stopped; err != nil {
			wr.mu.Unlock()
			return nil, err
		}
		b := wr.cur
		if b.enc == nil {
			if n := len(wr.free); n > 0 {
				b.enc, wr.free = wr.free[n-1], wr.free[:n-1]
			} else {
				b.enc = newBatch(wr.p.sink)
				if r, ok := b.enc.(reserver); ok {
					r.Reserve(wr.p.cfg.BatchRows, wr.p.cfg.BatchBytes)
				}
			}
		}
		if !wr.full(b) {
			b.latest = time.Now()
			if b.enc.Len() == 0 {
				b.first = b.latest
			}
			b.enc.Append(rows)
			b.dlq = append(b.dlq, dlq...)
			if b.last == nil {
				b.last = map[*worker]kgo.Record{}
			}
			b.last[w] = last
			for i, n := range counts {
				b.counts[i] += n
			}
			wr.signalLocked()
			wr.mu.Unlock()
			return b, nil
		}
		ch := wr.changed
		wr.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// await waits until b is committed, asking for it to be written now rather
// than after BatchWait.
func (wr *writer) await(ctx context.Context, b *batch) error {
	wr.mu.Lock()
	if b == wr.cur && !b.urgent {
		b.urgent = true
		wr.signalLocked()
	}
	wr.mu.Unlock()
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget marks w gone: no commit is issued for its partition from now on.
// Called by a worker as it exits.
func (wr *writer) forget(w *worker) {
	wr.commitMu.Lock()
	w.gone = true
	wr.commitMu.Unlock()
}

// run writes batches until ctx is done. A batch in progress when ctx ends
// fails (its rows are decided again by the partitions' next owners).
func (wr *writer) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	for {
		b, wait, ch := wr.next()
		if b == nil {
			var tc <-chan time.Time
			if wait > 0 {
				t.Reset(wait)
				tc = t.C
			}
			select {
			case <-ch:
			case <-tc:
			case <-ctx.Done():
				wr.stop(ctx.Err())
				return
			}
			t.Stop()
			continue
		}
		err := wr.flush(ctx, b)
		wr.finish(b, err)
		if err != nil {
			wr.stop(err)
			return
		}
	}
}

// next takes the current batch if it is due (full, urgent, older than
// BatchWait, or a tenth full with no rows added for BatchIdle); otherwise
// it says how long until it is due (0: empty) and returns the channel that
// signals a change.
func (wr *writer) next() (b *batch, wait time.Duration, ch <-chan struct{}) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	b = wr.cur
	if b.enc == nil || b.enc.Len() == 0 {
		return nil, 0, wr.changed
	}
	if !b.urgent && !wr.full(b) {
		cfg := &wr.p.cfg
		wait = time.Until(b.first.Add(cfg.BatchWait))
		if cfg.BatchIdle > 0 && b.enc.Len() >= cfg.BatchRows/10 {
			wait = min(wait, time.Until(b.latest.Add(cfg.BatchIdle)))
		}
		if wait > 0 {
			return nil, wait, wr.changed
		}
	}
	wr.cur = &batch{done: make(chan struct{})}
	wr.signalLocked()
	return b, 0, nil
}

// full reports whether b has reached BatchRows or BatchBytes.
func (wr *writer) full(b *batch) bool {
	return b.enc.Len() >= wr.p.cfg.BatchRows || b.enc.Size() >= wr.p.cfg.BatchBytes
}

// finish records the outcome of b, releases its waiters and keeps its
// encoder for reuse.
func (wr *writer) finish(b *batch, err error) {
	b.err = err
	close(b.done)
	b.enc.Reset()
	wr.mu.Lock()
	wr.free = append(wr.free, b.enc)
	wr.mu.Unlock()
	b.enc, b.dlq, b.last = nil, nil, nil
}

// stop makes add fail from now on and fails the batch being filled.
func (wr *writer) stop(err error) {
	wr.mu.Lock()
	defer wr.mu.Unlock()
	if wr.stopped != nil {
		return
	}
	wr.stopped = fmt.Errorf("%w: %w", errWriterStopped, err)
	b := wr.cur
	b.err = wr.stopped
	close(b.done)
	wr.signalLocked()
}

// flush makes b durable: its bad records to the DLQ, its rows to the sink,
// then the commit. Each step is retried with backoff until it succeeds or
// ctx ends; a permanent sink error stops the pipeline.
func (wr *writer) flush(ctx context.Context, b *batch) error {
	start := time.Now()
	if err := wr.produceDLQ(ctx, b); err != nil {
		return err
	}
	if err := wr.write(ctx, b); err != nil {
		return err
	}
	if err := wr.commit(ctx, b); err != nil {
		return err
	}
	m := wr.p.m
	m.batchRows.Observe(float64(b.enc.Len()))
	m.flushSeconds.Observe(time.Since(start).Seconds())
	if wr.p.cfg.Passthrough {
		m.passthrough.Add(float64(b.enc.Len()))
	}
	for i, n := range b.counts {
		if n > 0 {
			m.decisions[i].Add(float64(n))
		}
	}
	return nil
}

func (wr *writer) produceDLQ(ctx context.Context, b *batch) error {
	pending := b.dlq
	for attempt := 0; len(pending) > 0; attempt++ {
		var failed []*kgo.Record
		var ferr error
		for _, res := range wr.p.calls.ProduceSync(ctx, pending...) {
			if res.Err != nil {
				failed, ferr = append(failed, res.Record), res.Err
				continue
			}
			r := res.Record
			wr.p.m.dlqRecords.Inc()
			wr.p.log.Warn("undecodable call sent to the DLQ",
				"topic", headerValue(r, "source-topic"), "partition", headerValue(r, "source-partition"),
				"offset", headerValue(r, "source-offset"), "error", headerValue(r, "error"),
				"dlq_partition", r.Partition, "dlq_offset", r.Offset)
		}
		if len(failed) == 0 {
			return nil
		}
		if err := wr.retryWait(ctx, attempt, "DLQ produce", len(failed), ferr); err != nil {
			return err
		}
		pending = failed
	}
	return nil
}

func (wr *writer) write(ctx context.Context, b *batch) error {
	for attempt := 0; ; attempt++ {
		err := b.enc.Write(ctx)
		if err == nil {
			return nil
		}
		if IsPermanent(err) {
			err = fmt.Errorf("sink refused %d rows: %w", b.enc.Len(), err)
			wr.p.fail(err)
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wr.p.m.sinkRetries.Inc()
		if err := wr.retryWait(ctx, attempt, "sink write", b.enc.Len(), err); err != nil {
			return err
		}
	}
}

// commit commits, for every partition of b whose worker has not exited,
// the offset after its last record in b. A partition whose worker exited
// has been revoked or lost; its next owner decides those records again.
func (wr *writer) commit(ctx context.Context, b *batch) error {
	recs := make([]*kgo.Record, 0, len(b.last))
	for attempt := 0; ; attempt++ {
		wr.commitMu.Lock()
		recs = recs[:0]
		for w, r := range b.last {
			if !w.gone {
				recs = append(recs, &r)
			}
		}
		if len(recs) == 0 {
			wr.commitMu.Unlock()
			return nil
		}
		// Bounded: a worker leaving (forget) waits for commitMu, and the
		// revocation callback for that worker.
		cctx, cancel := context.WithTimeout(ctx, wr.p.cfg.DrainTimeout)
		err := wr.p.calls.CommitRecords(cctx, recs...)
		cancel()
		if err == nil {
			for w, r := range b.last {
				if !w.gone {
					w.committed.Store(r.Offset + 1)
					w.setLag()
				}
			}
		}
		wr.commitMu.Unlock()
		if err == nil {
			return nil
		}
		wr.p.m.commitErrors.Inc()
		if ctx.Err() != nil {
			return fmt.Errorf("commit: %w", err)
		}
		if err := wr.retryWait(ctx, attempt, "offset commit", b.enc.Len(), err); err != nil {
			return err
		}
	}
}

// retryWait logs a failed attempt (at most once a minute) and waits the
// backoff.
func (wr *writer) retryWait(ctx context.Context, attempt int, what string, rows int, err error) error {
	d := backoff(attempt, wr.p.cfg.RetryMin, wr.p.cfg.RetryMax)
	if ok, n := wr.logEvery.allow(); ok {
		wr.p.log.Warn(what+" failed; partitions stalled, retrying", "rows", rows,
			"attempt", attempt+1, "retry_in", d, "err", err, "suppressed", n)
	}
	if !sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
