package history

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/histwrite"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
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
	ho := o.histwrite().WithDefaults()
	o.RetryMin, o.RetryMax, o.Logger = ho.RetryMin, ho.RetryMax, ho.Logger
	return o
}

func (o Options) histwrite() histwrite.Options {
	return histwrite.Options{RetryMin: o.RetryMin, RetryMax: o.RetryMax, Logger: o.Logger, Registerer: o.Registerer}
}

// Recorder writes the changes a registry store reports (see New).
// ObserveChanges is safe for concurrent use with Run.
type Recorder struct {
	o   Options
	hw  *histwrite.Writer[diff.Change]
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

// names are the Recorder's metrics (toolaudit_registry_history_
// changes_written_total, _changes_dropped_total, _write_errors_total) and
// the words of its log.
var names = histwrite.Names{Subsystem: "registry_history", Noun: "changes", Log: "registry history", Rows: "rows", Store: "store",
	WrittenHelp:     "Rows of the registry history written to table registry_changes.",
	DroppedHelp:     "Rows of the registry history dropped (queue full, or a write the store cannot take); the next start writes them again.",
	WriteErrorsHelp: "Failed writes of registry history rows (retried unless permanent)."}

// New returns a Recorder writing to w; Run starts its writing. The store
// whose history it writes reports to it: registry.New(
// registry.WithChanges(r.ObserveChanges)).
func New(w Writer, o Options) (*Recorder, error) {
	o = o.withDefaults()
	r := &Recorder{o: o, now: time.Now, wake: make(chan struct{}, 1)}
	queuedRows := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "toolaudit", Subsystem: names.Subsystem, Name: "changes_queued",
		Help: "Rows of the registry history waiting to be written."}, r.queued)
	var err error
	if r.hw, err = histwrite.New(names, func(ctx context.Context, cs []diff.Change) error { return w.WriteRegistryChanges(ctx, cs) }, o.histwrite(), queuedRows); err != nil {
		return nil, err
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
		r.hw.Dropped.Add(float64(dropped))
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
	_, err := r.hw.Write(ctx, batch)
	return err
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
