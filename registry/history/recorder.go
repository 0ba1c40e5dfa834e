package history

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// Writer stores rows of the registry history: sink.ClickHouse's
// WriteRegistryChanges. It returns nil once they are stored.
type Writer interface {
	WriteRegistryChanges(ctx context.Context, cs []diff.Change) error
}

// WriterFunc adapts a function to a Writer.
type WriterFunc func(ctx context.Context, cs []diff.Change) error

// WriteRegistryChanges calls f.
func (f WriterFunc) WriteRegistryChanges(ctx context.Context, cs []diff.Change) error {
	return f(ctx, cs)
}

var _ Writer = WriterFunc(nil)

// Options configure a Recorder; zero fields take the defaults.
type Options struct {
	// MaxQueued bounds the rows waiting to be written. Default 100,000
	// (tens of megabytes at most).
	MaxQueued int
	// BatchRows is the most rows of one write. Default 10,000.
	BatchRows int
	// RetryMin and RetryMax bound the backoff between failed writes.
	// Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// Logger and Registerer: nil means none.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

func (o Options) withDefaults() Options {
	if o.MaxQueued <= 0 {
		o.MaxQueued = 100_000
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 10_000
	}
	if o.RetryMin <= 0 {
		o.RetryMin = 100 * time.Millisecond
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(10*time.Second, o.RetryMin)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Recorder writes the changes a registry store reports (see New).
// ObserveChanges is safe for concurrent use with Run.
type Recorder struct {
	w   Writer
	o   Options
	m   metrics
	now func() time.Time

	mu    sync.Mutex // guards the fields below
	queue []queued
	last  time.Time // RecordedAt of the last batch
	wake  chan struct{}
}

// queued is a change waiting to be written, described (its schema diff)
// only then, off the listings path.
type queued struct {
	c          registry.Change
	recordedAt time.Time
}

type metrics struct {
	written, dropped, writeErrors prometheus.Counter
	queued                        prometheus.GaugeFunc
}

// New returns a Recorder writing to w; Run starts its writing. The store
// whose history it writes reports to it: registry.New(
// registry.WithChanges(r.ObserveChanges)).
func New(w Writer, o Options) (*Recorder, error) {
	o = o.withDefaults()
	r := &Recorder{w: w, o: o, now: time.Now, wake: make(chan struct{}, 1)}
	opts := func(name, help string) prometheus.CounterOpts {
		return prometheus.CounterOpts{Namespace: "toolaudit", Subsystem: "registry_history", Name: name, Help: help}
	}
	r.m = metrics{
		written:     prometheus.NewCounter(opts("changes_written_total", "Rows of the registry history written to table registry_changes.")),
		dropped:     prometheus.NewCounter(opts("changes_dropped_total", "Rows of the registry history dropped (queue full, or a write the store cannot take); the next start writes them again.")),
		writeErrors: prometheus.NewCounter(opts("write_errors_total", "Failed writes of registry history rows (retried unless permanent).")),
		queued: prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "toolaudit", Subsystem: "registry_history", Name: "changes_queued",
			Help: "Rows of the registry history waiting to be written."}, r.queued),
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{r.m.written, r.m.dropped, r.m.writeErrors, r.m.queued} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

func (r *Recorder) queued() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(len(r.queue))
}

// ObserveChanges queues the changes of one Apply of the store, stamped
// with a RecordedAt later than the batch before (registry.
// WithChanges calls it in the order the changes were made). It does not
// wait for the writer: rows beyond MaxQueued are dropped and counted.
func (r *Recorder) ObserveChanges(cs []registry.Change) {
	if len(cs) == 0 {
		return
	}
	r.mu.Lock()
	at := r.now().UTC().Truncate(time.Millisecond)
	if !at.After(r.last) {
		at = r.last.Add(time.Millisecond)
	}
	r.last = at
	room := max(r.o.MaxQueued-len(r.queue), 0)
	dropped := 0
	if len(cs) > room {
		dropped = len(cs) - room
		cs = cs[:room]
	}
	for _, c := range cs {
		r.queue = append(r.queue, queued{c, at})
	}
	r.mu.Unlock()
	if dropped > 0 {
		r.m.dropped.Add(float64(dropped))
		r.o.Logger.Warn("registry history: queue full, rows dropped (the next start writes them again)", "dropped", dropped)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run writes the queued rows until ctx is done, and returns nil then.
func (r *Recorder) Run(ctx context.Context) error {
	for {
		batch := r.take()
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-r.wake:
				continue
			}
		}
		if err := r.write(ctx, batch); err != nil {
			return nil // ctx done
		}
	}
}

// take removes up to BatchRows rows from the queue and describes them.
func (r *Recorder) take() []diff.Change {
	r.mu.Lock()
	n := min(len(r.queue), r.o.BatchRows)
	if n == 0 {
		r.mu.Unlock()
		return nil
	}
	qs := r.queue[:n]
	r.queue = r.queue[n:]
	if len(r.queue) == 0 {
		r.queue = nil // let the backing array go
	}
	r.mu.Unlock()
	// qs is no longer the queue's: later appends go past it, or to a new
	// array.
	batch := make([]diff.Change, n)
	for i, q := range qs {
		batch[i] = diff.Describe(q.c)
		batch[i].RecordedAt = q.recordedAt
	}
	return batch
}

// write stores batch, retrying with backoff; it returns an error only
// when ctx is done.
func (r *Recorder) write(ctx context.Context, batch []diff.Change) error {
	err := appender.Retry(ctx, r.o.RetryMin, r.o.RetryMax, func(ctx context.Context) error { return r.w.WriteRegistryChanges(ctx, batch) },
		func(err error, _ int, wait time.Duration) error {
			r.m.writeErrors.Inc()
			if wait > 0 {
				r.o.Logger.Warn("registry history: write failed, retrying", "rows", len(batch), "in", wait, "err", err)
			}
			return nil
		})
	switch {
	case err == nil:
		r.m.written.Add(float64(len(batch)))
	case appender.IsPermanent(err):
		r.m.dropped.Add(float64(len(batch)))
		r.o.Logger.Error("registry history: rows the store cannot take, dropped", "rows", len(batch), "err", err)
	default:
		return err
	}
	return nil
}

// Rows is the registry history of ls applied in one call to an empty
// store, described: what a Recorder would write for them, for fixtures
// and tools that hold the listings.
func Rows(ls ...*schema.Listing) []diff.Change {
	var out []diff.Change
	s := registry.New(registry.WithChanges(func(cs []registry.Change) {
		for _, c := range cs {
			out = append(out, diff.Describe(c))
		}
	}))
	s.Apply(ls...)
	return out
}
