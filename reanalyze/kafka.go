package reanalyze

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/fetchpool"
	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/schema"
)

// Fetch sizes: a window is read as a backlog, in fetches of up to
// fetchBytes, each partition's share up to partitionBytes (kgo's default
// share is 1 MiB). The client holds one fetch while the workers decide
// the previous one.
const (
	fetchBytes     = 16 << 20
	partitionBytes = 4 << 20
)

// KafkaSource reads a window of the calls topic from Kafka: each partition
// from the first offset whose timestamp is at or after From - Skew to the
// first whose timestamp is at or after To + Skew, as the partition stands
// when Plan lists them (kadm's ListOffsetsAfterMilli). The Runner keeps the
// records of the window (schema.Window) among them. See the package
// documentation for when that is every call of the window.
type KafkaSource struct {
	Window schema.Window
	// Skew widens the offsets read on both sides: how far a record's
	// timestamp may be from its call's emitted_at, and how far out of
	// order the timestamps of a partition may be.
	Skew time.Duration
	// Opts are the client's options: seed brokers, TLS, SASL
	// (kafkaconf), client id.
	Opts []kgo.Opt
	Log  *slog.Logger

	ranges map[int32]offsets // set by Plan
}

var _ Source = (*KafkaSource)(nil)

// offsets are the offsets [start, end) of a partition to read.
type offsets struct{ start, end int64 }

// ErrTruncated means that Kafka no longer holds records the window may
// include: a partition's log starts at or after the window's start and
// older records were deleted (retention, DeleteRecords). Read the window
// from the archive instead.
var ErrTruncated = errors.New("the calls topic no longer holds the start of the window")

// Plan lists, for every partition of the topic, the offsets of the window
// (and its skew) and returns how many records they span. It fails with
// ErrTruncated when a partition's first record still held is the first of
// the window while older ones were deleted: they may have been in it.
func (s *KafkaSource) Plan(ctx context.Context) (int64, error) {
	cl, err := kgo.NewClient(s.Opts...)
	if err != nil {
		return 0, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topic := s.Window.Topic
	list := func(what string, f func() (kadm.ListedOffsets, error)) (map[int32]kadm.ListedOffset, error) {
		l, err := f()
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("kafka: list %s offsets of %s: %w", what, topic, err)
		}
		ps, ok := l[topic]
		if !ok {
			return nil, fmt.Errorf("kafka: topic %s: %w", topic, kerr.UnknownTopicOrPartition)
		}
		return ps, nil
	}
	// Negative timestamps ask Kafka for special offsets (-1 the end, -2
	// the start): a window from before 1970 is read from the start.
	from, err := list("window start", func() (kadm.ListedOffsets, error) {
		return adm.ListOffsetsAfterMilli(ctx, max(0, s.Window.From.Add(-s.Skew).UnixMilli()), topic)
	})
	if err != nil {
		return 0, err
	}
	to, err := list("window end", func() (kadm.ListedOffsets, error) {
		return adm.ListOffsetsAfterMilli(ctx, max(0, s.Window.To.Add(s.Skew).UnixMilli()), topic)
	})
	if err != nil {
		return 0, err
	}
	logStart, err := list("start", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) })
	if err != nil {
		return 0, err
	}
	s.ranges = map[int32]offsets{}
	var total int64
	for p, f := range from {
		ls := logStart[p].Offset
		if ls > 0 && f.Offset == ls {
			return 0, fmt.Errorf("%w: partition %d begins at offset %d (records before it deleted), the first record at or after %s: read the window from the archive (--source archive) or start it later",
				ErrTruncated, p, ls, s.Window.From.Add(-s.Skew).UTC().Format(time.RFC3339Nano))
		}
		r := offsets{f.Offset, max(f.Offset, to[p].Offset)}
		s.ranges[p] = r
		total += r.end - r.start
	}
	return total, nil
}

// chunkRecords is the most records of a Chunk: a partition's fetch is
// split, so that every worker has a share of it.
const chunkRecords = 1024

// Read reads the planned offsets and emits each fetch's records of a
// partition, in chunks of chunkRecords, from one goroutine. The records'
// memory is pooled (fetchpool): each chunk's goes back to the client once
// it is Done.
func (s *KafkaSource) Read(ctx context.Context, emit func(Chunk) error) error {
	if s.ranges == nil {
		return errors.New("reanalyze: KafkaSource.Read before Plan")
	}
	var events sync.Pool // *[]schema.CallEvent, of cap chunkRecords
	opts := append(slices.Clone(s.Opts), kgo.WithPools(fetchpool.New()))
	return readRanges(ctx, opts, s.Window.Topic, s.ranges, s.logger(), func(recs []*kgo.Record) error {
		for len(recs) > 0 {
			part := recs[:min(len(recs), chunkRecords)]
			recs = recs[len(part):]
			evp, _ := events.Get().(*[]schema.CallEvent)
			if evp == nil {
				evp = new([]schema.CallEvent)
				*evp = make([]schema.CallEvent, 0, chunkRecords)
			}
			evs := (*evp)[:len(part)]
			for i, r := range part {
				evs[i] = schema.CallEvent{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp, Key: r.Key, Value: r.Value}
			}
			done := func() {
				clear(evs) // they point into the records' memory, which goes back now
				for _, r := range part {
					r.Recycle()
				}
				events.Put(evp)
			}
			if err := emit(Chunk{Events: evs, Done: done}); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *KafkaSource) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// readRanges consumes the partitions of topic over their offsets [start,
// end) and calls fn, from the calling goroutine, with each fetch's
// records of a partition that are below its end, control records left
// out, until every range has been read. A range whose records are
// deleted while it is read fails with ErrTruncated. The records are fn's;
// with pooled memory (opts with kgo.WithPools), fn recycles them.
func readRanges(ctx context.Context, opts []kgo.Opt, topic string, ranges map[int32]offsets, log *slog.Logger, fn func([]*kgo.Record) error) error {
	start := map[int32]kgo.Offset{}
	end := map[int32]int64{}
	for p, r := range ranges {
		if r.start < r.end {
			start[p], end[p] = kgo.NewOffset().At(r.start), r.end
		}
	}
	if len(start) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(opts),
		kgo.WithLogger(kafkaconf.Logger(log)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		// Transaction markers are delivered, so that a range ending on one
		// is seen to end.
		kgo.KeepControlRecords(),
		// Records deleted under the reader are an error, not a silent jump.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxPartitionBytes(partitionBytes),
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
				ferr = fmt.Errorf("%w: partition %d: records deleted while they were read: %w", ErrTruncated, p, err)
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
		var parts [][]*kgo.Record
		var done []int32
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
					r.Recycle() // with pooled memory (fetchpool), a batch goes back once all its records are recycled
				}
			}
			if len(recs) > 0 {
				parts = append(parts, recs)
			}
			if last >= e-1 {
				done = append(done, fp.Partition)
				delete(end, fp.Partition)
			}
		})
		if len(done) > 0 {
			cl.PauseFetchPartitions(map[string][]int32{topic: done})
		}
		for _, recs := range parts {
			if err := fn(recs); err != nil {
				return err
			}
		}
	}
	return nil
}
