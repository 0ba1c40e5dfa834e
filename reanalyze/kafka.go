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
	"github.com/toolaudit/toolaudit/internal/topicrange"
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

// DefaultConfirm is the default of KafkaSource.Confirm.
const DefaultConfirm = 1000

// KafkaSource reads a window of the calls topic from Kafka: each partition
// from the first record stamped at or after From - Horizon, as it stood
// when Plan listed it, until Confirm calls in a row emitted at or after To
// + Horizon have been read, or to its end; and it reports, per partition,
// what it read and whether it can prove that it read every call of the
// window (Report). See the package documentation for the rule and its
// limits.
type KafkaSource struct {
	Window schema.Window
	// Horizon bounds how far a partition may be out of place: a record's
	// timestamp before its call's emitted_at, a call's emitted_at behind
	// the calls before it in its partition.
	Horizon time.Duration
	// Confirm calls in a row, each emitted at or after To + Horizon, end
	// a partition's read: one record can be hours off (a producer's
	// clock), Confirm of them in a row are the partition moving on. A
	// call without a usable emitted_at neither counts nor breaks the run
	// unless its record's timestamp is before To + Horizon. Default
	// DefaultConfirm.
	Confirm int
	// Opts are the client's options: seed brokers, TLS, SASL
	// (kafkaconf), client id.
	Opts []kgo.Opt
	Log  *slog.Logger

	parts map[int32]*partScan // set by Plan
}

var _ Source = (*KafkaSource)(nil)

// ErrTruncated means that Kafka no longer holds records the window may
// include: a partition's records were deleted while they were read.
// Read the window from the archive instead.
var ErrTruncated = topicrange.ErrTruncated

// PartitionReport is what the Kafka source read of one partition, and
// whether that is provably every call of the window it holds.
type PartitionReport struct {
	Partition int32
	// Start and End are the offsets read, [Start, End); LogStart and
	// HighWatermark the partition's as they stood when the run started.
	Start, End, LogStart, HighWatermark int64
	// Read records, InWindow of them in the window, Outside not.
	Read, InWindow, Outside int64
	// PastWindow is true when the read ended on Confirm calls in a row
	// past To + Horizon, false when it reached HighWatermark.
	PastWindow bool
	// Disorder is the widest gap seen between the latest emitted_at of a
	// partition's calls so far and a call's emitted_at after them;
	// EarlyStamp the widest a record's timestamp was before its call's
	// emitted_at, among records with a timestamp; NoTimestamp counts the
	// records of a call with a usable emitted_at stamped -1 (none).
	Disorder, EarlyStamp time.Duration
	NoTimestamp          int64
	// Unproven says why the read may have missed calls of the window,
	// naming offsets; empty when it provably did not (the package
	// documentation says under what rule).
	Unproven []string

	early      int64 // records stamped more than the horizon before their call
	firstEarly int64
}

// partScan follows one partition's read: the report, and when to stop.
type partScan struct {
	w       schema.Window
	horizon time.Duration
	confirm int
	end     time.Time // To + horizon
	run     int       // calls emitted at or after end, in a row
	latest  time.Time // the latest emitted_at so far
	rep     PartitionReport
}

// add counts the record at offset, stamped ts, whose call's emitted_at is
// emitted (zero: none usable), and reports whether the partition's read
// is over.
func (s *partScan) add(offset int64, ts, emitted time.Time) (done bool) {
	r := &s.rep
	r.Read++
	r.End = offset + 1
	at := schema.WindowTime(emitted, ts)
	if s.w.Contains(at) {
		r.InWindow++
	} else {
		r.Outside++
	}
	if !emitted.IsZero() {
		// Kafka's timestamps are whole milliseconds: a record stamped with
		// its call's emitted_at holds it truncated.
		if d := emitted.Truncate(time.Millisecond).Sub(ts); d > 0 {
			if ts.UnixMilli() < 0 {
				r.NoTimestamp++
			} else {
				r.EarlyStamp = max(r.EarlyStamp, d)
			}
			if d > s.horizon {
				if r.early++; r.early == 1 {
					r.firstEarly = offset
				}
			}
		}
		if !s.latest.IsZero() {
			r.Disorder = max(r.Disorder, s.latest.Sub(emitted))
		}
		if emitted.After(s.latest) {
			s.latest = emitted
		}
	}
	switch {
	case at.Before(s.end):
		s.run = 0
	case !emitted.IsZero():
		s.run++
	}
	if s.run >= s.confirm {
		r.PastWindow = true
		return true
	}
	return false
}

