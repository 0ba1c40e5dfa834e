package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }

const (
	callsTopic    = "tool-calls"
	listingsTopic = "tool-listings"
	dlqTopic      = "tool-calls-dlq"
)

func corpus(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata", "corpus"}, parts...)...)
}

// newCluster starts an in-process Kafka with the three topics.
func newCluster(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, callsTopic, listingsTopic, dlqTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// testConfig is DefaultConfig made quick for an in-process broker.
func testConfig(c *kfake.Cluster) Config {
	cfg := DefaultConfig()
	cfg.Brokers = c.ListenAddrs()
	cfg.ListingHold = 0
	cfg.ListingsPoll = 20 * time.Millisecond
	cfg.BatchWait = 20 * time.Millisecond
	cfg.FetchMaxWait = 100 * time.Millisecond
	cfg.RetryMin, cfg.RetryMax = 10*time.Millisecond, 100*time.Millisecond
	cfg.DrainTimeout = 3 * time.Second
	cfg.ResolverBuild = "test"
	cfg.KafkaOpts = []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond)}
	return cfg
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return nil
}

// readLines returns the non-blank lines of a file.
func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, append([]byte(nil), l...))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// keyOf is the contract's key: registry/server for a listing, the session
// (or agent) for a call.
func keyOf(line []byte) []byte {
	var e struct {
		Type      string `json:"type"`
		Registry  string `json:"registry"`
		Server    string `json:"server"`
		SessionID string `json:"session_id"`
		AgentID   string `json:"agent_id"`
	}
	_ = json.Unmarshal(line, &e)
	if e.Type == "listing" {
		return []byte(schema.ListingKey(e.Registry, e.Server))
	}
	return []byte(schema.CallKey(e.SessionID, e.AgentID))
}

func newProducer(t testing.TB, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes the lines to topic, keyed as the contract says, and
// returns the records as produced (with their partitions and offsets).
func produce(t testing.TB, cl *kgo.Client, topic string, lines [][]byte) []*kgo.Record {
	t.Helper()
	rs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		rs[i] = &kgo.Record{Topic: topic, Key: keyOf(l), Value: l}
	}
	produceRecords(t, cl, rs)
	return rs
}

func produceRecords(t testing.TB, cl *kgo.Client, rs []*kgo.Record) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// expectedClasses decides the calls offline, as `resolverd check` does.
func expectedClasses(t testing.TB, listingsFile, callsFile string) map[string]schema.Class {
	t.Helper()
	store := registry.New()
	f, err := os.Open(listingsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := check.LoadListings(f, store, nil); err != nil {
		t.Fatal(err)
	}
	calls, err := os.Open(callsFile)
	if err != nil {
		t.Fatal(err)
	}
	defer calls.Close()
	var out bytes.Buffer
	if _, err := check.Check(context.Background(), check.Config{}, store.Snapshot(), calls, &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]schema.Class{}
	dec := json.NewDecoder(&out)
	for {
		var d struct {
			EventID string       `json:"event_id"`
			Class   schema.Class `json:"class"`
		}
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		want[d.EventID] = d.Class
	}
	return want
}

// seedCorpus makes a cluster with partitions calls partitions holding the
// listings and then the calls of a corpus part ("sample", "bfcl"), and
// returns it with the calls.
func seedCorpus(t testing.TB, partitions int32, part string) (*kfake.Cluster, [][]byte) {
	t.Helper()
	c := newCluster(t, partitions)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus(part, "listings.jsonl")))
	calls := readLines(t, corpus(part, "calls.jsonl"))
	produce(t, prod, callsTopic, calls)
	return c, calls
}

// recSink records rows by CallKey. It fails with a retryable error while
// failing is set.
type recSink struct {
	failing  atomic.Bool
	failures atomic.Int64
	onWrite  func(total int) // called after a successful write, outside the lock

	mu     sync.Mutex
	rows   map[string]schema.Row
	total  int // rows acknowledged, duplicates included
	writes int
}

func newRecSink() *recSink { return &recSink{rows: map[string]schema.Row{}} }

var errSinkDown = errors.New("sink down (test)")

func (s *recSink) Write(ctx context.Context, rows []schema.Row) error {
	if s.failing.Load() {
		s.failures.Add(1)
		return errSinkDown
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	for _, r := range rows {
		s.rows[r.CallKey] = r
	}
	s.total += len(rows)
	s.writes++
	total := s.total
	s.mu.Unlock()
	if s.onWrite != nil {
		s.onWrite(total)
	}
	return nil
}

func (s *recSink) unique() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

func (s *recSink) snapshot() (map[string]schema.Row, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]schema.Row, len(s.rows))
	for k, v := range s.rows {
		m[k] = v
	}
	return m, s.total
}

// eventually polls cond every 10ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running is a pipeline started in the background.
type running struct {
	p      *Pipeline
	cancel context.CancelFunc
	done   chan error
}

// start runs a pipeline until stop (or the test's end).
func start(t testing.TB, cfg Config, store *registry.Store, sink appender.Sink, reg prometheus.Registerer) *running {
	t.Helper()
	if store == nil {
		store = registry.New()
	}
	p, err := New(cfg, store, sink, testLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels the pipeline and waits for Run; it may be called twice.
func (r *running) stop(t testing.TB) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("pipeline did not stop within 20s")
		return nil
	}
}

func admin(t testing.TB, c *kfake.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// committedToEnds reports whether the group "resolverd" has committed
// every partition of topics that holds records to its end.
func committedToEnds(adm *kadm.Client, topics ...string) bool {
	committed, err := adm.FetchOffsets(context.Background(), "resolverd")
	if err != nil {
		return false
	}
	ends, err := adm.ListEndOffsets(context.Background(), topics...)
	if err != nil {
		return false
	}
	ok := true
	ends.Each(func(o kadm.ListedOffset) {
		if c, found := committed.Lookup(o.Topic, o.Partition); o.Offset > 0 && (!found || c.At != o.Offset) {
			ok = false
		}
	})
	return ok
}

// offsets returns the group's committed offsets and the calls topic's end
// offsets, by partition.
func offsets(t testing.TB, adm *kadm.Client, group string) (committed, end map[int32]int64) {
	t.Helper()
	ctx := testContext(t, 10*time.Second)
	committed, end = map[int32]int64{}, map[int32]int64{}
	os, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == callsTopic && o.Err == nil {
			committed[o.Partition] = o.At
		}
	})
	ends, err := adm.ListEndOffsets(ctx, callsTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return committed, end
}

// allCommitted reports whether every partition with records has its end
// offset committed.
func allCommitted(t testing.TB, adm *kadm.Client, group string) bool {
	committed, end := offsets(t, adm, group)
	for p, e := range end {
		if e > 0 && committed[p] != e {
			return false
		}
	}
	return true
}

// metricValue sums the samples of a metric family (counter, gauge or
// histogram count) whose labels include want.
func metricValue(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for k, v := range want {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}
