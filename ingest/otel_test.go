package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/offline"
	"github.com/toolaudit/toolaudit/registryversions"
)

// TestOTelResolved: the events ingest makes of the instrumentations'
// exports, resolved as `resolverd check` resolves them. A call the model
// made with tool definitions recorded resolves against those definitions,
// not the configured registry (which here has the misspelled name too); a
// call without them resolves against the configured registry; a call whose
// arguments were not recorded, or whose span could not be read, is never
// allowed.
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
	store := registryversions.New()
	if st, err := offline.LoadListings(bytes.NewReader(bytes.Join(listings, []byte("\n"))), store, nil); err != nil || st.Bad != 0 {
		t.Fatalf("listings: %+v, %v", st, err)
	}
	var out bytes.Buffer
	if _, err := offline.Check(context.Background(), offline.Config{Workers: 1}, store.Snapshot(), bytes.NewReader(bytes.Join(calls, []byte("\n"))), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // event id's provider part (or tool) → class
		"call_w1": "H2",        // "units" the SDK stripped before execute_tool
		"call_x1": "H1",        // not among the definitions the model had
		"call_c1": "OK",        // the configured registry
		"call_c2": "MALFORMED", // arguments not recorded
		"call_c3": "MALFORMED", // arguments not JSON
		"fc_1":    "H2",        // nights, rate, vip undeclared in the configured book
		"call_o1": "OK",
		"call_o2": "OK", // search: only in the definitions OpenInference recorded
	}
	got := map[string]string{}
	malformed := 0
	for _, l := range bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n")) {
		var d struct {
			EventID         string `json:"event_id"`
			Class           string `json:"class"`
			RegistryVersion string `json:"registry_version"`
		}
		if err := json.Unmarshal(l, &d); err != nil {
			t.Fatal(err)
		}
		id, _, ok := strings.Cut(d.EventID, "~")
		if !ok {
			if d.Class != "MALFORMED" {
				t.Errorf("%s: %s, want MALFORMED (MCP: arguments not recorded, or no name)", d.EventID, d.Class)
			}
			malformed++
			continue
		}
		got[id] = d.Class
	}
	for id, c := range want {
		if got[id] != c {
			t.Errorf("%s: %q, want %s", id, got[id], c)
		}
	}
	if malformed != 2 || len(got) != len(want) {
		t.Errorf("%d decisions with provider ids, %d without: %s", len(got), malformed, out.Bytes())
	}
}
