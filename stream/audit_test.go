package stream

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

const auditTopic = audit.DefaultTopic

// sourceSink records rows by (call key, source), as the store keeps them.
type sourceSink struct {
	mu   sync.Mutex
	rows map[[2]string]schema.Row
}

func (s *sourceSink) Write(_ context.Context, rows []schema.Row) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		s.rows[[2]string{r.CallKey, string(r.Source)}] = r
	}
	return nil
}

func (s *sourceSink) snapshot() map[[2]string]schema.Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[[2]string]schema.Row, len(s.rows))
	for k, v := range s.rows {
		m[k] = v
	}
	return m
}

// TestAuditTopic: audit records become rows as they are (source, action,
// decision, stamps; the call not decided again), beside the stream's own
// row of the same call; an undecodable record goes to the DLQ only; the
// group commits both topics to their ends; H1 stream rows name the
// nearest valid tool.
func TestAuditTopic(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, callsTopic, listingsTopic, dlqTopic, auditTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod := newProducer(t, c)
	listings := readLines(t, corpus("sample", "listings.jsonl"))
	calls := readLines(t, corpus("sample", "calls.jsonl"))
	produce(t, prod, listingsTopic, listings)
	produce(t, prod, callsTopic, calls)

	// The API's records of the first 20 calls, decided against the same
	// listings. Every other one is stamped with a class the resolver
	// would not give (OK for a rejection, H4 for an OK), so that a row
	// equal to the record proves the call was not decided again.
	store := registry.New()
	for _, l := range listings {
		lst, err := schema.DecodeListing(l)
		if err != nil {
			t.Fatal(err)
		}
		store.Apply(lst)
	}
	var res resolve.Resolver
	var dec schema.CallDecoder
	var call schema.Call
	var recs []audit.Record
	var krs []*kgo.Record
	at := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for i, l := range calls[:20] {
		r := audit.Record{Source: schema.SourceAPI, Action: schema.ActionEnforced, Call: l, ResolverBuild: "api-build", PolicyVersion: "pin-assisted", DecidedAt: at.Add(time.Duration(i) * time.Millisecond)}
		if i%2 == 1 {
			r.Source, r.Action = schema.SourceGateway, ""
		}
		res.Decide(store.Snapshot(), &dec, l, &call, &r.Decision)
		if i%4 == 0 {
			if r.Decision.Class == schema.OK {
				r.Decision.Set(schema.H4, "forged for the test")
			} else {
				r.Decision.Set(schema.OK, "")
			}
		}
		r.Key = call.Key()
		recs = append(recs, r)
		krs = append(krs, &kgo.Record{Topic: auditTopic, Key: []byte(r.Key), Value: r.AppendJSON(nil)})
	}
	bad := &kgo.Record{Topic: auditTopic, Value: []byte(`{"type":"audit","source":"stream","action":"","call":{},"decision":{}}`)}
	krs = append(krs, bad)
	produceRecords(t, prod, krs)

	sink := &sourceSink{rows: map[[2]string]schema.Row{}}
	cfg := testConfig(c)
	r := start(t, cfg, nil, sink, prometheus.NewRegistry())
	eventually(t, 30*time.Second, "every call and audit record stored", func() bool { return len(sink.snapshot()) >= len(calls)+len(recs) })
	adm := admin(t, c)
	eventually(t, 10*time.Second, "both topics committed to their ends", func() bool { return committedToEnds(adm, callsTopic, auditTopic) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	rows := sink.snapshot()
	if len(rows) != len(calls)+len(recs) {
		t.Fatalf("%d rows, want %d", len(rows), len(calls)+len(recs))
	}
	for _, rec := range recs {
		row, ok := rows[[2]string{rec.Decision.EventID, string(rec.Source)}]
		if !ok {
			t.Fatalf("no %s row for %s", rec.Source, rec.Decision.EventID)
		}
		if row.Decision != rec.Decision || row.Action != rec.Action || row.ResolverBuild != "api-build" ||
			row.PolicyVersion != "pin-assisted" || !row.DecidedAt.Equal(rec.DecidedAt) || row.AnalysisID != "live" || row.Topic != auditTopic {
			t.Fatalf("%s: row %+v\nrecord %+v", rec.Decision.EventID, row, rec)
		}
		if rec.Decision.Class != schema.Malformed && (row.SessionID == "" && row.AgentID == "" || row.ArgsHash == "" || row.EmittedAt.IsZero()) {
			t.Fatalf("%s: the call's context is missing: %+v", rec.Decision.EventID, row)
		}
		if _, ok := rows[[2]string{rec.Decision.EventID, "stream"}]; !ok && rec.Decision.EventID != "" {
			t.Fatalf("%s: no stream row beside the %s row", rec.Decision.EventID, rec.Source)
		}
	}
	h1 := 0
	for k, row := range rows {
		if k[1] == "stream" && row.Class == schema.H1 && row.SuggestedTool != "" {
			h1++
		}
		if k[1] == "stream" && row.Class != schema.H1 && row.Class != schema.M1 && row.SuggestedTool != "" {
			t.Fatalf("%s: suggested_tool %q for %s", k[0], row.SuggestedTool, row.Class)
		}
	}
	if h1 == 0 {
		t.Fatal("no H1 row names a suggested tool")
	}
	dlq := kafkatest.Consume(t, c.ListenAddrs(), dlqTopic, 0, 3*time.Second)
	found := false
	for _, d := range dlq {
		if string(d.Value) == string(bad.Value) && headerValue(d, "source-topic") == auditTopic && headerValue(d, "error") != "" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the bad audit record is not in the DLQ (%d DLQ records)", len(dlq))
	}
}
