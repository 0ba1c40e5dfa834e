package reanalyze

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry/topic"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
	"github.com/toolaudit/toolaudit/sink/appender"
	"github.com/toolaudit/toolaudit/stream"
)

func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }

const (
	callsTopic    = "tool-calls"
	listingsTopic = "tool-listings"
)

func corpus(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata", "corpus"}, parts...)...)
}

func testContext(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newCluster starts an in-process Kafka with the calls topic in
// partitions partitions, the listings topic in two and the pipeline's
// dead-letter topic.
func newCluster(t testing.TB, partitions int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, callsTopic), kfake.SeedTopics(2, listingsTopic),
		kfake.SeedTopics(1, "tool-calls-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func clientOpts(c *kfake.Cluster) []kgo.Opt {
	return []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
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

// member reads one member of an event, "" when absent or not a string.
func member(line []byte, name string) string {
	var m map[string]any
	_ = json.Unmarshal(line, &m)
	s, _ := m[name].(string)
	return s
}

// emittedAt is a call's emitted_at, or zero.
func emittedAt(line []byte) time.Time {
	t, err := schema.ParseTime(member(line, "emitted_at"))
	if err != nil {
		return time.Time{}
	}
	return t
}

// produce writes records and returns them with their partitions and
// offsets.
func produce(t testing.TB, c *kfake.Cluster, rs []*kgo.Record) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(testContext(t, 30*time.Second), rs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return rs
}

// callRecords are calls as ingest produces them: keyed by session, the
// record's timestamp the call's emitted_at (orElse when it has none).
func callRecords(lines [][]byte, orElse time.Time) []*kgo.Record {
	rs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		ts := emittedAt(l)
		if ts.IsZero() {
			ts = orElse
		}
		rs[i] = &kgo.Record{Topic: callsTopic, Key: []byte(schema.CallKey(member(l, "session_id"), member(l, "agent_id"))), Value: l, Timestamp: ts}
	}
	return rs
}

// seedSample makes a cluster holding the sample corpus's listings and
// calls, and returns it with the call records as produced.
func seedSample(t testing.TB, partitions int32) (*kfake.Cluster, []*kgo.Record) {
	t.Helper()
	c := newCluster(t, partitions)
	var ls []*kgo.Record
	for _, l := range readLines(t, corpus("sample", "listings.jsonl")) {
		ls = append(ls, &kgo.Record{Topic: listingsTopic, Key: []byte(schema.ListingKey(member(l, "registry"), member(l, "server"))), Value: l})
	}
	produce(t, c, ls)
	return c, produce(t, c, callRecords(readLines(t, corpus("sample", "calls.jsonl")), sampleStart))
}

// sampleStart is when the sample's calls begin (2026-12-01T00:14:00.379Z
// is the first); the timeless ones are produced at it.
var sampleStart = time.Date(2026, 12, 1, 0, 14, 0, 0, time.UTC)

var dbSeq atomic.Int32

// newStore returns a writer on a fresh, migrated database of the shared
// engine, closed at the end of the test.
func newStore(t testing.TB) *sink.ClickHouse {
	t.Helper()
	srv := chenginetest.Server(t)
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_"))
	db := fmt.Sprintf("reanalyze_%s_%d", name[:min(len(name), 40)], dbSeq.Add(1))
	ch, err := sink.NewClickHouse(testContext(t, 30*time.Second), sink.Config{Addr: []string{srv.Addr()}, Database: db}, sink.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// history loads the cluster's listings topic.
func history(t testing.TB, c *kfake.Cluster) *registry.Snapshot {
	t.Helper()
	store := registry.New()
	st, err := topic.LoadListings(testContext(t, 30*time.Second), clientOpts(c), listingsTopic, store, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Applied != st.Records || st.Applied == 0 {
		t.Fatalf("listings: %+v", st)
	}
	return store.Snapshot()
}

// testConfig is DefaultConfig for window w and analysis id.
func testConfig(analysis string, w schema.Window) Config {
	cfg := DefaultConfig()
	cfg.Window, cfg.AnalysisID, cfg.ResolverBuild = w, analysis, "test"
	cfg.RetryMin, cfg.RetryMax, cfg.RetryFor = 5*time.Millisecond, 20*time.Millisecond, 10*time.Second
	return cfg
}

// batches are the store's batches as the Runner writes them.
func batches(ch *sink.ClickHouse) func() appender.Batch {
	return func() appender.Batch { return ch.NewBatch() }
}

// reanalyze runs one re-analysis of src into ch.
func reanalyze(t testing.TB, cfg Config, vs resolve.Versions, src Source, ch *sink.ClickHouse) Summary {
	t.Helper()
	r, err := New(cfg, vs, src, batches(ch), nil)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := r.Run(testContext(t, 2*time.Minute))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if p := r.Progress(); p.Written != sum.Decided || p.Decided != sum.Decided || p.Read != sum.Read {
		t.Errorf("progress %+v at the end of %+v", p, sum)
	}
	return sum
}

// kafkaSource is the window of the cluster's calls topic.
func kafkaSource(c *kfake.Cluster, w schema.Window, horizon time.Duration) *KafkaSource {
	return &KafkaSource{Window: w, Horizon: horizon, Opts: clientOpts(c)}
}

// stored returns the decisions of an analysis by call key, read with FINAL.
func stored(t testing.TB, ch *sink.ClickHouse, analysis string) map[string]schema.Row {
	t.Helper()
	rows, err := ch.Rows(testContext(t, 30*time.Second), analysis, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]schema.Row{}
	for _, r := range rows {
		if _, dup := out[r.CallKey]; dup {
			t.Errorf("call %s stored twice under FINAL", r.CallKey)
		}
		out[r.CallKey] = r
	}
	return out
}

// checked decides calls as `resolverd check` does, and returns the
// decision lines by event id.
func checked(t testing.TB, mode resolve.Mode, calls [][]byte) map[string]schema.Class {
	t.Helper()
	store := registry.New()
	f, err := os.Open(corpus("sample", "listings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := check.LoadListings(f, store, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := check.Check(context.Background(), check.Config{Resolver: resolve.Resolver{Mode: mode}}, store.Snapshot(), bytes.NewReader(bytes.Join(calls, []byte("\n"))), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]schema.Class{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		want[member(l, "event_id")] = schema.Class(member(l, "class"))
	}
	return want
}

func admin(t testing.TB, c *kfake.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(clientOpts(c)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// live runs the pipeline over the cluster's calls, archiving them or not,
// until every call is decided under analysis id.
func live(t testing.TB, c *kfake.Cluster, ch *sink.ClickHouse, analysis string, archive bool) {
	t.Helper()
	want := 0
	adm := admin(t, c)
	ends, err := adm.ListEndOffsets(testContext(t, 10*time.Second), callsTopic)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
	cfg := stream.DefaultConfig()
	cfg.Brokers, cfg.AnalysisID, cfg.Group, cfg.ArchiveCalls = c.ListenAddrs(), analysis, analysis, archive
	cfg.ListingHold, cfg.ListingsPoll, cfg.BatchWait = 0, 20*time.Millisecond, 20*time.Millisecond
	p, err := stream.New(cfg, registry.New(), ch.Appender(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("pipeline: %v", err)
		}
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		_, n, err := ch.Counts(testContext(t, 10*time.Second), analysis)
		if err == nil && n == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pipeline decided %d of %d calls in a minute (%v)", n, want, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
