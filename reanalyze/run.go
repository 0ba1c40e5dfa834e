package reanalyze

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// Source reads the call records of a window for a Runner.
type Source interface {
	// Plan prepares the read and returns about how many records Read will
	// emit (for progress), or a negative number when it cannot tell.
	Plan(ctx context.Context) (int64, error)
	// Read emits the records, a chunk at a time, from one goroutine, until
	// all are read; it stops at the first error of emit, or when ctx is
	// done, and returns it.
	Read(ctx context.Context, emit func(Chunk) error) error
}

// Chunk is records of a Source. Their memory is the source's again once
// Done is called (nil: never), which the Runner does once it has decided
// them; Done may be called from any goroutine.
type Chunk struct {
	Events []schema.CallEvent
	Done   func()
}

// handOff is how many rows a worker decides before it appends them to the
// batch, under its lock (at most BatchRows: a batch holds less than two
// BatchRows).
const handOff = 1024

// Runner decides the calls of one window again and writes their rows. See
// the package documentation.
type Runner struct {
	cfg      Config
	policy   string
	vs       resolve.Versions
	src      Source
	newBatch func() appender.Batch
	log      *slog.Logger

	total, read, decided, written atomic.Int64
}

// New checks cfg and returns a Runner that decides the records src reads
// against vs and writes their rows through batches of newBatch (with
// package appender's contract: sink.ClickHouse.NewBatch). A nil log
// logs nothing.
func New(cfg Config, vs resolve.Versions, src Source, newBatch func() appender.Batch, log *slog.Logger) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if vs == nil || src == nil || newBatch == nil {
		return nil, fmt.Errorf("%w: nil versions, source or batches", ErrConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Suggester == nil {
		cfg.Suggester = suggest.New()
	}
	r := &Runner{cfg: cfg, policy: cfg.policyVersion(), vs: vs, src: src, newBatch: newBatch, log: log}
	r.total.Store(-1)
	return r, nil
}

// Progress is how far a run is; safe to read while it runs.
type Progress struct {
	// Total is about how many records the source will read (-1: unknown).
	Total int64
	// Read records have been handed to the workers, Decided of them were
	// in the window and decided, Written of those are stored.
	Read, Decided, Written int64
}

// Progress returns how far the run is.
func (r *Runner) Progress() Progress {
	return Progress{Total: r.total.Load(), Read: r.read.Load(), Decided: r.decided.Load(), Written: r.written.Load()}
}

// Summary is what a run did.
type Summary struct {
	// Read records; Outside of them were not in the window (the Kafka
	// source reads margins on both sides); Decided ones were decided and
	// stored, ByClass by class.
	Read, Outside, Decided int64
	ByClass                [schema.NumClasses]int64
	// Batches written.
	Batches int
	Took    time.Duration
}

// Run plans the read, then reads, decides and writes until every record of
// the source is stored, and returns what it did; or the first error (the
// source's, a write that failed for good, ctx). It stops only once every
// goroutine it started has returned. Rows written before an error stay:
// running the same analysis again completes it, the table keeps one row
// per call.
func (r *Runner) Run(ctx context.Context) (Summary, error) {
	start := time.Now()
	var sum Summary
	total, err := r.src.Plan(ctx)
	if err != nil {
		return sum, err
	}
	r.total.Store(total)
	r.log.Info("reanalysis starting", "analysis", r.cfg.AnalysisID, "topic", r.cfg.Window.Topic,
		"from", r.cfg.Window.From, "to", r.cfg.Window.To, "policy", r.policy, "records", total, "workers", r.cfg.Workers)

	g, gctx := errgroup.WithContext(ctx)
	work := make(chan Chunk, 2*r.cfg.Workers)
	g.Go(func() error {
		defer close(work)
		return r.src.Read(gctx, func(c Chunk) error {
			select {
			case work <- c:
				r.read.Add(int64(len(c.Events)))
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		})
	})
	gt := r.newGatherer()
	g.Go(func() error { return r.writeBatches(gctx, gt, &sum) })
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for range r.cfg.Workers {
		wg.Add(1)
		g.Go(func() error {
			defer wg.Done()
			w := &worker{r: r, gt: gt, rd: resolve.RowDecider{Resolver: r.cfg.Resolver, KeepRawArgs: r.cfg.KeepRawArgs,
				ArgsKey: r.cfg.ArgsKey, Suggest: r.cfg.Suggester},
				rows: make([]schema.Row, 0, min(handOff, r.cfg.BatchRows))}
			err := w.run(gctx, work)
			st := &w.st
			mu.Lock()
			sum.Read += st.Read
			sum.Outside += st.Outside
			sum.Decided += st.Decided
			for i, n := range st.ByClass {
				sum.ByClass[i] += n
			}
			mu.Unlock()
			return err
		})
	}
	g.Go(func() error {
		wg.Wait()
		return gt.close(gctx)
	})
	err = g.Wait()
	sum.Took = time.Since(start)
	return sum, err
}

// worker decides records and hands their rows to the gatherer, a
// thousand at a time. One per goroutine.
type worker struct {
	r    *Runner
	gt   *gatherer
	rd   resolve.RowDecider
	rows []schema.Row
	st   Summary
}

// run decides the chunks of work until it is closed, and hands over what
// it has left.
func (w *worker) run(ctx context.Context, work <-chan Chunk) error {
	for c := range work {
		if err := w.decide(ctx, c.Events); err != nil {
			return err
		}
		if c.Done != nil {
			c.Done() // the rows borrow nothing from the records: they hold copies
		}
	}
	return w.flush(ctx)
}

// decide decides evs, keeping the rows of the calls in the window.
func (w *worker) decide(ctx context.Context, evs []schema.CallEvent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := w.r
	for i := range evs {
		ev := &evs[i]
		w.rows = append(w.rows, schema.Row{
			AnalysisID: r.cfg.AnalysisID, ResolverBuild: r.cfg.ResolverBuild, PolicyVersion: r.policy,
			Source: schema.SourceReanalysis,
			Topic:  ev.Topic, Partition: ev.Partition, Offset: ev.Offset,
		})
		row := &w.rows[len(w.rows)-1]
		w.rd.DecideRow(r.vs, ev.Value, ev.Timestamp, row)
		if !r.cfg.Window.Contains(row.EmittedAt) { // the window time: DecideRow stores a call without a usable time at its record's
			w.rows = w.rows[:len(w.rows)-1]
			w.st.Outside++
			continue
		}
		w.st.Decided++
		w.st.ByClass[row.Class.Index()]++
		if len(w.rows) == cap(w.rows) {
			if err := w.flush(ctx); err != nil {
				return err
			}
		}
	}
	w.st.Read += int64(len(evs))
	return nil
}

// flush hands the rows to the gatherer.
func (w *worker) flush(ctx context.Context) error {
	if len(w.rows) == 0 {
		return nil
	}
	err := w.gt.add(ctx, w.rows)
	w.r.decided.Add(int64(len(w.rows)))
	clear(w.rows) // drop the references to the calls' strings
	w.rows = w.rows[:0]
	return err
}

// gatherer is the batch being filled by every worker, and the two batches
// that take turns: one filling, one being written. A worker that fills the
// current batch hands it to the writer and waits for the other one, so
// decisions never outrun the store by more than a batch.
type gatherer struct {
	rows, bytes int
	mu          sync.Mutex
	cur         appender.Batch
	free, full  chan appender.Batch
}

func (r *Runner) newGatherer() *gatherer {
	gt := &gatherer{rows: r.cfg.BatchRows, bytes: r.cfg.BatchBytes, free: make(chan appender.Batch, 2), full: make(chan appender.Batch, 2)}
	for range 2 {
		b := r.newBatch()
		b.Reserve(r.cfg.BatchRows, r.cfg.BatchBytes)
		gt.free <- b
	}
	return gt
}

// add appends rows to the current batch, handing it to the writer once it
// is full.
func (gt *gatherer) add(ctx context.Context, rows []schema.Row) error {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	if gt.cur == nil {
		select {
		case gt.cur = <-gt.free:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	gt.cur.Append(rows)
	if gt.cur.Len() >= gt.rows || gt.cur.Size() >= gt.bytes {
		gt.full <- gt.cur // room for both batches: never blocks
		gt.cur = nil
	}
	return nil
}

// close hands the last batch to the writer, once every worker is done.
func (gt *gatherer) close(ctx context.Context) error {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	if gt.cur != nil && gt.cur.Len() > 0 && ctx.Err() == nil {
		gt.full <- gt.cur
	}
	gt.cur = nil
	close(gt.full)
	return nil
}

// writeBatches writes the gatherer's full batches in turn, each retried
// until it is stored.
func (r *Runner) writeBatches(ctx context.Context, gt *gatherer, sum *Summary) error {
	for b := range gt.full {
		if err := r.write(ctx, b); err != nil {
			return err
		}
		r.written.Add(int64(b.Len()))
		sum.Batches++
		b.Reset()
		gt.free <- b
	}
	return nil
}

// write stores b, retrying with backoff for up to RetryFor; an error that
// retrying cannot fix (appender.IsPermanent) fails at once.
func (r *Runner) write(ctx context.Context, b appender.Batch) error {
	start := time.Now()
	return appender.Retry(ctx, r.cfg.RetryMin, r.cfg.RetryMax, b.Write, func(err error, attempt int, wait time.Duration) error {
		switch {
		case wait == 0: // permanent
			return fmt.Errorf("write of %d rows refused: %w", b.Len(), err)
		case time.Since(start) >= r.cfg.RetryFor:
			return fmt.Errorf("write of %d rows still failing after %d attempts in %s: %w", b.Len(), attempt, time.Since(start).Round(time.Millisecond), err)
		}
		r.log.Warn("write failed, retrying", "rows", b.Len(), "attempt", attempt, "retry_in", wait, "err", err)
		return nil
	})
}
