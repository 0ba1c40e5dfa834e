package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// partSink records, per write, the partitions its rows came from.
type partSink struct {
	mu     sync.Mutex
	writes []map[int32]int // partition -> rows, per write
	rows   int
}

func (s *partSink) Write(_ context.Context, rows []schema.Row) error {
	m := map[int32]int{}
	for _, r := range rows {
		m[r.Partition]++
	}
	s.mu.Lock()
	s.writes = append(s.writes, m)
	s.rows += len(rows)
	s.mu.Unlock()
	return nil
}

func (s *partSink) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rows
}

// TestOneWriterForAllPartitions: the rows of all partitions go into the
// same sink writes, whose size is BatchRows, not a partition's share of it,
// and every partition's offset is committed behind them.
func TestOneWriterForAllPartitions(t *testing.T) {
	const parts = 6
	c, calls := seedCorpus(t, parts, "bfcl")

	sink := &partSink{}
	cfg := testConfig(c)
	cfg.BatchRows = len(calls) / 2
	cfg.BatchWait = 2 * time.Second // the rest once all is decided
	cfg.BatchIdle = 0               // a pause in decoding must not cut the first batch
	r := start(t, cfg, nil, sink, nil)
	eventually(t, 30*time.Second, "every call written", func() bool { return sink.total() >= len(calls) })
	adm := admin(t, c)
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if sink.total() != len(calls) {
		t.Fatalf("%d rows written, want %d", sink.total(), len(calls))
	}
	first := sink.writes[0]
	n := 0
	for _, k := range first {
		n += k
	}
	// Workers hand off 256 rows at a time, as they decide them: a full
	// batch holds several partitions' rows.
	if len(first) < 2 || n < cfg.BatchRows || n >= cfg.BatchRows+handOff {
		t.Errorf("first write: %d rows from partitions %v; want %d..%d rows from several partitions",
			n, first, cfg.BatchRows, cfg.BatchRows+handOff-1)
	}
	if len(sink.writes) < 2 {
		t.Errorf("%d writes, want a full batch and then the rest", len(sink.writes))
	}
	t.Logf("writes: %v", sink.writes)
}

// countingBatcher is a Batcher that counts its batches and checks that
// each is Reset after a successful Write before it is filled again.
type countingBatcher struct {
	partSink
	made   int
	resets int
	dirty  bool // a written batch was appended to without a Reset
}

func (s *countingBatcher) NewBatch() appender.Batch {
	s.mu.Lock()
	s.made++
	s.mu.Unlock()
	return &countingBatch{s: s}
}

type countingBatch struct {
	s       *countingBatcher
	rows    []schema.Row
	written bool
}

func (b *countingBatch) Append(rows []schema.Row) {
	if b.written {
		b.s.mu.Lock()
		b.s.dirty = true
		b.s.mu.Unlock()
	}
	b.rows = append(b.rows, rows...)
}
func (b *countingBatch) AppendEvents([]schema.CallEvent) {}
func (b *countingBatch) Archives() bool                  { return false }
func (b *countingBatch) Reserve(int, int)                {}
func (b *countingBatch) Len() int                        { return len(b.rows) }

// Size: a kilobyte per row.
func (b *countingBatch) Size() int { return 1000 * len(b.rows) }
func (b *countingBatch) Write(ctx context.Context) error {
	b.written = true
	return b.s.partSink.Write(ctx, b.rows)
}
func (b *countingBatch) Reset() {
	b.s.mu.Lock()
	b.s.resets++
	b.s.mu.Unlock()
	b.rows, b.written = b.rows[:0], false
}

// TestBatchBytes: a batch is written once its Size reaches BatchBytes,
// however far it is from BatchRows.
func TestBatchBytes(t *testing.T) {
	c, calls := seedCorpus(t, 3, "bfcl")
	sink := &countingBatcher{}
	cfg := testConfig(c)
	cfg.BatchRows = 1 << 30
	cfg.BatchBytes = 1000 * len(calls) / 3
	cfg.BatchWait = time.Minute // only size cuts a batch before the end
	cfg.BatchIdle = 0
	r := start(t, cfg, nil, sink, nil)
	eventually(t, 30*time.Second, "two full batches written", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.writes) >= 2
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	want := cfg.BatchBytes / 1000
	for i, w := range sink.writes[:2] {
		n := 0
		for _, k := range w {
			n += k
		}
		if n < want || n >= want+handOff {
			t.Errorf("write %d: %d rows, want %d..%d", i, n, want, want+handOff-1)
		}
	}
}

// TestBatchIdle: once the stream pauses, a batch a tenth full or more is
// written after BatchIdle, not BatchWait; a smaller one waits BatchWait.
func TestBatchIdle(t *testing.T) {
	for _, tc := range []struct {
		name        string
		rowsPerCall int // BatchRows = rowsPerCall * calls
		early       bool
	}{
		{"a fifth full", 5, true},
		{"a twentieth full", 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, calls := seedCorpus(t, 3, "sample")
			sink := &partSink{}
			cfg := testConfig(c)
			cfg.BatchRows = tc.rowsPerCall * len(calls)
			cfg.BatchWait = 4 * time.Second
			cfg.BatchIdle = 200 * time.Millisecond // well above any pause while the few calls are decided
			began := time.Now()
			r := start(t, cfg, nil, sink, nil)
			eventually(t, 30*time.Second, "every call written", func() bool { return sink.total() >= len(calls) })
			took := time.Since(began)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			// Start-up (joining the group, reading the listings) takes
			// well under BatchWait here.
			if early := took < cfg.BatchWait; early != tc.early {
				t.Errorf("written after %v with BatchWait %v; want early %v", took, cfg.BatchWait, tc.early)
			}
		})
	}
}

// TestBatcherReused: a sink with NewBatch gets at most two batches (one
// filling, one written) however many writes there are, each Reset between
// uses.
func TestBatcherReused(t *testing.T) {
	c, calls := seedCorpus(t, 3, "sample")

	sink := &countingBatcher{}
	reg := prometheus.NewRegistry()
	cfg := testConfig(c)
	cfg.BatchRows = 20
	r := start(t, cfg, nil, sink, reg)
	eventually(t, 30*time.Second, "every call written", func() bool { return sink.total() >= len(calls) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.made < 1 || sink.made > 2 {
		t.Errorf("%d batches made, want 1 or 2", sink.made)
	}
	if len(sink.writes) < len(calls)/(20+handOff) || sink.resets != len(sink.writes) || sink.dirty {
		t.Errorf("%d writes, %d resets, appended without reset: %v", len(sink.writes), sink.resets, sink.dirty)
	}
	if n := metricValue(t, reg, "toolaudit_stream_batch_rows", nil); int(n) != len(sink.writes) {
		t.Errorf("batch_rows observed %v times, want %d", n, len(sink.writes))
	}
}
