// Package topicrange reads a Kafka topic's partitions between two offsets,
// once: what the re-analysis reads of the calls topic, what a loader of
// the listings or approvals topic reads whole, and what a registry
// checkpoint's chunks are read from. Each used to write the loop itself,
// with its own handling of control records and deleted records.
//
// The rules, for every reader:
//   - A range is [Start, End), as listed when the reader asks (Offsets):
//     records produced after are not read.
//   - Control records (transaction markers) are delivered by the client,
//     so that a range ending on one is seen to end, and are left out of
//     what the caller gets.
//   - There is no reset: records deleted while they are read (retention)
//     fail the read with ErrTruncated instead of a silent jump.
package topicrange

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Range is the offsets [Start, End) of a partition.
type Range struct{ Start, End int64 }

// ErrTruncated means that Kafka deleted records of a range while it was
// read.
var ErrTruncated = errors.New("records were deleted while they were read")

// ErrNoTopic means that the topic does not exist; the error that says so
// also wraps the broker's (kerr.UnknownTopicOrPartition) when it gave one.
var ErrNoTopic = errors.New("topic does not exist")

type noTopic struct {
	topic string
	err   error // the broker's, or nil
}

func (e *noTopic) Error() string {
	s := "kafka: topic " + e.topic + " does not exist"
	if e.err != nil {
		s += ": " + e.err.Error()
	}
	return s
}
func (e *noTopic) Unwrap() error        { return e.err }
func (e *noTopic) Is(target error) bool { return target == ErrNoTopic }

// Offsets lists every partition of topic with its range now, from its
// start offset to its end.
func Offsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]Range, error) {
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
		return nil, &noTopic{topic, err}
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: list the offsets of %s: %w", topic, err)
	}
	if _, ok := ends[topic]; !ok {
		return nil, &noTopic{topic, nil}
	}
	out := map[int32]Range{}
	ends.Each(func(o kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, o.Partition)
		out[o.Partition] = Range{s.Offset, o.Offset}
	})
	return out, nil
}

// List is Offsets through a client of opts of its own.
func List(ctx context.Context, opts []kgo.Opt, topic string) (map[int32]Range, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	return Offsets(ctx, kadm.NewClient(cl), topic)
}

// Read consumes the ranges of topic and calls fn, from the calling
// goroutine, with each fetch's records of a partition that are in its
// range, control records left out, until fn says that the partition is
// done or its end is reached, for every partition; records of a partition
// come in its order. The records are fn's; with pooled memory (opts with
// kgo.WithPools), fn recycles them. A fetch error other than deleted
// records (ErrTruncated) is logged, every hundredth, and retried by the
// client; log may be nil.
func Read(ctx context.Context, opts []kgo.Opt, topic string, ranges map[int32]Range, log *slog.Logger, fn func(p int32, recs []*kgo.Record) (done bool, err error)) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	start := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	for p, r := range ranges {
		if r.Start < r.End {
			start[p], end[p] = kgo.NewOffset().At(r.Start), r.End
		}
	}
	if len(start) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
	)...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	fails := 0
	for len(end) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			switch {
			case errors.Is(err, kerr.OffsetOutOfRange):
				ferr = fmt.Errorf("%w: %s partition %d: %w", ErrTruncated, t, p, err)
			case errors.Is(err, context.Canceled), errors.Is(err, kgo.ErrClientClosed):
			default:
				if fails++; fails%100 == 1 {
					log.Warn("kafka fetch failed", "topic", t, "partition", p, "err", err, "failures", fails)
				}
			}
		})
		if ferr != nil {
			return ferr
		}
		type part struct {
			p    int32
			recs []*kgo.Record
			end  bool
		}
		var parts []part
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			e, ok := end[fp.Partition]
			if !ok || len(fp.Records) == 0 {
				return
			}
			last := fp.Records[len(fp.Records)-1].Offset
			recs := fp.Records[:0]
			for _, r := range fp.Records {
				if r.Offset < e && !r.Attrs.IsControl() {
					recs = append(recs, r)
				} else {
					r.Recycle() // with pooled memory, a batch goes back once all its records are recycled
				}
			}
			parts = append(parts, part{fp.Partition, recs, last >= e-1})
		})
		var done []int32
		for _, pt := range parts {
			over := pt.end
			if len(pt.recs) > 0 {
				d, err := fn(pt.p, pt.recs)
				if err != nil {
					return err
				}
				over = over || d
			}
			if over {
				done = append(done, pt.p)
				delete(end, pt.p)
			}
		}
		if len(done) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{topic: done})
		}
	}
	return nil
}

// ReadAll reads every partition of topic whole, from its start to its end
// as listed when called (List, then Read).
func ReadAll(ctx context.Context, opts []kgo.Opt, topic string, log *slog.Logger, fn func(p int32, recs []*kgo.Record) error) error {
	ranges, err := List(ctx, opts, topic)
	if err != nil {
		return err
	}
	return Read(ctx, opts, topic, ranges, log, func(p int32, recs []*kgo.Record) (bool, error) { return false, fn(p, recs) })
}
