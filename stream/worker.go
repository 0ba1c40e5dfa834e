package stream

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolaudit/toolaudit/signature"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// chunk is one partition's records of one poll.
type chunk struct {
	recs  []*kgo.Record
	at    time.Time // after the poll returned: every record had reached Kafka by then
	bytes int
}

// worker owns one assigned calls partition: it decides the partition's
// records in order and hands the rows, a few hundred at a time, to the
// pipeline's writer, which stores them and commits the partition's offset
// behind them.
//
// The poll loop hands it records with enqueue and never blocks on it: when
// a worker falls behind (the sink is slow or failing, or the hold is long),
// its partition's fetching pauses instead, which bounds memory and leaves
// the other partitions running.
type worker struct {
	p         *Pipeline
	cl        *kgo.Client
	topic     string
	partition int32
	lease     *lease // the writer's: commits for this worker's partition

	ctx      context.Context // canceled when the worker must stop now
	cancel   context.CancelFunc
	quit     chan struct{} // closed to stop: write and commit what is decided, exit
	done     chan struct{}
	stopOnce sync.Once
	drainT   *time.Timer

	mu     sync.Mutex
	queue  []chunk
	queued int // bytes in queue
	paused bool
	wake   chan struct{}

	// Set by the poll loop, read for consumer_lag.
	hwm  atomic.Int64 // from the latest fetch; -1 before
	from atomic.Int64 // the first offset fetched: where the group stood; -1 before

	kind topicKind // what the partition's records are

	// Owned by the worker goroutine.
	cur      chunk
	idx      int
	hasCur   bool
	rd       resolve.RowDecider
	rec      audit.Record
	otlp     otlpState
	stopped  bool      // stopped within a record (decideOTLP): exit without handing off
	out      handoff   // decided, not yet handed to the writer
	pending  *batch    // the writer's batch holding this worker's latest rows
	arrAt    time.Time // cached arrival mark: records below arrBelow had arrived by arrAt
	arrBelow int64
}

// handOff is how many decided rows a worker keeps before handing them to
// the writer: enough to make the writer's lock cheap per row, few enough
// that the copy stays in cache.
const handOff = 256

func newWorker(p *Pipeline, cl *kgo.Client, topic string, partition int32) *worker {
	ctx, cancel := context.WithCancel(p.base)
	l := p.wr.lease(topic, partition)
	w := &worker{
		p: p, cl: cl, topic: topic, partition: partition, lease: l,
		ctx:    ctx,
		cancel: cancel,
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		wake:   make(chan struct{}, 1),
		rd: resolve.RowDecider{Resolver: p.cfg.Resolver, KeepRawArgs: p.cfg.KeepRawArgs,
			ArgsKey: p.cfg.ArgsKey, Suggest: p.sugg},
		out:  handoff{lease: l, rows: make([]schema.Row, 0, handOff)},
		kind: p.cfg.kindOf(topic),
	}
	w.hwm.Store(-1)
	w.from.Store(-1)
	return w
}

// enqueue hands the worker one poll's records of its partition. Called by
// the poll loop only.
func (w *worker) enqueue(recs []*kgo.Record, hwm int64, at time.Time) {
	if len(recs) == 0 {
		return
	}
	n := 0
	for _, r := range recs {
		n += len(r.Key) + len(r.Value)
	}
	w.hwm.Store(hwm)
	w.from.CompareAndSwap(-1, recs[0].Offset)

	w.mu.Lock()
	w.queue = append(w.queue, chunk{recs: recs, at: at, bytes: n})
	w.queued += n
	if !w.paused && w.queued >= w.p.cfg.MaxPartitionBuffer {
		w.paused = true
		w.cl.PauseFetchPartitions(map[string][]int32{w.topic: {w.partition}})
		w.p.m.pauses.Inc()
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// take makes the oldest queued chunk current, and resumes fetching once
// half the buffer is free.
func (w *worker) take() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return false
	}
	w.cur, w.idx, w.hasCur = w.queue[0], 0, true
	w.queue[0] = chunk{}
	w.queue = w.queue[1:]
	w.queued -= w.cur.bytes
	if w.paused && w.queued <= w.p.cfg.MaxPartitionBuffer/2 {
		w.paused = false
		w.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.partition}})
	}
	return true
}

