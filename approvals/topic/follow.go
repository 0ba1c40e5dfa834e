package topic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/internal/promutil"
)

// Follower keeps a gate's baseline current with the approvals topic: it
// catches up (CatchUp), then follows the topic (Run), publishing a new
// baseline after each fetch that applied events. Every instance that
// follows the same topic publishes the same baselines, in the same order.
type Follower struct {
	opts  []kgo.Opt
	topic string
	gate  *approvals.Gate
	log   *slog.Logger
	set   approvals.Set
	next  int64 // offset to read from
	bad   int

	version   prometheus.Gauge
	badEvents prometheus.Counter
	published prometheus.Gauge
}

// NewFollower returns a follower of topic that publishes to g, and
// registers its metrics with reg (nil: none): the baseline version in
// force, the events skipped, the time of the last publication.
func NewFollower(opts []kgo.Opt, topic string, g *approvals.Gate, log *slog.Logger, reg prometheus.Registerer) (*Follower, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &Follower{opts: opts, topic: topic, gate: g, log: log,
		version: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolaudit_approvals_baseline_version",
			Help: "Version of the approved baseline in force (approval events applied): equal on every instance that has caught up.",
		}),
		badEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolaudit_approvals_bad_events_total",
			Help: "Approval events skipped because they do not decode or validate (logged with their offset).",
		}),
		published: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolaudit_approvals_published_timestamp_seconds",
			Help: "When the approved baseline in force was published (catch-up, then each fetch that applied events).",
		}),
	}
	if err := promutil.Register(reg, f.version, f.badEvents, f.published); err != nil {
		return nil, err
	}
	return f, nil
}

// publish puts the set's baseline in force.
func (f *Follower) publish() {
	f.gate.Publish(f.set.Snapshot())
	f.version.Set(float64(f.set.Version()))
	f.published.SetToCurrentTime()
}

// CatchUp reads the topic to its end as listed when called and publishes
// the baseline: a front end calls it before deciding anything, so that
// no call is decided against a baseline that lacks approvals or
// rejections already written (under +tofu an empty baseline would let a
// drifted definition pass as new). A missing topic or one of several
// partitions is an error.
func (f *Follower) CatchUp(ctx context.Context) error {
	cl, err := kgo.NewClient(f.opts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	r, err := partitions(ctx, kadm.NewClient(cl), f.topic)
	cl.Close()
	if err != nil {
		return err
	}
	err = readAll(ctx, f.opts, f.topic, true, func(r *kgo.Record) error {
		f.apply(r)
		return nil
	})
	if err != nil {
		return err
	}
	f.next = max(f.next, r[1]) // an empty or wholly compacted-away range
	f.publish()
	f.log.Info("approvals caught up", "topic", f.topic, "baseline_version", f.set.Version(), "bad", f.bad)
	return nil
}

func (f *Follower) apply(r *kgo.Record) {
	f.next = r.Offset + 1
	if r.Attrs.IsControl() {
		return
	}
	e, err := approvals.Decode(r.Value)
	if err == nil {
		err = f.set.Apply(e, r.Offset+1)
	}
	if err != nil {
		f.bad++
		f.badEvents.Inc()
		f.log.Warn("bad approval event skipped", "topic", f.topic, "offset", r.Offset, "err", err)
	}
}

// Run follows the topic from where CatchUp ended until ctx is done. Fetch
// errors are logged (at most one a minute) and retried; the gate keeps
// the last baseline meanwhile.
func (f *Follower) Run(ctx context.Context) {
	cl, err := kgo.NewClient(append(slices.Clone(f.opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{f.topic: {0: kgo.NewOffset().At(f.next)}}),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(time.Second),
	)...)
	if err != nil {
		f.log.Error("approvals: cannot follow the topic", "topic", f.topic, "err", err)
		return
	}
	defer cl.Close()
	var lastWarn time.Time
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.Canceled) && time.Since(lastWarn) > time.Minute {
				lastWarn = time.Now()
				f.log.Warn("approvals fetch failed", "topic", f.topic, "err", err)
			}
		})
		before := f.set.Version()
		fs.EachRecord(f.apply)
		if v := f.set.Version(); v != before {
			f.publish()
			f.log.Info("approvals applied", "topic", f.topic, "baseline_version", v)
		}
	}
}
