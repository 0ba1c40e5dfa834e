package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// The tests in this file drive the writer alone: hand-offs made by the
// test, a consumer group client on kfake for the DLQ and the commits, and
// a real sink. No pipeline, no workers.

const writerGroup = "writer-test"

// writerEnv is a writer running on a kfake cluster.
type writerEnv struct {
	c    *kfake.Cluster
	adm  *kadm.Client
	reg  *prometheus.Registry
	wr   *writer
	done chan error // run's result
	stop context.CancelFunc
}

// startWriter makes a consumer group client of the calls topic (joined, so
// that its commits count), a writer on it, and runs the writer until the
// test ends (or env.stop).
func startWriter(t *testing.T, cfg Config, s appender.Sink) *writerEnv {
	t.Helper()
	c := newCluster(t, 3)
	joined := make(chan struct{})
	var once sync.Once
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...),
		kgo.ConsumerGroup(writerGroup), kgo.ConsumeTopics(callsTopic), kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { once.Do(func() { close(joined) }) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	go cl.PollFetches(testContext(t, 10*time.Second)) // joins the group
	select {
	case <-joined:
	case <-time.After(10 * time.Second):
		t.Fatal("group not joined")
	}

	cfg.Brokers = c.ListenAddrs()
	e := &writerEnv{c: c, adm: admin(t, c), reg: prometheus.NewRegistry(), done: make(chan error, 1)}
	m, err := newMetrics(e.reg, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.wr = newWriter(cfg, s, testLogger(t), m)
	ctx, cancel := context.WithCancel(context.Background())
	e.stop = cancel
	go func() { e.done <- e.wr.run(ctx, cl) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("writer did not stop")
		}
	})
	return e
}

// writerConfig: batches cut by size or by the test's awaits, not by time.
func writerConfig() Config {
	cfg := DefaultConfig()
	cfg.Brokers = []string{"unused"}
	cfg.BatchRows = 1000
	cfg.BatchWait = time.Minute
	cfg.BatchIdle = 0
	cfg.RetryMin, cfg.RetryMax = 5*time.Millisecond, 20*time.Millisecond
	cfg.DrainTimeout = 5 * time.Second
	return cfg
}

// handoffOf returns a hand-off of n rows of l's partition at offsets
// from..from+n-1; the offsets in bad are MALFORMED, with a DLQ record each.
func handoffOf(l *lease, from, n int, bad ...int) *handoff {
	h := &handoff{lease: l}
	for off := from; off < from+n; off++ {
		key := fmt.Sprintf("c-%d-%d", l.partition, off)
		r := schema.Row{CallKey: key, AnalysisID: "live", Topic: l.topic, Partition: l.partition, Offset: int64(off)}
		r.EventID = key
		r.Set(schema.OK, "")
		for _, b := range bad {
			if b == off {
				r.Set(schema.Malformed, "not valid JSON")
				h.dlq = append(h.dlq, &kgo.Record{Topic: dlqTopic, Value: []byte("{bad " + key), Headers: []kgo.RecordHeader{
					{Key: "error", Value: []byte(r.Reason)},
					{Key: "source-topic", Value: []byte(l.topic)},
					{Key: "source-partition", Value: []byte(strconv.Itoa(int(l.partition)))},
					{Key: "source-offset", Value: []byte(strconv.Itoa(off))},
				}})
			}
		}
		h.rows = append(h.rows, r)
		h.counts[r.Class.Index()]++
		h.last = position{offset: int64(off)}
	}
	return h
}

func (e *writerEnv) add(t *testing.T, h *handoff) *batch {
	t.Helper()
	b, err := e.wr.add(testContext(t, 10*time.Second), h)
	if err != nil {
		t.Fatalf("add: %v", err)
	}
	return b
}

func (e *writerEnv) await(t *testing.T, b *batch) {
	t.Helper()
	if err := e.wr.await(testContext(t, 20*time.Second), b); err != nil {
		t.Fatalf("await: %v", err)
	}
}

func (e *writerEnv) committed(t *testing.T) map[int32]int64 {
	t.Helper()
	committed, _ := offsets(t, e.adm, writerGroup)
	return committed
}

// orderSink checks, at each Write, that the batch's DLQ records are in
// Kafka already and that nothing of the batch has been committed yet.
type orderSink struct {
	adm *kadm.Client
	*recSink

	mu        sync.Mutex
	atWrite   []map[int32]int64 // committed offsets seen by each Write
	dlqAtLast int64             // DLQ end offset seen by the last Write
}

func (s *orderSink) Write(ctx context.Context, rows []schema.Row) error {
	os, err := s.adm.FetchOffsets(ctx, writerGroup)
	if err != nil {
		return err
	}
	committed := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) { committed[o.Partition] = o.At })
	ends, err := s.adm.ListEndOffsets(ctx, dlqTopic)
	if err != nil {
		return err
	}
	var dlq int64
	ends.Each(func(o kadm.ListedOffset) { dlq += o.Offset })
	s.mu.Lock()
	s.atWrite = append(s.atWrite, committed)
	s.dlqAtLast = dlq
	s.mu.Unlock()
	return s.recSink.Write(ctx, rows)
}

