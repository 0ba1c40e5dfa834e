package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/ingest"
	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/otlp"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

const (
	spansTopic = "otlp_spans"
	logsTopic  = "otlp_logs"
)

// otlpFixture is one of package otlp's exports, as its JSON file and as
// the protobuf the Collector's Kafka exporter writes by default.
type otlpFixture struct {
	json, proto []byte
	sig         otlp.Signal
}

func readOTLP(t *testing.T, name string) otlpFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "otlp", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		t.Fatal(err)
	}
	f := otlpFixture{json: compact.Bytes(), sig: otlp.Traces}
	if bytes.Contains(b, []byte("resourceLogs")) {
		f.sig = otlp.Logs
		ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(b)
		if err != nil {
			t.Fatal(err)
		}
		f.proto, err = (&plog.ProtoMarshaler{}).MarshalLogs(ld)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.proto, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td); err != nil {
		t.Fatal(err)
	}
	return f
}

// fleetListing is the configured registry of the calls that carry no tool
// definitions (the OpenTelemetry openai instrumentation records none).
const fleetListing = `{"type":"listing","event_id":"l-fleet","observed_at":"2025-12-01T08:00:00Z","registry":"fleet-a","trust":1,"tools":[` +
	`{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},` +
	`{"name":"book","inputSchema":{"type":"object","properties":{"hotel":{"type":"string"}}}},` +
	`{"name":"lookup","inputSchema":{"type":"object"}}]}`

