// Package topic keeps the approved baseline in Kafka: the approvals topic
// (one partition, compacted; docs/design.md, "Approved definitions"),
// read whole into an approvals.Set (Load), written one event at a time
// (Produce), and created or checked (Ensure). It also reads any topic
// whole to its end (ReadAll), as the review commands read the listings.
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
	"github.com/toolaudit/toolaudit/registry"
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
	ps, err := allPartitions(ctx, adm, topic)
	if err != nil {
		return [2]int64{}, err
	}
	r, ok := ps[0]
	if len(ps) != 1 || !ok {
		return [2]int64{}, fmt.Errorf("kafka: %s has %d partitions: %w", topic, len(ps), ErrPartitions)
	}
	return r, nil
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

// ReadAll reads every partition of topic from its start to its end as
// listed when called, calling fn for each record in each partition's
// order.
func ReadAll(ctx context.Context, opts []kgo.Opt, topic string, fn func(*kgo.Record) error) error {
	return readAll(ctx, opts, topic, false, fn)
}

func readAll(ctx context.Context, opts []kgo.Opt, topic string, onePartition bool, fn func(*kgo.Record) error) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	adm := kadm.NewClient(cl)
	var ranges map[int32][2]int64
	if onePartition {
		var r [2]int64
		if r, err = partitions(ctx, adm, topic); err == nil {
			ranges = map[int32][2]int64{0: r}
		}
	} else {
		ranges, err = allPartitions(ctx, adm, topic)
	}
	cl.Close()
	if err != nil {
		return err
	}
	start, end := map[int32]kgo.Offset{}, map[int32]int64{}
	for p, r := range ranges {
		if r[0] < r[1] {
			start[p], end[p] = kgo.NewOffset().At(r[0]), r[1]
		}
	}
	if len(start) == 0 {
		return nil
	}
	cl, err = kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		// Transaction markers are delivered, so that a range ending on
		// one is seen to end.
		kgo.KeepControlRecords(),
		// Records deleted under the reader are an error, not a silent jump.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if ferr == nil && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("kafka: read %s partition %d: %w", topic, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var fnErr error
		fs.EachRecord(func(r *kgo.Record) {
			e, ok := end[r.Partition]
			if !ok || fnErr != nil {
				return
			}
			if r.Offset < e && !r.Attrs.IsControl() {
				fnErr = fn(r)
			}
			if r.Offset >= e-1 {
				delete(end, r.Partition)
			}
		})
		if fnErr != nil {
			return fnErr
		}
	}
	return nil
}

func allPartitions(ctx context.Context, adm *kadm.Client, topic string) (map[int32][2]int64, error) {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err == nil {
		err = ends.Error()
	}
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("kafka: topic %s does not exist: %w", topic, err)
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: list the offsets of %s: %w", topic, err)
	}
	if _, ok := ends[topic]; !ok {
		return nil, fmt.Errorf("kafka: topic %s does not exist", topic)
	}
	out := map[int32][2]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		out[o.Partition] = [2]int64{s.Offset, o.Offset}
	})
	return out, nil
}

// Applier applies listings (a registry.Store, a review.Catalog).
type Applier interface {
	Apply(ls ...*schema.Listing) []registry.Issue
}

// LoadListings reads the listings topic whole, to its end when called,
// into a; a listing that does not decode is logged and skipped, as the
// pipeline does. It returns the listings applied and skipped.
func LoadListings(ctx context.Context, opts []kgo.Opt, topic string, a Applier, log *slog.Logger) (applied, bad int, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var batch []*kgo.Record
	flush := func() {
		ls := schema.DecodeListings(len(batch), func(i int) []byte { return batch[i].Value }, func(i int, err error) {
			bad++
			log.Warn("bad listing skipped", "partition", batch[i].Partition, "offset", batch[i].Offset, "err", err)
		})
		for _, is := range a.Apply(ls...) {
			log.Warn("listing issue", "issue", is.String())
		}
		applied += len(ls)
		batch = batch[:0]
	}
	err = ReadAll(ctx, opts, topic, func(r *kgo.Record) error {
		if batch = append(batch, r); len(batch) == 1024 {
			flush()
		}
		return nil
	})
	flush()
	return applied, bad, err
}
