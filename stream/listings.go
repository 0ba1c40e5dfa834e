package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/schema"
)

// Bounds of the catch-up bookkeeping. Dropping entries only ever makes the
// pipeline wait longer, never decide early.
const (
	maxProbes = 64   // pending end-offset probes of the listings topic
	maxMarks  = 4096 // arrival marks kept per calls partition
)

// probe is the listings topic's offsets listed at a moment: every listing
// record produced (acknowledged) before at lies below end.
type probe struct {
	at         time.Time
	start, end map[int32]int64
}

// mark says that every calls record of a partition below end had reached
// Kafka by at.
type mark struct {
	end int64
	at  time.Time
}

// listings reads the whole listings topic into the store, and tracks how
// far it has caught up: caughtUpAsOf is the latest wall time T such that
// every listing record produced before T has been applied. It also tracks
// when calls records reached Kafka (marks), from the same periodic listing
// of end offsets, for the ListingHold gate.
type listings struct {
	cfg   Config
	store *registryversions.Store
	log   *slog.Logger
	m     *metrics
	cl    *kgo.Client
	adm   *kadm.Client

	epoch   time.Time    // times are compared as monotonic offsets from it (see mono)
	asOf    atomic.Int64 // mono(caughtUpAsOf); 0 before the initial catch-up
	changed atomic.Pointer[chan struct{}]

	mu      sync.Mutex
	applied map[int32]int64 // next offset to apply, per listings partition
	probes  []probe
	marks   map[int32][]mark

	// fetch-loop only
	versions map[string]int
	total    int
	nApplied atomic.Int64 // listing events applied

	fetchErrs, probeErrs every
}

func newListings(cfg Config, store *registryversions.Store, log *slog.Logger, m *metrics) *listings {
	l := &listings{
		cfg: cfg, store: store, log: log, m: m,
		epoch:     time.Now(),
		applied:   map[int32]int64{},
		marks:     map[int32][]mark{},
		versions:  map[string]int{},
		fetchErrs: every{interval: 10 * time.Second},
		probeErrs: every{interval: 10 * time.Second},
	}
	ch := make(chan struct{})
	l.changed.Store(&ch)
	return l
}

// mono maps a time of this process (from time.Now, or derived from one)
// to nanoseconds after the listings reader was made, plus one: compared on
// the monotonic clock, so a step of the wall clock cannot release calls
// early. Times before then map to zero or less.
func (l *listings) mono(t time.Time) int64 { return int64(t.Sub(l.epoch)) + 1 }

// caughtUpAsOf returns caughtUpAsOf, zero before the initial catch-up.
func (l *listings) caughtUpAsOf() time.Time {
	if n := l.asOf.Load(); n != 0 {
		return l.epoch.Add(time.Duration(n - 1))
	}
	return time.Time{}
}

// state returns mono(caughtUpAsOf), 0 before the initial catch-up, and a
// channel closed when it next advances. The channel is loaded first:
// checkLocked stores the time before it swaps the channel.
func (l *listings) state() (int64, <-chan struct{}) {
	ch := *l.changed.Load()
	return l.asOf.Load(), ch
}

// run consumes the listings topic and probes end offsets until ctx is done.
func (l *listings) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.probeLoop(ctx)
	}()
	l.fetchLoop(ctx)
	wg.Wait()
}

func (l *listings) fetchLoop(ctx context.Context) {
	for {
		fs := l.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		now := time.Now()
		fs.EachError(func(topic string, p int32, err error) {
			if ok, n := l.fetchErrs.allow(); ok {
				l.log.Warn("listings fetch failed", "topic", topic, "partition", p, "err", err, "suppressed", n)
			}
		})
		live := l.asOf.Load() != 0
		pos := map[int32]int64{}
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if !r.Attrs.IsControl() {
				recs = append(recs, r)
			}
		})
		// Decoding is a quarter of applying the history at start-up, when
		// no call is decided yet: every core takes part.
		decoded := make([]*schema.Listing, len(recs))
		errs := make([]error, len(recs))
		par.For(len(recs), 32, func(i int) { decoded[i], errs[i] = schema.DecodeListing(recs[i].Value) })
		batch := decoded[:0]
		for i, li := range decoded {
			if err := errs[i]; err != nil {
				r := recs[i]
				l.m.listingsBad.Inc()
				l.log.Warn("bad listing skipped", "partition", r.Partition, "offset", r.Offset, "err", err)
				continue
			}
			if live {
				l.m.listingLateness.Observe(now.Sub(li.ObservedAt).Seconds())
			}
			batch = append(batch, li)
		}
		if len(batch) > 0 {
			l.apply(batch)
		}
		if len(pos) > 0 {
			l.advance(pos)
		}
	}
}