// offline decides the exports as a user would without the stream:
// `ingest --format otel` on the JSON files, then `resolverd check` on its
// events and the configured registry's listing. Decisions by event id.
func offline(t *testing.T, fixtures ...otlpFixture) map[string]schema.Decision {
	t.Helper()
	listings := [][]byte{[]byte(fleetListing)}
	var calls [][]byte
	conv := ingest.NewConverter("traces.json", ingest.FormatOTel, ingest.Meta{Registry: "fleet-a"})
	for i, f := range fixtures {
		if _, err := conv.Convert(i+1, f.json, func(ev ingest.Event) error {
			if ev.Kind == ingest.KindListing {
				listings = append(listings, ev.Value)
			} else {
				calls = append(calls, ev.Value)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	store := registry.New()
	if st, err := check.LoadListings(bytes.NewReader(bytes.Join(listings, []byte("\n"))), store, nil); err != nil || st.Bad != 0 {
		t.Fatalf("listings: %+v, %v", st, err)
	}
	var out bytes.Buffer
	if _, err := check.Check(context.Background(), check.Config{Workers: 1}, store.Snapshot(), bytes.NewReader(bytes.Join(calls, []byte("\n"))), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]schema.Decision{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var d struct {
			EventID         string `json:"event_id"`
			Class           string `json:"class"`
			Reason          string `json:"reason"`
			Path            string `json:"path"`
			ResolvedTool    string `json:"resolved_tool"`
			RegistryVersion string `json:"registry_version"`
		}
		if err := json.Unmarshal(l, &d); err != nil {
			t.Fatal(err)
		}
		want[d.EventID] = schema.Decision{EventID: d.EventID, Class: schema.Class(d.Class), Reason: d.Reason, Path: d.Path,
			ResolvedTool: d.ResolvedTool, RegistryVersion: d.RegistryVersion}
	}
	return want
}

// TestOTLPTopics: resolverd run reads the Collector's Kafka exporter
// topics. Each record (a whole batch) yields a row per tool call, decided
// as `ingest --format otel` and `resolverd check` decide the same export
// (class, reason, path, tool, registry version): against the definitions
// the trace recorded where it recorded them, else against the configured
// registry. A record delivered twice (the exporter retrying) makes no
// second row; a record that is not OTLP goes to the DLQ and the records
// behind it are decided; every offset is committed behind its rows.
func TestOTLPTopics(t *testing.T) {
	for _, enc := range []otlp.Encoding{otlp.Proto, otlp.JSON} {
		name := map[otlp.Encoding]string{otlp.Proto: "otlp_proto", otlp.JSON: "otlp_json"}[enc]
		t.Run(name, func(t *testing.T) { testOTLPTopics(t, enc) })
	}
}

func testOTLPTopics(t *testing.T, enc otlp.Encoding) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, callsTopic, listingsTopic, dlqTopic, spansTopic, logsTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	vercel, oi, chat := readOTLP(t, "vercel.traces.json"), readOTLP(t, "openinference.traces.json"), readOTLP(t, "openai-chat.logs.json")
	mcp := readOTLP(t, "mcp.traces.json") // an MCP server's tools/list and calls to it
	payload := func(f otlpFixture) []byte {
		if enc == otlp.JSON {
			return f.json
		}
		return f.proto
	}
	garbage := []byte("\x0a\xff\xff\xff\xff\x0fnot otlp at all")
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, [][]byte{[]byte(fleetListing)})
	manual, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(manual.Close)
	// First the MCP export: its tools/list reaches the listings topic,
	// and its calls are decided once the registry has it. The others
	// follow it, as they do in event time (offline reads them in that
	// order too): a call in another record resolves against an MCP
	// listing of a trace only when decided after the listing's record.
	produceRecords(t, manual, []*kgo.Record{{Topic: spansTopic, Partition: 1, Value: payload(mcp)}})

	want := offline(t, mcp, vercel, oi, chat)
	sink := &sourceSink{rows: map[[2]string]schema.Row{}}
	cfg := testConfig(c)
	cfg.OTLPSpansTopic, cfg.OTLPLogsTopic, cfg.OTLPEncoding, cfg.OTLPRegistry = spansTopic, logsTopic, enc, "fleet-a"
	reg := prometheus.NewRegistry()
	r := start(t, cfg, nil, sink, reg)
	eventually(t, 30*time.Second, "the MCP listing produced and its calls decided", func() bool {
		return testutil.ToFloat64(r.p.m.otlpListings) == 1 && len(sink.snapshot()) == 2
	})
	produceRecords(t, manual, []*kgo.Record{
		{Topic: spansTopic, Partition: 0, Value: payload(vercel)},
		{Topic: spansTopic, Partition: 0, Value: garbage},
		{Topic: spansTopic, Partition: 0, Value: payload(vercel)}, // the exporter's retry
		{Topic: spansTopic, Partition: 1, Value: payload(oi)},
		{Topic: logsTopic, Partition: 0, Value: payload(chat)},
	})
	adm := admin(t, c)
	eventually(t, 30*time.Second, "the OpenTelemetry topics committed to their ends", func() bool { return committedToEnds(adm, spansTopic, logsTopic) })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}

	rows := sink.snapshot()
	if len(rows) != len(want) {
		t.Errorf("%d rows, want %d (one per call)", len(rows), len(want))
	}
	classes := map[schema.Class]int{}
	for id, w := range want {
		row, ok := rows[[2]string{id, "stream"}]
		if !ok {
			t.Errorf("%s: no row", id)
			continue
		}
		got := schema.Decision{EventID: row.EventID, Class: row.Class, Reason: row.Reason, Path: row.Path,
			ResolvedTool: row.ResolvedTool, RegistryVersion: row.RegistryVersion}
		if got != w {
			t.Errorf("%s:\n got %+v\nwant %+v", id, got, w)
		}
		if row.Topic != spansTopic && row.Topic != logsTopic || row.PolicyVersion == "" || row.EmittedAt.IsZero() ||
			len(row.TraceID) != 32 || len(row.SpanID) != 16 {
			t.Errorf("%s: row %+v", id, row)
		}
		classes[row.Class]++
	}
	t.Logf("%d rows: %v", len(rows), classes)
	// The exports hold honest calls and each kind of bad one.
	for _, c := range []schema.Class{schema.OK, schema.H1, schema.H2, schema.H3, schema.Malformed} {
		if classes[c] == 0 {
			t.Errorf("no %s row: %v", c, classes)
		}
	}
	if n := testutil.ToFloat64(r.p.m.otlpRefused); n != 1 {
		t.Errorf("otlp_records_refused_total %v, want 1", n)
	}
	if n := testutil.ToFloat64(r.p.m.otlpRecords); n != 5 {
		t.Errorf("otlp_records_total %v, want 5", n)
	}
	dlq := kafkatest.Consume(t, c.ListenAddrs(), dlqTopic, 1, 10*time.Second)
	found := false
	for _, d := range dlq {
		if bytes.Equal(d.Value, garbage) && headerValue(d, "source-topic") == spansTopic && headerValue(d, "error") != "" {
			found = true
		}
	}
	if !found {
		t.Errorf("the record that is not OTLP is not in the DLQ (%d DLQ records)", len(dlq))
	}
}

// TestPair: across the records of a partition, a tool call is decided
// once: from its first model record; a later model record and any
// execution of it are dropped; an execution seen first does not stop the
// model's record (it may have lost what the model invented); calls
// without a trace or call id are never paired.
func TestPair(t *testing.T) {
	model := func(trace, id string) otlp.Call {
		return otlp.Call{TraceID: trace, CallID: id, From: []otlp.Source{otlp.FromOutputMessages}}
	}
	exec := func(trace, id string) otlp.Call {
		return otlp.Call{TraceID: trace, CallID: id, From: []otlp.Source{otlp.FromExecuteTool}}
	}
	for _, tc := range []struct {
		name    string
		records [][]otlp.Call
		kept    int
	}{
		{"chat, generateText, execute_tool", [][]otlp.Call{{model("t", "a")}, {model("t", "a")}, {exec("t", "a")}}, 1},
		{"execution first", [][]otlp.Call{{exec("t", "a")}, {model("t", "a")}, {exec("t", "a")}, {model("t", "a")}}, 2},
		{"other traces and ids", [][]otlp.Call{{model("t", "a"), model("t", "b")}, {model("u", "a"), exec("t", "c")}}, 4},
		{"no ids", [][]otlp.Call{{model("", "a"), model("t", "")}, {model("", "a"), model("t", "")}}, 4},
	} {
		var st otlpState
		kept := 0
		for _, r := range tc.records {
			out, _ := st.pair(r)
			kept += len(out)
		}
		if kept != tc.kept {
			t.Errorf("%s: %d decided, want %d", tc.name, kept, tc.kept)
		}
	}
	// The model's record after its execution takes the execution's
	// identity: its row replaces the execution's.
	var first otlpState
	e := exec("t", "x")
	e.SpanID = "0000000000000003"
	first.pair([]otlp.Call{e})
	m := model("t", "x")
	m.SpanID = "0000000000000002"
	if out, _ := first.pair([]otlp.Call{m}); len(out) != 1 || out[0].ID() != e.ID() || e.ID() == "" {
		t.Errorf("the model's record after its execution: %+v, want the identity %q", out, e.ID())
	}
	// The window is bounded: the oldest call is forgotten.
	var st otlpState
	st.pair([]otlp.Call{model("t", "first")})
	for i := range pairWindow {
		st.pair([]otlp.Call{model("t", fmt.Sprint(i))})
	}
	if out, _ := st.pair([]otlp.Call{model("t", "first")}); len(out) != 1 || len(st.models.m) > pairWindow {
		t.Errorf("the window keeps %d calls", len(st.models.m))
	}
}
