package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
	"github.com/toolaudit/toolaudit/stream"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// TestAppendJSON: one member per column but args_raw, in the table's
// order, typed; no time is null.
func TestAppendJSON(t *testing.T) {
	r := schema.Row{CallKey: "c-1", Source: schema.SourceAPI, ArgsRaw: `{"password":"hunter2"}`, Partition: 3, Offset: 17}
	r.Drift = true
	r.EventID, r.Class, r.Verdict = "c-1", schema.H1, schema.Reject
	r.DecidedAt = time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	b := AppendJSON(nil, &r)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if len(m) != len(schema.Columns())-1 {
		t.Fatalf("%d members for %d columns", len(m), len(schema.Columns()))
	}
	if _, ok := m["args_raw"]; ok || bytes.Contains(b, []byte("hunter2")) {
		t.Fatalf("raw arguments in the record: %s", b)
	}
	if m["emitted_at"] != nil || m["decided_at"] != "2026-01-02T03:04:05.006Z" || m["partition"] != 3.0 || m["offset"] != 17.0 ||
		m["drift"] != true || m["source"] != "api" || m["class"] != "H1" {
		t.Fatalf("members: %v", m)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.Token()
	for i := 0; dec.More(); i++ {
		k, _ := dec.Token()
		var skip json.RawMessage
		dec.Decode(&skip)
		if want := columns[i].Name; k != want {
			t.Fatalf("member %d is %v, want %s", i, k, want)
		}
	}
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
}

// memSink is the store: rows by call key.
type memSink struct {
	mu   sync.Mutex
	rows map[string]schema.Row
}

func (s *memSink) Write(_ context.Context, rows []schema.Row) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		s.rows[r.CallKey] = r
	}
	return nil
}

// TestEveryRejection: the pipeline writes through Tee(store, Kafka); a
// consumer of the decisions topic sees every rejection the store holds,
// keyed by session, and every row once (no failure, so no repeat).
func TestEveryRejection(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "tool-calls", "tool-listings", "tool-calls-dlq", DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	ctx := context.Background()
	calls := readLines(t, "../../testdata/corpus/sample/calls.jsonl")
	for topic, lines := range map[string][][]byte{"tool-listings": readLines(t, "../../testdata/corpus/sample/listings.jsonl"), "tool-calls": calls} {
		var rs []*kgo.Record
		for _, l := range lines {
			rs = append(rs, &kgo.Record{Topic: topic, Value: l})
		}
		if err := prod.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	k, err := NewKafka(Config{Brokers: c.ListenAddrs(), Topic: DefaultTopic}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	store := &memSink{rows: map[string]schema.Row{}}
	cfg := stream.DefaultConfig()
	cfg.Brokers = c.ListenAddrs()
	cfg.ListingHold, cfg.BatchWait, cfg.ListingsPoll = 0, 20*time.Millisecond, 20*time.Millisecond
	cfg.AuditTopic = ""
	p, err := stream.New(cfg, registry.New(), appender.Tee(store, k), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(DefaultTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	var keys = map[string]string{}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(seen) < len(calls) && wctx.Err() == nil {
		cl.PollFetches(wctx).EachRecord(func(r *kgo.Record) {
			var m map[string]any
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("%v: %s", err, r.Value)
			}
			key := m["call_key"].(string)
			seen[key]++
			keys[key] = string(r.Key)
		})
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	defer store.mu.Unlock()
	rejections := 0
	for key, row := range store.rows {
		if seen[key] != 1 {
			t.Errorf("%s (%s): seen %d times on the decisions topic", key, row.Class, seen[key])
		}
		if row.Verdict == schema.Reject {
			rejections++
		}
		if keys[key] != schema.CallKey(row.SessionID, row.AgentID) {
			t.Errorf("%s: key %q, session %q", key, keys[key], row.SessionID)
		}
	}
	if len(store.rows) != len(calls) || rejections == 0 {
		t.Fatalf("%d rows stored (%d rejections) for %d calls", len(store.rows), rejections, len(calls))
	}
	t.Logf("%d decisions on the topic, %d of them rejections", len(seen), rejections)
}