// TestWriterHandOffs: the hand-offs of several partitions become one sink
// write; its DLQ records are produced before it, the commits follow it,
// each partition at the offset after its last record, and the metrics
// count the batch once it is durable.
func TestWriterHandOffs(t *testing.T) {
	s := &orderSink{recSink: newRecSink()}
	e := startWriter(t, writerConfig(), s)
	s.adm = e.adm
	l0, l1 := e.wr.lease(callsTopic, 0), e.wr.lease(callsTopic, 1)

	// A worker refills its hand-off once add has returned: that must not
	// change what is written.
	var b *batch
	for _, h := range []*handoff{handoffOf(l0, 0, 100, 7, 42), handoffOf(l1, 0, 50), handoffOf(l0, 100, 30, 120)} {
		b = e.add(t, h)
		for i := range h.rows {
			h.rows[i].Class = schema.H1
		}
		h.reset()
	}
	e.await(t, b)

	if len(s.atWrite) != 1 || s.unique() != 180 {
		t.Fatalf("%d writes, %d rows; want one write of 180", len(s.atWrite), s.unique())
	}
	if len(s.atWrite[0]) != 0 || s.dlqAtLast != 3 {
		t.Errorf("at the write: committed %v, DLQ records %d; want nothing committed, 3 dead-lettered", s.atWrite[0], s.dlqAtLast)
	}
	if got, want := e.committed(t), map[int32]int64{0: 130, 1: 50}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed %v, want %v", got, want)
	}
	if l0.committed.Load() != 130 || l1.committed.Load() != 50 {
		t.Errorf("leases say %d and %d committed", l0.committed.Load(), l1.committed.Load())
	}
	dlq := consumeAll(t, e.c, dlqTopic, 3)
	for _, k := range []string{"0/7", "0/42", "0/120"} {
		if dlq[k] == nil {
			t.Errorf("no DLQ record for %s (have %v)", k, dlq)
		}
	}
	rows, _ := s.snapshot()
	if r := rows["c-0-42"]; r.Class != schema.Malformed || r.Offset != 42 {
		t.Errorf("row c-0-42: %+v", r)
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"toolaudit_stream_decisions_total", map[string]string{"class": "OK"}, 177},
		{"toolaudit_stream_decisions_total", map[string]string{"class": "MALFORMED"}, 3},
		{"toolaudit_stream_dlq_records_total", nil, 3},
		{"toolaudit_stream_batch_rows", nil, 1},
		{"toolaudit_stream_sink_retries_total", nil, 0},
	} {
		if got := metricValue(t, e.reg, tc.name, tc.labels); got != tc.want {
			t.Errorf("%s%v = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
	for _, k := range []string{"c-0-0", "c-1-0", "c-0-100"} {
		if r := rows[k]; r.Class != schema.OK {
			t.Errorf("row %s: %+v; the writer kept the hand-off's rows", k, r)
		}
	}
}

// TestWriterReleasedLease: rows of a worker that left are still written,
// but its partition is not committed; another partition of the same batch
// is.
func TestWriterReleasedLease(t *testing.T) {
	s := newRecSink()
	e := startWriter(t, writerConfig(), s)
	gone, stays := e.wr.lease(callsTopic, 0), e.wr.lease(callsTopic, 2)
	e.add(t, handoffOf(gone, 0, 10))
	b := e.add(t, handoffOf(stays, 0, 10))
	e.wr.release(gone)
	e.await(t, b)
	if s.unique() != 20 {
		t.Errorf("%d rows written, want 20", s.unique())
	}
	if got := e.committed(t); len(got) != 1 || got[2] != 10 {
		t.Errorf("committed %v, want only partition 2 at 10", got)
	}
	if gone.committed.Load() != -1 {
		t.Errorf("released lease says %d committed", gone.committed.Load())
	}
}

// TestWriterSinkErrors: a failing sink is retried with the same rows and
// nothing is committed until it succeeds; a permanent error stops the
// writer, which returns it, fails the batch's waiters, and refuses more.
func TestWriterSinkErrors(t *testing.T) {
	t.Run("retryable", func(t *testing.T) {
		s := newRecSink()
		s.failing.Store(true)
		e := startWriter(t, writerConfig(), s)
		l := e.wr.lease(callsTopic, 1)
		b := e.add(t, handoffOf(l, 0, 20))
		done := make(chan error, 1)
		go func() { done <- e.wr.await(context.Background(), b) }()
		eventually(t, 10*time.Second, "retries", func() bool { return s.failures.Load() >= 5 })
		if got := e.committed(t); len(got) != 0 {
			t.Fatalf("committed %v while the sink fails", got)
		}
		s.failing.Store(false)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := e.committed(t); got[1] != 20 || s.unique() != 20 {
			t.Errorf("committed %v, %d rows", got, s.unique())
		}
		if n := metricValue(t, e.reg, "toolaudit_stream_sink_retries_total", nil); n < 5 {
			t.Errorf("sink_retries_total %v", n)
		}
	})
	t.Run("permanent", func(t *testing.T) {
		refused := errors.New("column mismatch")
		e := startWriter(t, writerConfig(), appender.SinkFunc(func(context.Context, []schema.Row) error { return appender.Permanent(refused) }))
		l := e.wr.lease(callsTopic, 0)
		b := e.add(t, handoffOf(l, 0, 20))
		if err := e.wr.await(testContext(t, 10*time.Second), b); !errors.Is(err, refused) {
			t.Errorf("await = %v, want the sink's error", err)
		}
		select {
		case err := <-e.done:
			e.done <- err // for the cleanup
			if !appender.IsPermanent(err) || !errors.Is(err, refused) {
				t.Errorf("run = %v, want the permanent error", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("writer still running after a permanent error")
		}
		if _, err := e.wr.add(context.Background(), handoffOf(l, 20, 1)); !errors.Is(err, errWriterStopped) {
			t.Errorf("add after the stop = %v, want errWriterStopped", err)
		}
		if got := e.committed(t); len(got) != 0 {
			t.Errorf("committed %v", got)
		}
	})
}

// gateSink blocks each Write until the test lets it through.
type gateSink struct {
	*recSink
	entered chan struct{}
	release chan struct{}
}

func (s *gateSink) Write(ctx context.Context, rows []schema.Row) error {
	s.entered <- struct{}{}
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.recSink.Write(ctx, rows)
}

// TestWriterBackpressure: while one batch is being written and the next
// is full, add blocks; it returns once the write is done, or with the
// caller's context.
func TestWriterBackpressure(t *testing.T) {
	s := &gateSink{recSink: newRecSink(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	cfg := writerConfig()
	cfg.BatchRows = 100
	e := startWriter(t, cfg, s)
	l := e.wr.lease(callsTopic, 0)
	first := e.add(t, handoffOf(l, 0, 100)) // full: taken by the writer
	<-s.entered
	e.add(t, handoffOf(l, 100, 100)) // the next batch, full as well
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := e.wr.add(ctx, handoffOf(l, 200, 1)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("add with both batches full = %v, want to block until the deadline", err)
	}
	added := make(chan error, 1)
	go func() {
		_, err := e.wr.add(context.Background(), handoffOf(l, 200, 1))
		added <- err
	}()
	select {
	case err := <-added:
		t.Fatalf("add returned (%v) while both batches are full", err)
	case <-time.After(50 * time.Millisecond):
	}
	s.release <- struct{}{}
	if err := <-added; err != nil {
		t.Fatal(err)
	}
	e.await(t, first)
	close(s.release)
}

// TestWriterClickHouse: through the real ClickHouse sink, with rows
// encoded into the INSERT's columns as they are handed off: every row is
// stored once, read back with FINAL as handed off, and committed after.
func TestWriterClickHouse(t *testing.T) {
	srv := chenginetest.Server(t)
	ctx := testContext(t, time.Minute)
	ch, err := sink.NewClickHouse(ctx, sink.Config{Addr: []string{srv.Addr()}, Database: "stream_writer"}, sink.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	cfg := writerConfig()
	cfg.BatchRows = 300 // three batches
	e := startWriter(t, cfg, ch.Appender())
	var want []schema.Row
	var last *batch
	for p := range int32(3) {
		l := e.wr.lease(callsTopic, p)
		for from := 0; from < 300; from += 100 {
			h := handoffOf(l, from, 100, from+3)
			now := time.Now().UTC().Truncate(time.Millisecond)
			for i := range h.rows {
				h.rows[i].EmittedAt, h.rows[i].DecidedAt = now, now
			}
			want = append(want, h.rows...)
			last = e.add(t, h)
		}
	}
	e.await(t, last)
	got, err := ch.Rows(ctx, "live", 0)
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]schema.Row{}
	for _, r := range got {
		byKey[r.CallKey] = r
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows stored, want %d", len(got), len(want))
	}
	for _, w := range want {
		g := byKey[w.CallKey]
		if !g.EmittedAt.Equal(w.EmittedAt) || !g.DecidedAt.Equal(w.DecidedAt) {
			t.Errorf("row %s: times %v %v, want %v %v", w.CallKey, g.EmittedAt, g.DecidedAt, w.EmittedAt, w.DecidedAt)
		}
		g.EmittedAt, g.DecidedAt, w.EmittedAt, w.DecidedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if g != w {
			t.Errorf("row %s:\n got %+v\nwant %+v", w.CallKey, g, w)
		}
	}
	if got, want := e.committed(t), map[int32]int64{0: 300, 1: 300, 2: 300}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed %v, want %v", got, want)
	}
}
