package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// errWriterStopped is what a worker gets when it hands rows to a writer
// that has stopped (a permanent sink error, or shutdown).
var errWriterStopped = errors.New("stream: writer stopped")

// handoff is what a partition worker gives the writer at a time: the rows
// it decided, the DLQ records among them, the position of the last record
// they cover (committed once they are stored), and their count by class.
// The worker fills it; during writer.add the writer reads it and copies
// what it keeps; once add returns, the worker empties it (reset) and fills
// it again.
type handoff struct {
	lease  *lease
	rows   []schema.Row
	dlq    []*kgo.Record
	last   position
	counts [schema.NumClasses]int
	// unenforced counts the H3 decisions refused because the arguments
	// reached a part of the contract the checker does not enforce.
	unenforced int

	// With Config.ArchiveCalls, the records of the rows, whose keys and
	// values are slices of evData: the worker's copies (the client reuses
	// a record's memory once it is decided), made without an allocation
	// per record once evData has grown. An append that moves evData
	// leaves the earlier slices on the old array, which stays as it was.
	events []schema.CallEvent
	evData []byte
}

// position is where a record sits in its partition: what a commit names
// (the commit is of the offset after it).
type position struct {
	offset int64
	epoch  int32 // leader epoch, for the broker's fencing of stale commits
}

func (h *handoff) reset() {
	clear(h.rows) // drop the references to the calls' strings
	h.rows = h.rows[:0]
	clear(h.dlq)
	h.dlq = h.dlq[:0]
	h.counts = [schema.NumClasses]int{}
	h.unenforced = 0
	clear(h.events)
	h.events, h.evData = h.events[:0], h.evData[:0]
}

// archive adds r, decided into row, to the records to archive.
func (h *handoff) archive(r *kgo.Record, row *schema.Row) {
	n := len(h.evData)
	h.evData = append(append(h.evData, r.Key...), r.Value...)
	k, v := n+len(r.Key), len(h.evData)
	h.events = append(h.events, schema.CallEvent{
		EmittedAt: schema.WindowTime(row.EmittedAt, r.Timestamp),
		Topic:     r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		Key: h.evData[n:k:k], Value: h.evData[k:v:v],
	})
}

// lease is one partition worker's standing with the writer (a partition
// assigned again gets a new one): the writer commits the partition's
// offsets only while the lease is held, and records there what it has
// committed. Its fields are the writer's; the worker only holds it, and
// reads committed.
type lease struct {
	topic     string
	partition int32
	committed atomic.Int64 // next offset to consume, as committed; -1 before the first commit
	released  bool         // under writer.commitMu
}

// kafkaClient is what the writer needs of the calls client: produce to the
// DLQ, commit the group's offsets. *kgo.Client of the consumer group.
type kafkaClient interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
	CommitRecords(ctx context.Context, rs ...*kgo.Record) error
}

var _ kafkaClient = (*kgo.Client)(nil)

// batch is one sink write: rows gathered from every partition worker, the
// DLQ records among them, and, per lease, the last record whose row it
// holds (the offset to commit once the batch is stored).
type batch struct {
	enc        appender.Batch // the rows, in the sink's form
	dlq        []*kgo.Record
	last       map[*lease]position
	counts     [schema.NumClasses]int
	unenforced int
	first      time.Time // when the first rows were added
	latest     time.Time // when rows were last added
	urgent     bool      // a draining worker waits for it: write it without waiting for BatchWait

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
//
// add, await, lease and release are safe for concurrent use; run is
// called once, and only its goroutine uses the Kafka client.
type writer struct {
	cfg  Config
	sink appender.Sink
	log  *slog.Logger
	m    *metrics

	mu      sync.Mutex
	cur     *batch
	changed chan struct{}    // closed and replaced on every change of cur
	free    []appender.Batch // written batches' encoders, for reuse
	stopped error            // why add no longer accepts rows

	// commitMu orders commits with leases being released: once release
	// has returned, no commit for the lease's partition is issued or in
	// flight (the partition may have a new owner).
	commitMu sync.Mutex

	logEvery every
}

// newWriter returns a writer of batches of cfg's Batch* settings to sink,
// retried with cfg's Retry* backoff. A nil log logs nothing; nil m counts
// nowhere.
func newWriter(cfg Config, sink appender.Sink, log *slog.Logger, m *metrics) *writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m, _ = newMetrics(nil, nil, nil, nil) // a registry of its own: cannot fail
	}
	return &writer{
		cfg: cfg, sink: sink, log: log, m: m,
		cur:      &batch{done: make(chan struct{})},
		changed:  make(chan struct{}),
		logEvery: every{Interval: time.Minute},
	}
}