// Plan lists, for every partition of the topic, the offset of its first
// record stamped at or after From - Horizon, its log start and its end,
// and returns about how many records the window spans (to the first
// record stamped at or after To + Horizon).
func (s *KafkaSource) Plan(ctx context.Context) (int64, error) {
	if s.Confirm <= 0 {
		s.Confirm = DefaultConfirm
	}
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
	// the start): a window from before 1970 is read from the log start
	// (below).
	from, err := list("window start", func() (kadm.ListedOffsets, error) {
		return adm.ListOffsetsAfterMilli(ctx, max(0, s.Window.From.Add(-s.Horizon).UnixMilli()), topic)
	})
	if err != nil {
		return 0, err
	}
	to, err := list("window end", func() (kadm.ListedOffsets, error) {
		return adm.ListOffsetsAfterMilli(ctx, max(0, s.Window.To.Add(s.Horizon).UnixMilli()), topic)
	})
	if err != nil {
		return 0, err
	}
	logStart, err := list("start", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) })
	if err != nil {
		return 0, err
	}
	ends, err := list("end", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) })
	if err != nil {
		return 0, err
	}
	s.parts = map[int32]*partScan{}
	var total int64
	for p, e := range ends {
		hw, ls := e.Offset, logStart[p].Offset
		start := from[p].Offset
		switch {
		case s.Window.From.Add(-s.Horizon).UnixMilli() <= 0: // records stamped -1 (none) too
			start = ls
		case start < 0 || start > hw: // no record stamped that late
			start = hw
		}
		ps := &partScan{w: s.Window, horizon: s.Horizon, confirm: s.Confirm, end: s.Window.To.Add(s.Horizon),
			rep: PartitionReport{Partition: p, Start: start, End: start, LogStart: ls, HighWatermark: hw}}
		if ls > 0 && start == ls {
			ps.rep.Unproven = append(ps.rep.Unproven, fmt.Sprintf("the records before offset %d were deleted (retention, DeleteRecords) and the first one held is the read's start: they may have been in the window", ls))
		}
		s.parts[p] = ps
		if t := to[p].Offset; t > start && t <= hw {
			total += t - start
		} else if t < 0 || t > hw {
			total += hw - start
		}
	}
	return total, nil
}

// Report returns the partitions' reports, by partition, once Read has
// returned.
func (s *KafkaSource) Report() []PartitionReport {
	out := make([]PartitionReport, 0, len(s.parts))
	for _, ps := range s.parts {
		r := ps.rep
		if r.early > 0 {
			r.Unproven = append(slices.Clip(r.Unproven), fmt.Sprintf("%d records stamped more than the horizon (%s) before their call's emitted_at (%d with no timestamp), the first at offset %d: a call of the window stamped so before offset %d, where the read began, is not read",
				r.early, s.Horizon, r.NoTimestamp, r.firstEarly, r.Start))
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b PartitionReport) int { return int(a.Partition - b.Partition) })
	return out
}

// chunkRecords is the most records of a Chunk: a partition's fetch is
// split, so that every worker has a share of it.
const chunkRecords = 1024

// Read reads each partition from its planned start until its read is over
// (partScan) or its end, and emits each fetch's records of a partition,
// in chunks of chunkRecords, from one goroutine. It decodes each record's
// emitted_at to know where the partition stands (the workers decode it
// again to decide the call). The records' memory is pooled (fetchpool):
// each chunk's goes back to the client once it is Done.
func (s *KafkaSource) Read(ctx context.Context, emit func(Chunk) error) error {
	if s.parts == nil {
		return errors.New("reanalyze: KafkaSource.Read before Plan")
	}
	ranges := map[int32]topicrange.Range{}
	for p, ps := range s.parts {
		ranges[p] = topicrange.Range{Start: ps.rep.Start, End: ps.rep.HighWatermark}
	}
	var (
		events sync.Pool // *[]schema.CallEvent, of cap chunkRecords
		dec    schema.CallDecoder
		call   schema.Call
	)
	opts := append(slices.Clone(s.Opts), kgo.WithPools(fetchpool.New()))
	send := func(recs []*kgo.Record) error {
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
	}
	return readRanges(ctx, opts, s.Window.Topic, ranges, s.logger(), func(p int32, recs []*kgo.Record) (bool, error) {
		ps := s.parts[p]
		for i, r := range recs {
			_ = dec.Decode(r.Value, &call) // a MALFORMED call keeps its emitted_at when it has a usable one
			if ps.add(r.Offset, r.Timestamp, call.EmittedAt) {
				for _, x := range recs[i+1:] {
					x.Recycle()
				}
				return true, send(recs[:i+1])
			}
		}
		return false, send(recs)
	})
}

func (s *KafkaSource) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// readRanges reads the ranges of topic as every range reader of the
// module does (topicrange.Read: control records left out, deleted records
// ErrTruncated), with the re-analysis's fetch sizes and its logger.
func readRanges(ctx context.Context, opts []kgo.Opt, topic string, ranges map[int32]topicrange.Range, log *slog.Logger, fn func(p int32, recs []*kgo.Record) (done bool, err error)) error {
	return topicrange.Read(ctx, append(slices.Clone(opts),
		kgo.WithLogger(kafkaconf.Logger(log)),
		kgo.FetchMaxBytes(fetchBytes),
		kgo.FetchMaxPartitionBytes(partitionBytes),
	), topic, ranges, log, fn)
}
