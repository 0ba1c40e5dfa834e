package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/registry"
)

// TestOTelResolved: the events ingest makes of the instrumentations'
// exports, resolved as `resolverd check` resolves them. A call the model
// made with tool definitions recorded resolves against those definitions,
// not the configured registry (which here has the misspelled name too); a
// call without them resolves against the configured registry; a call whose
// arguments were not recorded is decided on its name (H3 "not enforced:"
// when it resolves), and one whose span could not be read is MALFORMED:
// neither is ever allowed.
func TestOTelResolved(t *testing.T) {
	r := ingestFile(t, "otel.shapes.jsonl", FormatUnknown, testDefaults, 0)
	fleet := `{"type":"listing","event_id":"l-fleet","observed_at":"2025-12-01T08:00:00Z","registry":"fleet-a","trust":1,"tools":[` +
		`{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},` +
		`{"name":"get_wether","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}},` +
		`{"name":"book","inputSchema":{"type":"object","properties":{"hotel":{"type":"string"}}}},` +
		`{"name":"lookup","inputSchema":{"type":"object"}}]}`
	listings := [][]byte{[]byte(fleet)}
	var calls [][]byte
	for _, ev := range r.events {
		if ev.Kind == KindListing {
			listings = append(listings, ev.Value)
		} else {
			calls = append(calls, ev.Value)
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
	want := map[string]string{ // event id's provider part (or tool) → class
		"call_w1": "H2",        // "units" the SDK stripped before execute_tool
		"call_x1": "H1",        // not among the definitions the model had
		"call_c1": "OK",        // the configured registry
		"call_c2": "H3",        // arguments not recorded: book resolves, not checked
		"call_c3": "MALFORMED", // arguments not JSON
		"fc_1":    "H2",        // nights, rate, vip undeclared in the configured book
		"call_o1": "OK",
		"call_o2": "OK", // search: only in the definitions OpenInference recorded
		// MCP: create_issue on its server, arguments not recorded; an
		// execute_tool span without a name.
		"c-92a7ba9f949a2f60547d": "H3",
		"c-a0e6e0ad4ca9dde732c3": "MALFORMED",
	}
	got := map[string]string{}
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var d struct {
			EventID string `json:"event_id"`
			Class   string `json:"class"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(l, &d); err != nil {
			t.Fatal(err)
		}
		id, _, ok := strings.Cut(d.EventID, "~")
		if !ok { // the MCP calls: no provider ids
			id = d.EventID
		}
		got[id] = d.Class
		if d.Class == "H3" && !strings.HasPrefix(d.Reason, "not enforced: arguments not recorded") {
			t.Errorf("%s: H3 %q", d.EventID, d.Reason)
		}
	}
	for id, c := range want {
		if got[id] != c {
			t.Errorf("%s: %q, want %s", id, got[id], c)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d decisions, want %d: %s", len(got), len(want), out.Bytes())
	}
}

// TestOTelCallIdentity: an OpenTelemetry call's event id is its identity
// in its trace (trace id, span id, provider id), whatever file and line it
// is read from, so that traces read twice (two files, a file and the
// Collector's topic, a batch delivered twice) are one decision each; a
// call whose item has no trace id is named by its place, as other formats'.
func TestOTelCallIdentity(t *testing.T) {
	line := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"0000000000000003","name":"execute_tool get_weather","startTimeUnixNano":"1764579600000000000","attributes":[` +
		`{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.name","value":{"stringValue":"get_weather"}},` +
		`{"key":"gen_ai.tool.call.id","value":{"stringValue":"call_1"}},{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"city\":\"Oslo\"}"}}]}]}]}]}`)
	noTrace := bytes.Replace(line, []byte(`"traceId":"5b8efff798038103d269b633813fc60c",`), nil, 1)
	ids := func(source string, n int, l []byte) string {
		t.Helper()
		var id string
		if _, err := NewConverter(source, FormatOTel, Meta{Registry: "fleet"}).Convert(n, l, func(ev Event) error {
			id = ev.ID
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	a, b := ids("a.json", 1, line), ids("b.json", 7, line)
	if a != b || !strings.HasPrefix(a, "call_1~") {
		t.Errorf("one call read from two files: %q and %q", a, b)
	}
	if x, y := ids("a.json", 1, noTrace), ids("b.json", 7, noTrace); x == y || x == a {
		t.Errorf("calls without a trace id: %q and %q (traced: %q)", x, y, a)
	}
}