// lag returns the records fetched and not committed, or false before the
// first fetch.
func (w *worker) lag() (int64, bool) {
	h, c := w.hwm.Load(), w.lease.committed.Load()
	if c < 0 {
		c = w.from.Load()
	}
	return h - c, h >= 0 && c >= 0
}

// stop asks the worker to finish. With drain, it writes and commits the
// rows it has decided, within DrainTimeout; without (the partition is
// lost, commits would fail), it stops at once.
func (w *worker) stop(drain bool) {
	w.stopOnce.Do(func() {
		if drain {
			w.drainT = time.AfterFunc(w.p.cfg.DrainTimeout, w.cancel)
		} else {
			w.cancel()
		}
		close(w.quit)
	})
}

// wait waits for the worker to exit and releases what it holds.
func (w *worker) wait() {
	<-w.done
	w.p.wr.release(w.lease)
	if w.drainT != nil {
		w.drainT.Stop()
	}
	w.cancel()
	w.mu.Lock()
	if w.paused {
		// Pausing outlives the assignment: a partition that comes back must
		// not come back paused.
		w.paused = false
		w.cl.ResumeFetchPartitions(map[string][]int32{w.topic: {w.partition}})
	}
	w.queue, w.queued = nil, 0
	w.mu.Unlock()
}

func (w *worker) stopping() bool {
	select {
	case <-w.quit:
		return true
	default:
		return false
	}
}

func (w *worker) run() {
	defer close(w.done)
	for {
		if w.stopping() {
			w.finish()
			return
		}
		var gate, wake <-chan struct{}
		if w.hasCur || w.take() {
			r := w.cur.recs[w.idx]
			ok, ch := w.ready(r)
			if ok {
				if w.decide(r); w.stopped {
					return // stopped within the record: none of it is handed off or committed
				}
				r.Recycle() // its memory goes back to the client's pools (fetchpool)
				if w.idx++; w.idx == len(w.cur.recs) {
					w.cur, w.hasCur = chunk{}, false
				}
				if len(w.out.rows) >= handOff && w.handOff() != nil {
					return
				}
				continue
			}
			gate = ch
		} else {
			wake = w.wake
		}
		// Nothing to decide right now: what is decided goes to the writer
		// before the worker waits.
		if w.handOff() != nil {
			return
		}
		select {
		case <-wake:
		case <-gate:
		case <-w.quit:
		case <-w.ctx.Done():
			return
		}
	}
}

// handOff gives the decided rows to the writer. An error means the worker
// must exit: it is stopped for good, or the writer is.
func (w *worker) handOff() error {
	if len(w.out.rows) == 0 {
		return nil
	}
	b, err := w.p.wr.add(w.ctx, &w.out)
	if err != nil {
		return err
	}
	w.pending = b
	w.out.reset()
	return nil
}

// finish hands what is decided to the writer and waits until it is
// committed, after a stop with drain (without, ctx is canceled already).
func (w *worker) finish() {
	n := len(w.out.rows)
	err := w.handOff()
	if err == nil && w.pending != nil {
		err = w.p.wr.await(w.ctx, w.pending)
	}
	if err != nil {
		w.p.log.Warn("partition stopped with rows not committed; they will be decided again",
			"topic", w.topic, "partition", w.partition, "rows", n, "err", err)
	}
}

// ready reports whether r may be decided now; if not, the channel is
// closed when the listings watermark advances.
//
// The rule: the listings must have been read up to their end once, and,
// with a hold, the listings watermark must have reached the record's
// arrival in Kafka plus ListingHold. The arrival is bounded from above by
// the end of the poll that returned it and by the periodic listing of the
// calls topic's end offsets, whichever is earlier: a backlog fetched long
// after it arrived waits for the hold once, not once per fetch.
func (w *worker) ready(r *kgo.Record) (bool, <-chan struct{}) {
	if w.p.cfg.Passthrough || w.kind == kindAudit {
		return true, nil // an audit record was decided before it was produced
	}
	asOf, ch := w.p.wm.state()
	if asOf == 0 {
		return false, ch
	}
	hold := w.p.cfg.ListingHold
	if hold == 0 || asOf >= w.p.wm.mono(w.cur.at.Add(hold)) {
		return true, nil
	}
	if w.kind != kindCalls {
		return false, ch // the prober lists the calls topic's ends only: the poll's end bounds arrival
	}
	if r.Offset >= w.arrBelow {
		if at, below, ok := w.p.arr.arrival(w.partition, r.Offset); ok {
			w.arrAt, w.arrBelow = at, below
		} else {
			return false, ch
		}
	}
	if asOf >= w.p.wm.mono(w.arrAt.Add(hold)) {
		return true, nil
	}
	return false, ch
}

