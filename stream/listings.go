package stream

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// listings reads the listings topic into the store, every partition from
// where the registry checkpoint it loaded ends (else from the start), and
// reports what it has applied to the watermark; it also writes
// checkpoints (see checkpoint.go).
type listings struct {
	cfg        Config
	store      *registry.Store
	log        *slog.Logger
	m          *metrics
	cl         *kgo.Client
	adm        *kadm.Client
	clientOpts []kgo.Opt // base options of the short-lived clients that read checkpoints
	wm         *watermark
	start      time.Time
	restored   chan struct{} // closed once the checkpoint is loaded (or none is)

	mu       sync.Mutex
	consumed map[int32]bool  // partitions whose reading has started
	ckpt     map[int32]int64 // offsets covered by the checkpoint loaded

	// fetch-loop only
	nApplied     atomic.Int64 // listing events applied
	ckptC        chan checkpointJob
	ckptAt       time.Time
	ckptListings int64

	fetchErrs every
}

// checkpointJob is a checkpoint taken in the fetch loop, to be written.
type checkpointJob struct {
	data    []byte
	offsets map[int32]int64
}

func newListings(cfg Config, cl *kgo.Client, clientOpts []kgo.Opt, store *registry.Store, wm *watermark, log *slog.Logger, m *metrics) *listings {
	return &listings{
		cfg: cfg, cl: cl, adm: kadm.NewClient(cl), clientOpts: clientOpts, store: store, wm: wm, log: log, m: m,
		start:     time.Now(),
		restored:  make(chan struct{}),
		consumed:  map[int32]bool{},
		fetchErrs: every{Interval: 10 * time.Second},
	}
}

// caughtUp logs the initial catch-up.
func (l *listings) caughtUp() {
	l.log.Info("listings caught up", "topic", l.cfg.ListingsTopic, "applied", l.nApplied.Load(), "took", time.Since(l.start).Round(time.Millisecond))
}

// run consumes the listings topic until ctx is done, starting from the
// newest registry checkpoint when there is one, and writes checkpoints.
func (l *listings) run(ctx context.Context) {
	if l.cfg.CheckpointTopic != "" {
		l.restore(ctx)
	}
	close(l.restored)
	var wg sync.WaitGroup
	if l.cfg.CheckpointTopic != "" && l.cfg.CheckpointEvery > 0 {
		l.ckptC = make(chan checkpointJob, 1)
		wg.Go(l.checkpointLoop)
	}
	l.fetch(ctx)
	if l.ckptC != nil {
		l.maybeCheckpoint(true) // a restart then reads only what came after
		close(l.ckptC)
	}
	wg.Wait()
}

func (l *listings) fetch(ctx context.Context) {
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
		batch := schema.DecodeListings(len(recs), func(i int) []byte { return recs[i].Value }, func(i int, err error) {
			l.m.listingsBad.Inc()
			l.log.Warn("bad listing skipped", "partition", recs[i].Partition, "offset", recs[i].Offset, "err", err)
		})
		if live {
			for _, li := range batch {
				l.m.listingLateness.Observe(now.Sub(li.ObservedAt).Seconds())
			}
		}
		if len(batch) > 0 {
			l.apply(batch)
		}
		if len(pos) > 0 && l.wm.advance(pos) {
			l.caughtUp()
		}
		l.maybeCheckpoint(false)
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
}

