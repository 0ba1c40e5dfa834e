package stream

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/schema"
)

// listings reads the whole listings topic, every partition from the start,
// into the store, and reports what it has applied to the watermark.
type listings struct {
	cfg   Config
	store *registryversions.Store
	log   *slog.Logger
	m     *metrics
	cl    *kgo.Client
	wm    *watermark
	start time.Time

	// fetch-loop only
	versions map[string]int
	total    int
	nApplied atomic.Int64 // listing events applied

	fetchErrs every
}

func newListings(cfg Config, cl *kgo.Client, store *registryversions.Store, wm *watermark, log *slog.Logger, m *metrics) *listings {
	return &listings{
		cfg: cfg, cl: cl, store: store, wm: wm, log: log, m: m,
		start:     time.Now(),
		versions:  map[string]int{},
		fetchErrs: every{Interval: 10 * time.Second},
	}
}

// caughtUp logs the initial catch-up.
func (l *listings) caughtUp() {
	l.log.Info("listings caught up", "topic", l.cfg.ListingsTopic, "applied", l.nApplied.Load(), "took", time.Since(l.start).Round(time.Millisecond))
}

// run consumes the listings topic until ctx is done.
func (l *listings) run(ctx context.Context) {
	for {
		fs := l.cl.PollFetches(ctx)
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		now := time.Now()
		fs.EachError(func(topic string, p int32, err error) {
			if ok, n := l.fetchErrs.Allow(); ok {
				l.log.Warn("listings fetch failed", "topic", topic, "partition", p, "err", err, "suppressed", n)
			}
		})
		live := !l.wm.time().IsZero()
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
		if len(pos) > 0 && l.wm.advance(pos) {
			l.caughtUp()
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
