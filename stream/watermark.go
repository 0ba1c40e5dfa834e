package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Bounds of the hold's bookkeeping. Dropping entries only ever makes the
// pipeline wait longer, never decide early.
const (
	maxProbes = 64   // pending end-offset probes of the listings topic
	maxMarks  = 4096 // arrival marks kept per calls partition
)

// watermark is the clock that ListingHold is read on: the listings
// watermark, the latest wall time T such that every listing record
// produced (acknowledged by Kafka) before T has been applied to the store.
// It is not event time (observed_at and emitted_at never enter it): it
// compares when records reached Kafka, which is what the hold bounds. T
// advances when the applied positions (applied, from the listings reader)
// reach the end offsets the prober listed at T (probed); the first time
// that happens is the initial catch-up, before which no call is decided.
//
// Times are kept as monotonic offsets from the watermark's creation (mono),
// so a step of the wall clock cannot release calls early.
type watermark struct {
	epoch   time.Time
	asOf    atomic.Int64 // mono(T); 0 before the initial catch-up
	changed atomic.Pointer[chan struct{}]

	mu      sync.Mutex
	applied map[int32]int64 // next offset to apply, per listings partition
	probes  []probe         // listed, not yet reached by applied
}

// probe is the listings topic's offsets listed at a moment: every listing
// record produced (acknowledged) before at lies below end.
type probe struct {
	at         time.Time
	start, end map[int32]int64
}

func newWatermark() *watermark {
	w := &watermark{epoch: time.Now(), applied: map[int32]int64{}}
	ch := make(chan struct{})
	w.changed.Store(&ch)
	return w
}

// mono maps a time of this process (from time.Now, or derived from one)
// to nanoseconds after the watermark was made, plus one: compared on the
// monotonic clock. Times before then map to zero or less.
func (w *watermark) mono(t time.Time) int64 { return int64(t.Sub(w.epoch)) + 1 }

// time returns T, zero before the initial catch-up.
func (w *watermark) time() time.Time {
	if n := w.asOf.Load(); n != 0 {
		return w.epoch.Add(time.Duration(n - 1))
	}
	return time.Time{}
}

// state returns mono(T), 0 before the initial catch-up, and a channel
// closed when T next advances. The channel is loaded first: checkLocked
// stores the time before it swaps the channel.
func (w *watermark) state() (int64, <-chan struct{}) {
	ch := *w.changed.Load()
	return w.asOf.Load(), ch
}

// advance records the listings reader's positions (the next offset to
// apply, per partition) and reports whether this was the initial catch-up.
func (w *watermark) advance(pos map[int32]int64) (first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, next := range pos {
		if next > w.applied[p] {
			w.applied[p] = next
		}
	}
	return w.checkLocked()
}

// reset sets a partition's position, lower or not: for a partition the
// registry checkpoint turned out not to cover, read again from next.
func (w *watermark) reset(p int32, next int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.applied[p] = next
}

// positions returns a copy of the applied positions.
func (w *watermark) positions() map[int32]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.applied)
}

// probed records a listing of the listings topic's offsets and reports
// whether this was the initial catch-up.
func (w *watermark) probed(pr probe) (first bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.probes) < maxProbes {
		w.probes = append(w.probes, pr)
	}
	return w.checkLocked()
}

// checkLocked advances T to the newest probe that the applied positions
// satisfy, drops the probes up to it, wakes the waiters, and reports
// whether T was set for the first time.
func (w *watermark) checkLocked() bool {
	last := -1
	for i, pr := range w.probes {
		if w.satisfiedLocked(pr) {
			last = i
		}
	}
	if last < 0 {
		return false
	}
	at := w.probes[last].at
	w.probes = append(w.probes[:0], w.probes[last+1:]...)
	n := w.mono(at)
	old := w.asOf.Load()
	if n <= old {
		return false
	}
	w.asOf.Store(n)
	ch := make(chan struct{})
	close(*w.changed.Swap(&ch))
	return old == 0
}

func (w *watermark) satisfiedLocked(pr probe) bool {
	for p, end := range pr.end {
		if end > pr.start[p] && w.applied[p] < end {
			return false
		}
	}
	return true
}