// restore loads the newest checkpoint into the (empty) store; the
// watermark then starts from the offsets it covers. Without a usable one,
// every partition is read from the start. A store that reports its
// changes (registry.WithChanges: the registry history) loads no
// checkpoint: it must see every listing, and a checkpoint holds the
// store's state, not the listings before it. Checkpoints are still
// written.
func (l *listings) restore(ctx context.Context) {
	if l.store.ReportsChanges() {
		l.log.Info("the registry store reports its changes (registry history): reading the listings topic from the start, not from a checkpoint")
		return
	}
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	m, data, err := readCheckpoint(rctx, l.cfg, l.adm, l.clientOpts)
	if err == nil {
		err = l.store.LoadCheckpoint(data)
	}
	switch {
	case errors.Is(err, errNoCheckpoint):
		l.log.Info("no registry checkpoint: reading the listings topic from the start", "checkpoint_topic", l.cfg.CheckpointTopic)
		return
	case err != nil:
		l.log.Warn("registry checkpoint unusable: reading the listings topic from the start", "checkpoint_topic", l.cfg.CheckpointTopic, "err", err)
		return
	}
	l.mu.Lock()
	l.ckpt = m.Offsets
	l.mu.Unlock()
	l.wm.advance(m.Offsets)
	st := l.store.Stats()
	l.m.checkpointLoaded.Set(1)
	l.log.Info("registry checkpoint loaded", "gen", m.Gen, "written_at", m.WrittenAt, "bytes", len(data),
		"offsets", m.Offsets, "registries", st.Registries, "versions", st.Versions, "took", time.Since(start).Round(time.Millisecond))
}

// consume starts reading the listings partitions a probe found that are
// not read yet (all of them at the first probe after restore; later,
// those added to the topic): where the loaded checkpoint ends, else from
// the start. Called by the prober after each probe; false until the
// checkpoint is loaded, so that the watermark cannot pass a topic whose
// old records are gone before their state is in the store.
func (l *listings) consume(pr probe) bool {
	select {
	case <-l.restored:
	default:
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	add := map[int32]kgo.Offset{}
	for p, end := range pr.end {
		if l.consumed[p] {
			continue
		}
		l.consumed[p] = true
		o := kgo.NewOffset().AtStart()
		if c, ok := l.ckpt[p]; ok {
			switch {
			case c > end: // not this topic's offsets (recreated?): the checkpoint does not cover it
				l.wm.reset(p, 0)
			case c >= pr.start[p]:
				o = kgo.NewOffset().At(c)
			}
		}
		add[p] = o
	}
	if len(add) > 0 {
		l.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{l.cfg.ListingsTopic: add})
	}
	return true
}

// maybeCheckpoint takes a checkpoint, once caught up, when listings were
// applied since the last one and CheckpointEvery has passed (now, when
// final), and hands it to checkpointLoop (dropped if a write is under way,
// unless final). Taken in the fetch loop: the store then holds exactly the
// listings below the applied offsets.
func (l *listings) maybeCheckpoint(final bool) {
	if l.ckptC == nil || l.wm.time().IsZero() {
		return
	}
	n := l.store.Stats().Listings
	if n == l.ckptListings || !final && time.Since(l.ckptAt) < l.cfg.CheckpointEvery {
		return
	}
	job := checkpointJob{offsets: l.wm.positions(), data: l.store.AppendCheckpoint(nil)}
	if final {
		l.ckptC <- job
	} else {
		select {
		case l.ckptC <- job:
		default:
			return
		}
	}
	l.ckptAt, l.ckptListings = time.Now(), n
}

// checkpointLoop writes the checkpoints maybeCheckpoint takes, until its
// channel is closed. Writes outlive the reader's context (the last one is
// taken at shutdown) but not 30 seconds.
func (l *listings) checkpointLoop() {
	c := &checkpointer{cfg: l.cfg, cl: l.cl, adm: l.adm, last: -1}
	for job := range l.ckptC {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.write(ctx, job.data, job.offsets)
		cancel()
		if err != nil {
			l.m.checkpointErrors.Inc()
			l.log.Warn("registry checkpoint not written", "topic", l.cfg.CheckpointTopic, "err", err)
			continue
		}
		l.m.checkpointsWritten.Inc()
		l.m.checkpointBytes.Set(float64(len(job.data)))
		l.log.Info("registry checkpoint written", "topic", l.cfg.CheckpointTopic, "bytes", len(job.data),
			"offsets", job.offsets, "took", time.Since(start).Round(time.Millisecond))
	}
}