// lease returns a new lease for a worker of the partition.
func (wr *writer) lease(topic string, partition int32) *lease {
	l := &lease{topic: topic, partition: partition}
	l.committed.Store(-1)
	return l
}

// release ends l: no commit for it is issued from now on, nor in flight
// once release returns. Called by a worker as it exits.
func (wr *writer) release(l *lease) {
	wr.commitMu.Lock()
	l.released = true
	wr.commitMu.Unlock()
}

// signalLocked wakes everything waiting for a change.
func (wr *writer) signalLocked() {
	close(wr.changed)
	wr.changed = make(chan struct{})
}

// add appends h to the current batch and returns the batch that holds it.
// It blocks while the current batch is full (the previous one is still
// being written) until there is room, ctx is done, or the writer stops.
// The writer copies what it keeps of h: once add returns, h is the
// caller's again.
func (wr *writer) add(ctx context.Context, h *handoff) (*batch, error) {
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
				b.enc = appender.NewBatch(wr.sink)
				b.enc.Reserve(wr.cfg.BatchRows, wr.cfg.BatchBytes)
			}
		}
		if !wr.full(b) {
			b.latest = time.Now()
			if b.enc.Len() == 0 {
				b.first = b.latest
			}
			b.enc.Append(h.rows)
			if len(h.events) > 0 {
				b.enc.AppendEvents(h.events) // Archives checked by New
			}
			b.dlq = append(b.dlq, h.dlq...)
			if b.last == nil {
				b.last = map[*lease]position{}
			}
			b.last[h.lease] = h.last
			for i, n := range h.counts {
				b.counts[i] += n
			}
			b.unenforced += h.unenforced
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

// run writes batches, dead-lettering and committing through cl, until ctx
// is done or the sink refuses a batch for good. It returns nil after ctx
// ended, else the sink's permanent error; either way add fails from then
// on, and a batch in progress fails (its rows are decided again by the
// partitions' next owners).
func (wr *writer) run(ctx context.Context, cl kafkaClient) error {
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
				return nil
			}
			t.Stop()
			continue
		}
		err := wr.flush(ctx, cl, b)
		wr.finish(b, err)
		if err != nil {
			wr.stop(err)
			if appender.IsPermanent(err) {
				return err
			}
			return nil
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
		cfg := &wr.cfg
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
	return b.enc.Len() >= wr.cfg.BatchRows || b.enc.Size() >= wr.cfg.BatchBytes
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
// ctx ends; a permanent sink error is returned at once.
func (wr *writer) flush(ctx context.Context, cl kafkaClient, b *batch) error {
	start := time.Now()
	if err := wr.produceDLQ(ctx, cl, b); err != nil {
		return err
	}
	if err := wr.write(ctx, b); err != nil {
		return err
	}
	if err := wr.commit(ctx, cl, b); err != nil {
		return err
	}
	m := wr.m
	m.batchRows.Observe(float64(b.enc.Len()))
	m.flushSeconds.Observe(time.Since(start).Seconds())
	if wr.cfg.Passthrough {
		m.passthrough.Add(float64(b.enc.Len()))
	}
	for i, n := range b.counts {
		if n > 0 {
			m.decisions[i].Add(float64(n))
		}
	}
	m.unenforced.Add(float64(b.unenforced))
	return nil
}

func (wr *writer) produceDLQ(ctx context.Context, cl kafkaClient, b *batch) error {
	pending := b.dlq
	if len(pending) == 0 {
		return nil
	}
	return wr.retry(ctx, "DLQ produce", func() int { return len(pending) }, func(ctx context.Context) error {
		var failed []*kgo.Record
		var ferr error
		for _, res := range cl.ProduceSync(ctx, pending...) {
			if res.Err != nil {
				failed, ferr = append(failed, res.Record), res.Err
				continue
			}
			r := res.Record
			wr.m.dlqRecords.Inc()
			msg := "undecodable call sent to the DLQ"
			switch wr.cfg.kindOf(headerValue(r, "source-topic")) {
			case kindAudit:
				msg = "undecodable audit record sent to the DLQ"
			case kindOTLPSpans, kindOTLPLogs:
				msg = "OpenTelemetry record refused, sent to the DLQ"
			}
			wr.log.Warn(msg,
				"topic", headerValue(r, "source-topic"), "partition", headerValue(r, "source-partition"),
				"offset", headerValue(r, "source-offset"), "error", headerValue(r, "error"),
				"dlq_partition", r.Partition, "dlq_offset", r.Offset)
		}
		pending = failed // only those are produced again
		return ferr
	}, nil)
}

func (wr *writer) write(ctx context.Context, b *batch) error {
	var last error
	err := wr.retry(ctx, "sink write", b.enc.Len, func(ctx context.Context) error {
		last = b.enc.Write(ctx)
		return last
	}, wr.m.sinkRetries.Inc)
	// A refusal for good is the pipeline's error even when ctx ended with
	// it (Retry answers ctx's error then): run stops on it.
	if appender.IsPermanent(last) {
		return fmt.Errorf("sink refused %d rows: %w", b.enc.Len(), last)
	}
	return err
}

// commit commits, for every lease of b still held, the offset after its
// last record in b. A released lease's partition has been revoked or lost;
// its next owner decides those records again.
func (wr *writer) commit(ctx context.Context, cl kafkaClient, b *batch) error {
	recs := make([]*kgo.Record, 0, len(b.last))
	err := wr.retry(ctx, "offset commit", b.enc.Len, func(ctx context.Context) error {
		wr.commitMu.Lock()
		defer wr.commitMu.Unlock()
		recs = recs[:0]
		for l, pos := range b.last {
			if !l.released {
				recs = append(recs, &kgo.Record{Topic: l.topic, Partition: l.partition, Offset: pos.offset, LeaderEpoch: pos.epoch})
			}
		}
		if len(recs) == 0 {
			return nil
		}
		// Bounded: a worker leaving (release) waits for commitMu, and the
		// revocation callback for that worker.
		cctx, cancel := context.WithTimeout(ctx, wr.cfg.DrainTimeout)
		err := cl.CommitRecords(cctx, recs...)
		cancel()
		if err != nil {
			wr.m.commitErrors.Inc()
			return err
		}
		for l, pos := range b.last {
			if !l.released {
				l.committed.Store(pos.offset + 1)
			}
		}
		return nil
	}, nil)
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// retry runs step with appender.Retry and the backoff of RetryMin to
// RetryMax until it succeeds or ctx ends (or the sink refuses a write for
// good); meanwhile the batch's partitions stall. Each failure is counted
// by retried (nil: nowhere) and logged at most once a minute.
func (wr *writer) retry(ctx context.Context, what string, rows func() int, step func(context.Context) error, retried func()) error {
	return appender.Retry(ctx, wr.cfg.RetryMin, wr.cfg.RetryMax, step, func(err error, attempt int, wait time.Duration) error {
		if wait == 0 { // permanent: the caller says so
			return nil
		}
		if retried != nil {
			retried()
		}
		if ok, n := wr.logEvery.Allow(); ok {
			wr.log.Warn(what+" failed; partitions stalled, retrying", "rows", rows(),
				"attempt", attempt, "retry_in", wait, "err", err, "suppressed", n)
		}
		return nil
	})
}
