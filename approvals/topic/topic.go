// Package topic keeps the approved baseline in Kafka: the approvals topic
// (one partition, compacted; docs/design.md, "Approved definitions"),
// read whole into an approvals.Set (Load), written one event at a time
// (Produce), and created or checked (Ensure). It reads the topic as every
// range reader of the module does (internal/topicrange); the listings
// topic's loader is registry/topic's.
package topic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/internal/topicrange"
	"github.com/toolaudit/toolaudit/schema"
)

// Default is the approvals topic's default name.
const Default = schema.TopicApprovals

// ErrPartitions: the approvals topic must have exactly one partition, or
// its events have no single order and instances could disagree on the
// baseline and its version.
var ErrPartitions = errors.New("the approvals topic must have exactly one partition")

// Ensure creates the approvals topic (one partition, compacted) or checks
// that the existing one has one partition.
func Ensure(ctx context.Context, opts []kgo.Opt, topic string) error {
	_, err := Create(ctx, opts, topic)
	return err
}

// Create is Ensure, and reports whether the topic was created (it did not
// exist: no approval event was ever written to it on these brokers).
func Create(ctx context.Context, opts []kgo.Opt, topic string) (created bool, err error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic)
	if err == nil {
		err = resp.Err
	}
	created = err == nil
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return false, fmt.Errorf("kafka: create approvals topic %s: %w", topic, err)
	}
	_, err = partitions(ctx, adm, topic)
	return created, err
}

// partitions checks that topic exists with one partition and returns its
// start and end offsets.
func partitions(ctx context.Context, adm *kadm.Client, topic string) ([2]int64, error) {
	ps, err := topicrange.Offsets(ctx, adm, topic)
	if err != nil {
		return [2]int64{}, err
	}
	r, ok := ps[0]
	if len(ps) != 1 || !ok {
		return [2]int64{}, fmt.Errorf("kafka: %s has %d partitions: %w", topic, len(ps), ErrPartitions)
	}
	return [2]int64{r.Start, r.End}, nil
}

// Stats counts what Load read.
type Stats struct {
	Records, Applied, Bad int
}

// Load reads the approvals topic whole, to its end when called, into a
// set: each event at version offset+1. An event that does not decode is
// logged, counted and skipped, never applied.
func Load(ctx context.Context, opts []kgo.Opt, topic string, log *slog.Logger) (*approvals.Set, Stats, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var st Stats
	set := &approvals.Set{}
	err := readAll(ctx, opts, topic, true, func(r *kgo.Record) error {
		st.Records++
		e, err := approvals.Decode(r.Value)
		if err == nil {
			err = set.Apply(e, r.Offset+1)
		}
		if err != nil {
			st.Bad++
			log.Warn("bad approval event skipped", "topic", topic, "offset", r.Offset, "err", err)
			return nil
		}
		st.Applied++
		return nil
	})
	return set, st, err
}

// Produce writes events to the approvals topic, in order, each
// acknowledged before the next (acks=all), and returns the baseline
// version after the last: its offset + 1.
func Produce(ctx context.Context, opts []kgo.Opt, topic string, es ...*approvals.Event) (int64, error) {
	cl, err := kgo.NewClient(append(slices.Clone(opts), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return 0, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	if _, err := partitions(ctx, kadm.NewClient(cl), topic); err != nil {
		return 0, err
	}
	var version int64
	for _, e := range es {
		if err := e.Validate(); err != nil {
			return version, fmt.Errorf("approval of %s %s %s: %w", e.Registry, e.Server, e.Tool, err)
		}
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(e.Key()), Value: e.AppendJSON(nil)}).First()
		if err != nil {
			return version, fmt.Errorf("kafka: produce approval: %w", err)
		}
		version = r.Offset + 1
	}
	return version, nil
}

// readAll reads topic whole, to its end as listed when called (one
// partition only, when onePartition: ErrPartitions otherwise), calling fn
// for each record in its partition's order (topicrange.Read).
func readAll(ctx context.Context, opts []kgo.Opt, topic string, onePartition bool, fn func(*kgo.Record) error) error {
	ranges, err := topicrange.List(ctx, opts, topic)
	if err != nil {
		return err
	}
	if _, ok := ranges[0]; onePartition && (len(ranges) != 1 || !ok) {
		return fmt.Errorf("kafka: %s has %d partitions: %w", topic, len(ranges), ErrPartitions)
	}
	return topicrange.Read(ctx, opts, topic, ranges, nil, func(_ int32, recs []*kgo.Record) (bool, error) {
		for _, r := range recs {
			if err := fn(r); err != nil {
				return true, err
			}
		}
		return false, nil
	})
}
