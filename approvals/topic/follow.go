package topic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
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
}

// NewFollower returns a follower of topic that publishes to g.
func NewFollower(opts []kgo.Opt, topic string, g *approvals.Gate, log *slog.Logger) *Follower {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Follower{opts: opts, topic: topic, gate: g, log: log}
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
	f.gate.Publish(f.set.Snapshot())
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
			f.gate.Publish(f.set.Snapshot())
			f.log.Info("approvals applied", "topic", f.topic, "baseline_version", v)
		}
	}
}
