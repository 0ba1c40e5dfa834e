// Package histwrite is the writing half of the two history recorders
// (registry/history: the registry's changes; approvals/history: the
// approval events): a batch of a history goes to its table retried with
// backoff (appender.Retry) until it is stored or the context ends, and is
// dropped when the table can never take it (appender.IsPermanent); each
// outcome is counted and logged the same way for both. What differs (the
// rows, the metrics' names, the words of the log) is a [Names].
package histwrite

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/internal/promutil"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// Options configure a Writer; zero fields take the defaults.
type Options struct {
	// RetryMin and RetryMax bound the backoff between failed writes.
	// Defaults 100ms and 10s.
	RetryMin, RetryMax time.Duration
	// Logger and Registerer: nil means none.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// WithDefaults returns o with its zero fields set to the defaults.
func (o Options) WithDefaults() Options {
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

// Names say what a Writer writes: its metrics, toolaudit_<Subsystem>_
// followed by <Noun>_written_total, <Noun>_dropped_total and
// write_errors_total, with their help; and the words of its log.
type Names struct {
	Subsystem, Noun                           string
	WrittenHelp, DroppedHelp, WriteErrorsHelp string
	Log                                       string // the log lines' prefix: "registry history"
	Rows                                      string // what the log counts: "rows", "events"
	Store                                     string // what refuses rows for good, in the log: "store", "table"
}

// Writer writes batches of T through write. Its counters are the
// recorder's too (Dropped: rows it drops itself, a full queue).
type Writer[T any] struct {
	write func(context.Context, []T) error
	o     Options
	n     Names

	Written, Dropped, WriteErrors prometheus.Counter
}

// New returns a Writer of batches through write, and registers its
// counters and the recorder's other collectors, more, with o.Registerer.
func New[T any](n Names, write func(context.Context, []T) error, o Options, more ...prometheus.Collector) (*Writer[T], error) {
	o = o.WithDefaults()
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "toolaudit", Subsystem: n.Subsystem, Name: name, Help: help})
	}
	w := &Writer[T]{write: write, o: o, n: n,
		Written:     c(n.Noun+"_written_total", n.WrittenHelp),
		Dropped:     c(n.Noun+"_dropped_total", n.DroppedHelp),
		WriteErrors: c("write_errors_total", n.WriteErrorsHelp)}
	if err := promutil.Register(o.Registerer, append([]prometheus.Collector{w.Written, w.Dropped, w.WriteErrors}, more...)...); err != nil {
		return nil, err
	}
	return w, nil
}

// Write stores batch, retrying with backoff until it is stored (true) or
// the table refuses it for good (false: dropped, counted and logged); it
// returns an error only when ctx is done.
func (w *Writer[T]) Write(ctx context.Context, batch []T) (stored bool, err error) {
	err = appender.Retry(ctx, w.o.RetryMin, w.o.RetryMax, func(ctx context.Context) error { return w.write(ctx, batch) },
		func(err error, _ int, wait time.Duration) error {
			w.WriteErrors.Inc()
			if wait > 0 {
				w.o.Logger.Warn(w.n.Log+": write failed, retrying", w.n.Rows, len(batch), "in", wait, "err", err)
			}
			return nil
		})
	switch {
	case err == nil:
		w.Written.Add(float64(len(batch)))
		return true, nil
	case appender.IsPermanent(err): // the storage contract's one rule
		w.Dropped.Add(float64(len(batch)))
		w.o.Logger.Error(w.n.Log+": "+w.n.Rows+" the "+w.n.Store+" cannot take, dropped", w.n.Rows, len(batch), "err", err)
		return false, nil
	default:
		return false, err
	}
}