// apply applies one fetch's listings and logs what the store found.
func (l *listings) apply(batch []*schema.Listing) {
	const maxLogged = 20
	issues := l.store.Apply(batch...)
	for i, is := range issues {
		if i == maxLogged {
			l.log.Warn("more listing issues not logged", "count", len(issues)-maxLogged)
			break
		}
		l.log.Warn("listing issue", "issue", is.String())
	}
	l.m.listingIssues.Add(float64(len(issues)))
	l.m.listingsApplied.Add(float64(len(batch)))
	l.nApplied.Add(int64(len(batch)))

	snap := l.store.Snapshot()
	for _, li := range batch {
		n := snap.Versions(li.Registry)
		l.total += n - l.versions[li.Registry]
		l.versions[li.Registry] = n
	}
	l.m.registries.Set(float64(snap.Registries()))
	l.m.registryVersions.Set(float64(l.total))
}

// advance records what has been applied, per partition.
func (l *listings) advance(pos map[int32]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, next := range pos {
		if next > l.applied[p] {
			l.applied[p] = next
		}
	}
	l.checkLocked()
}

func (l *listings) probeLoop(ctx context.Context) {
	t := time.NewTicker(l.cfg.ListingsPoll)
	defer t.Stop()
	for {
		if err := l.probe(ctx); err != nil && ctx.Err() == nil {
			if ok, n := l.probeErrs.allow(); ok {
				l.log.Warn("listing end offsets failed; calls wait", "err", err, "suppressed", n)
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
func (l *listings) probe(ctx context.Context) error {
	before := time.Now()
	ends, err := l.adm.ListEndOffsets(ctx, l.cfg.ListingsTopic, l.cfg.CallsTopic)
	after := time.Now()
	if err != nil {
		return fmt.Errorf("list end offsets: %w", err)
	}
	starts, serr := l.adm.ListStartOffsets(ctx, l.cfg.ListingsTopic)

	l.mu.Lock()
	defer l.mu.Unlock()
	for p, o := range ends[l.cfg.CallsTopic] {
		if o.Err == nil && p >= 0 {
			l.addMarkLocked(p, mark{end: o.Offset, at: after})
		}
	}
	if serr != nil {
		return fmt.Errorf("list start offsets: %w", serr)
	}
	pr := probe{at: before, start: map[int32]int64{}, end: map[int32]int64{}}
	var errs []error
	for p, o := range ends[l.cfg.ListingsTopic] {
		s, ok := starts.Lookup(l.cfg.ListingsTopic, p)
		switch {
		case o.Err != nil:
			errs = append(errs, fmt.Errorf("%s/%d end: %w", l.cfg.ListingsTopic, p, o.Err))
		case !ok || s.Err != nil:
			errs = append(errs, fmt.Errorf("%s/%d: no start offset", l.cfg.ListingsTopic, p))
		default:
			pr.start[p], pr.end[p] = s.Offset, o.Offset
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if len(pr.end) == 0 {
		return fmt.Errorf("topic %s: no partitions", l.cfg.ListingsTopic)
	}
	if len(l.probes) < maxProbes {
		l.probes = append(l.probes, pr)
	}
	l.checkLocked()
	return nil
}

// checkLocked advances caughtUpAsOf to the newest probe that the applied
// positions satisfy, and drops the probes up to it.
func (l *listings) checkLocked() {
	last := -1
	for i, pr := range l.probes {
		if l.satisfiedLocked(pr) {
			last = i
		}
	}
	if last < 0 {
		return
	}
	at := l.probes[last].at
	l.probes = append(l.probes[:0], l.probes[last+1:]...)
	n := l.mono(at)
	if n <= l.asOf.Load() {
		return
	}
	if l.asOf.Load() == 0 {
		l.log.Info("listings caught up", "topic", l.cfg.ListingsTopic, "applied", l.nApplied.Load(), "took", time.Since(l.epoch).Round(time.Millisecond))
	}
	l.asOf.Store(n)
	ch := make(chan struct{})
	old := l.changed.Swap(&ch)
	close(*old)
}

func (l *listings) satisfiedLocked(pr probe) bool {
	for p, end := range pr.end {
		if end > pr.start[p] && l.applied[p] < end {
			return false
		}
	}
	return true
}

// addMarkLocked records a calls partition's end offset. Marks are kept in
// order of end and time; when there are too many, every other one is
// dropped (a record then gets a later mark: it waits longer, never less).
func (l *listings) addMarkLocked(p int32, mk mark) {
	ms := l.marks[p]
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
	l.marks[p] = append(ms, mk)
}

// arrival returns a time by which the calls record at (p, off) had reached
// Kafka, and the offset below which that time holds for the partition's
// later records as well; ok is false when no mark covers off yet. Marks
// below off are dropped: a partition's records are decided in order.
func (l *listings) arrival(p int32, off int64) (at time.Time, below int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ms := l.marks[p]
	i := 0
	for i < len(ms) && ms[i].end <= off {
		i++
	}
	if i > 0 {
		ms = append(ms[:0], ms[i:]...)
		l.marks[p] = ms
	}
	if len(ms) == 0 {
		return time.Time{}, 0, false
	}
	return ms[0].at, ms[0].end, true
}