// arrivals bounds when the calls records reached Kafka, per partition,
// from the same periodic listing of end offsets: a mark says that every
// record of a partition below end had reached Kafka by at.
type arrivals struct {
	mu    sync.Mutex
	marks map[int32][]mark
}

type mark struct {
	end int64
	at  time.Time
}

func newArrivals() *arrivals { return &arrivals{marks: map[int32][]mark{}} }

// add records a calls partition's end offset. Marks are kept in order of
// end and time; when there are too many, every other one is dropped (a
// record then gets a later mark: it waits longer, never less).
func (a *arrivals) add(p int32, mk mark) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ms := a.marks[p]
	if n := len(ms); n > 0 && ms[n-1].end >= mk.end {
		return
	}
	if len(ms) >= maxMarks {
		kept := ms[:0]
		for i := 1; i < len(ms); i += 2 {
			kept = append(kept, ms[i])
		}
		ms = kept
	}
	a.marks[p] = append(ms, mk)
}

// arrival returns a time by which the calls record at (p, off) had reached
// Kafka, and the offset below which that time holds for the partition's
// later records as well; ok is false when no mark covers off yet. Marks
// below off are dropped: a partition's records are decided in order.
func (a *arrivals) arrival(p int32, off int64) (at time.Time, below int64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ms := a.marks[p]
	i := 0
	for i < len(ms) && ms[i].end <= off {
		i++
	}
	if i > 0 {
		ms = append(ms[:0], ms[i:]...)
		a.marks[p] = ms
	}
	if len(ms) == 0 {
		return time.Time{}, 0, false
	}
	return ms[0].at, ms[0].end, true
}

// prober lists the end offsets of both topics every ListingsPoll and feeds
// them to the watermark (the listings topic) and the arrivals (the calls
// topic).
type prober struct {
	cfg  Config
	adm  *kadm.Client
	wm   *watermark
	arr  *arrivals
	log  *slog.Logger
	errs every
	// caughtUp is called once, at the initial catch-up, if the probe
	// caused it.
	caughtUp func()
	// listed, when set, is called with each probe of the listings topic
	// before the watermark sees it (the listings reader starts reading
	// the partitions it has not read yet); false drops the probe (the
	// reader is not ready: its checkpoint is still loading).
	listed func(probe) bool
}

func (p *prober) run(ctx context.Context) {
	t := time.NewTicker(p.cfg.ListingsPoll)
	defer t.Stop()
	for {
		if err := p.probe(ctx); err != nil && ctx.Err() == nil {
			if ok, n := p.errs.Allow(); ok {
				p.log.Warn("listing end offsets failed; calls wait", "err", err, "suppressed", n)
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// probe lists the end offsets of both topics and the start offsets of the
// listings topic. The listings probe is stamped with the time before the
// request (what was produced before it is below the end offsets); the
// calls marks with the time after the answer (what is below the end
// offsets had arrived by then).
func (p *prober) probe(ctx context.Context) error {
	before := time.Now()
	ends, err := p.adm.ListEndOffsets(ctx, p.cfg.ListingsTopic, p.cfg.CallsTopic)
	after := time.Now()
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	for part, o := range ends[p.cfg.CallsTopic] {
		if o.Err == nil && part >= 0 {
			p.arr.add(part, mark{end: o.Offset, at: after})
		}
	}
	starts, err := p.adm.ListStartOffsets(ctx, p.cfg.ListingsTopic)
	if err != nil {
		return fmt.Errorf("list start offsets: %w", err)
	}
	pr := probe{at: before, start: map[int32]int64{}, end: map[int32]int64{}}
	var errs []error
	topic := p.cfg.ListingsTopic
	for part, o := range ends[topic] {
		s, ok := starts.Lookup(topic, part)
		switch {
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("%s/%d end: %w", topic, part, o.Err))
		case !ok || s.Err != nil:
			errs = append(errs, fmt.Errorf("%s/%d: no start offset", topic, part))
		default:
			pr.start[part], pr.end[part] = s.Offset, o.Offset
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(pr.end) == 0 {
		return fmt.Errorf("topic %s: no partitions", topic)
	}
	if p.listed != nil && !p.listed(pr) {
		return nil
	}
	if p.wm.probed(pr) && p.caughtUp != nil {
		p.caughtUp()
	}
	return nil
}