// decide turns r into the next row of the hand-off.
func (w *worker) decide(r *kgo.Record) {
	switch w.kind {
	case kindAudit:
		w.store(r)
		return
	case kindOTLPSpans, kindOTLPLogs:
		if !w.decideOTLP(r) {
			w.stopped = true
		}
		return
	}
	cfg := &w.p.cfg
	h := &w.out
	h.rows = append(h.rows, schema.Row{})
	row := &h.rows[len(h.rows)-1]
	row.AnalysisID, row.ResolverBuild, row.PolicyVersion = cfg.AnalysisID, cfg.ResolverBuild, w.p.policy
	row.Source = schema.SourceStream
	row.Topic, row.Partition, row.Offset = r.Topic, r.Partition, r.Offset
	h.last = position{offset: r.Offset, epoch: r.LeaderEpoch}
	var vs resolve.Versions // nil in passthrough: decoded, stored undecided
	if !cfg.Passthrough {
		vs = w.p.store.Snapshot()
	}
	if !w.rd.DecideRow(vs, r.Value, r.Timestamp, row) {
		h.dlq = append(h.dlq, w.dlqRecord(r, row.Reason))
	}
	if cfg.ArchiveCalls {
		h.archive(r, row)
	}
	w.count(row)
}

// count counts row's class in the hand-off.
func (w *worker) count(row *schema.Row) {
	if i := row.Class.Index(); i >= 0 {
		w.out.counts[i]++
	}
	if row.Class == schema.H3 && signature.NotEnforced(row.Reason) {
		w.out.unenforced++
	}
}

// store turns audit record r into the next row: the record's decision,
// source and action as they are (the call is not decided again), the
// call's identity, context and arguments' summary from the call bytes it
// carries, the audit record's own Kafka position. A record that does not
// decode goes to the DLQ and makes no row: it holds no decision to keep.
func (w *worker) store(r *kgo.Record) {
	cfg := &w.p.cfg
	h := &w.out
	h.last = position{offset: r.Offset, epoch: r.LeaderEpoch}
	if err := audit.Decode(r.Value, &w.rec); err != nil {
		h.dlq = append(h.dlq, w.dlqRecord(r, err.Error()))
		return
	}
	h.rows = append(h.rows, schema.Row{})
	row := &h.rows[len(h.rows)-1]
	w.rec.Fill(row)
	row.AnalysisID = cfg.AnalysisID
	row.Topic, row.Partition, row.Offset = r.Topic, r.Partition, r.Offset
	w.rd.DescribeCall(w.rec.Call, r.Timestamp, row)
	w.rec.Call = nil
	w.count(row)
}

// dlqRecord is r for the DLQ topic: key, value, timestamp and headers as
// they were (copied: r's memory is recycled), plus why and where from.
func (w *worker) dlqRecord(r *kgo.Record, reason string) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+4)
	for _, x := range r.Headers {
		h = append(h, kgo.RecordHeader{Key: strings.Clone(x.Key), Value: bytes.Clone(x.Value)})
	}
	h = append(h,
		kgo.RecordHeader{Key: "error", Value: []byte(reason)},
		kgo.RecordHeader{Key: "source-topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "source-partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "source-offset", Value: []byte(strconv.FormatInt(r.Offset, 10))},
	)
	return &kgo.Record{Topic: w.p.cfg.DLQTopic, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp, Headers: h}
}

func headerValue(r *kgo.Record, key string) string {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value)
		}
	}
	return ""
}
