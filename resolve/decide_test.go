package resolve

import (
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/schema"
)

// TestDecide: the one decode-then-decide step. A call that decodes is
// resolved; one that does not is MALFORMED with the decoder's reason and
// keeps the event id and what was read before the failure; a nil Versions
// decodes only.
func TestDecide(t *testing.T) {
	store := fixture(t)
	for _, tc := range []struct {
		name, event string
		vs          Versions
		decoded     bool
		class       schema.Class
		reason      string // substring
		eventID     string
		tool        string // c.Tool after the call; not checked when ""
	}{
		{"resolved", `{"type":"call","event_id":"c-1","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments":{"q":"x"}}`,
			store.Snapshot(), true, schema.OK, "", "c-1", "search"},
		{"rejected", `{"type":"call","event_id":"c-2","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"wipe_disk","arguments":{}}`,
			store.Snapshot(), true, schema.H1, "no tool", "c-2", "wipe_disk"},
		{"not JSON", `{"type":"call",`, store.Snapshot(), false, schema.Malformed, "JSON", "", ""},
		{"no arguments", `{"type":"call","event_id":"c-3","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments_raw":"q=x"}`,
			store.Snapshot(), false, schema.Malformed, "arguments", "c-3", ""},
		// A producer that did not record the arguments (OpenTelemetry's
		// capture off): resolved by name, never allowed.
		{"arguments not recorded", `{"type":"call","event_id":"c-6","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments_recorded":false}`,
			store.Snapshot(), true, schema.H3, "not enforced: arguments not recorded", "c-6", "search"},
		{"arguments not recorded, unknown name", `{"type":"call","event_id":"c-7","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"serch","arguments_recorded":false}`,
			store.Snapshot(), true, schema.H1, "no tool", "c-7", "serch"},
		{"arguments not recorded, yet given", `{"type":"call","event_id":"c-8","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments_recorded":false,"arguments":{"q":"x"}}`,
			store.Snapshot(), false, schema.Malformed, "arguments_recorded is false but the event has arguments", "c-8", ""},
		{"arguments recorded, not a boolean", `{"type":"call","event_id":"c-9","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments_recorded":"no"}`,
			store.Snapshot(), false, schema.Malformed, "arguments_recorded is not a boolean", "c-9", ""},
		{"arguments recorded true, none given", `{"type":"call","event_id":"c-10","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments_recorded":true}`,
			store.Snapshot(), false, schema.Malformed, "arguments missing", "c-10", ""},
		{"passthrough", `{"type":"call","event_id":"c-4","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"wipe_disk","arguments":{}}`,
			nil, true, "", "", "c-4", "wipe_disk"},
		{"passthrough, malformed", `{"type":"call","event_id":"c-5","tool":"search","arguments":{}}`,
			nil, false, schema.Malformed, "emitted_at", "c-5", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				r   Resolver
				dec schema.CallDecoder
				c   schema.Call
				d   = schema.Decision{Class: schema.M5, Reason: "left from the previous call"}
			)
			ok := r.Decide(tc.vs, &dec, []byte(tc.event), &c, &d)
			if ok != tc.decoded || d.Class != tc.class || d.EventID != tc.eventID || tc.tool != "" && c.Tool != tc.tool {
				t.Fatalf("Decide = %v, decision %+v, call tool %q; want %v, class %q, event id %q, tool %q",
					ok, d, c.Tool, tc.decoded, tc.class, tc.eventID, tc.tool)
			}
			if tc.reason == "" && d.Reason != "" || !strings.Contains(d.Reason, tc.reason) {
				t.Errorf("reason %q, want %q", d.Reason, tc.reason)
			}
			if d.Verdict != schema.VerdictOf(d.Class) && d.Class != "" {
				t.Errorf("verdict %q for class %s", d.Verdict, d.Class)
			}
		})
	}
}
