// Package history keeps the history of the approved baseline: it reads
// the approvals topic from its start and follows it, writing every
// approval event it reads, with the baseline version it makes, to a
// Writer (sink.ClickHouse's WriteApprovalEvents: table approval_events).
// The topic is compacted, so it keeps only the last verdict on each
// definition; the table keeps every event once written, so that who
// approved, rejected or revoked what, and why, can be reviewed after
// compaction removed it from the topic.
//
// Delivery. Every start reads the topic from its start again: an event
// written before is written again and collapses with its first copy in
// the table (its key), so nothing the topic still holds is missing after
// a start, whatever the last run managed to write. A failed write is
// retried with backoff, and the topic is not read further meanwhile (the
// events are a person's actions: thousands, not millions); a write the
// table can never take (appender.IsPermanent) is dropped, counted and logged.
// An event that does not decode or validate is skipped, counted and
// logged, as the followers skip it. Events written to the topic and
// compacted away before any start read them are lost to the history: one
// instance of a fleet should run it (resolverd run --registry-history).
package history

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/histwrite"
)

// Writer stores approval events: sink.ClickHouse's WriteApprovalEvents.
// It returns nil once they are stored.
type Writer interface {
	WriteApprovalEvents(ctx context.Context, es []approvals.Recorded) error
}

// Options configure a Recorder: the backoff of its writes (defaults
// 100ms to 10s), its logger and its metrics' registerer; zero fields take
// the defaults.
type Options = histwrite.Options

// Recorder copies the approvals topic to a Writer (Run).
type Recorder struct {
	opts  []kgo.Opt
	topic string
	o     Options
	hw    *histwrite.Writer[approvals.Recorded]

	bad     prometheus.Counter
	version prometheus.Gauge
}

// names are the Recorder's metrics (toolaudit_approval_history_
// events_written_total, _events_dropped_total, _write_errors_total) and
// the words of its log.
var names = histwrite.Names{Subsystem: "approval_history", Noun: "events", Log: "approval history", Rows: "events", Store: "table",
	WrittenHelp:     "Approval events written to table approval_events (again at every start: they collapse).",
	DroppedHelp:     "Approval events dropped because the table cannot take them (logged).",
	WriteErrorsHelp: "Failed writes of approval events (retried unless permanent)."}

// New returns a Recorder of topic (read with the client options opts,
// partition 0: the approvals topic has one) writing to w, and registers
// its metrics with o.Registerer.
func New(opts []kgo.Opt, topic string, w Writer, o Options) (*Recorder, error) {
	o = o.WithDefaults()
	r := &Recorder{opts: opts, topic: topic, o: o,
		bad: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "toolaudit", Subsystem: names.Subsystem, Name: "bad_events_total",
			Help: "Approval events skipped because they do not decode or validate (logged with their offset)."}),
		version: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "toolaudit", Subsystem: names.Subsystem, Name: "version",
			Help: "Baseline version up to which the approvals topic is written to table approval_events (read from the start at every start)."}),
	}
	var err error
	if r.hw, err = histwrite.New(names, func(ctx context.Context, es []approvals.Recorded) error { return w.WriteApprovalEvents(ctx, es) }, o, r.bad, r.version); err != nil {
		return nil, err
	}
	return r, nil
}

// Run reads the topic from its start and follows it, writing its events,
// until ctx is done; it returns nil then, or an error if the client
// cannot be made. Fetch errors (a topic not yet created among them) are
// logged at most once a minute and retried.
func (r *Recorder) Run(ctx context.Context) error {
	cl, err := kgo.NewClient(append(slices.Clone(r.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(time.Second),
	)...)
	if err != nil {
		return fmt.Errorf("approval history: kafka: %w", err)
	}
	defer cl.Close()
	var lastWarn time.Time
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return nil
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && time.Since(lastWarn) > time.Minute {
				lastWarn = time.Now()
				r.o.Logger.Warn("approval history: fetch failed", "topic", r.topic, "err", err)
			}
		})
		var batch []approvals.Recorded
		var last int64
		fs.EachRecord(func(rec *kgo.Record) {
			last = rec.Offset + 1
			e, err := approvals.Decode(rec.Value)
			if err != nil {
				r.bad.Inc()
				r.o.Logger.Warn("approval history: bad approval event skipped", "topic", r.topic, "offset", rec.Offset, "err", err)
				return
			}
			batch = append(batch, approvals.Recorded{Event: *e, Version: rec.Offset + 1})
		})
		if err := r.write(ctx, batch); err != nil {
			return nil // ctx done
		}
		if last > 0 {
			r.version.Set(float64(last))
		}
	}
}

// write stores batch, retrying with backoff; it returns an error only
// when ctx is done.
func (r *Recorder) write(ctx context.Context, batch []approvals.Recorded) error {
	if len(batch) == 0 {
		return nil
	}
	stored, err := r.hw.Write(ctx, batch)
	if stored {
		r.o.Logger.Info("approval history written", "events", len(batch), "baseline_version", batch[len(batch)-1].Version)
	}
	return err
}
