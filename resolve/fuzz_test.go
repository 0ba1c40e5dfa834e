package resolve

import (
	"encoding/json"
	"testing"

	"github.com/toolaudit/toolaudit/schema"
)

// FuzzResolve: any line, decoded or not, gets exactly one decision with a
// known class, a consistent verdict and valid JSON; resolution never
// panics.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{
		`{"event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"fleet","tool":"github__create_issue","arguments":{"owner":"o","repo":"r","title":"t"}}`,
		`{"event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"single","tool":"create_issue","arguments":{"owner":1,"labels":[null]},"visible":["x"]}`,
		`{"event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"fleet","tool":"list_tables","server":"sqlite","arguments":{},"seen_digest":"sha256:0"}`,
		`{"event_id":"c","emitted_at":"2026-12-01T00:02:01Z","registry":"fleet","tool":"mcp__github__search_code","arguments":{"q":"x"}}`,
		`{"event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"single","tool":"__init","arguments":{"force":"true"}}`,
		`{"event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"fleet","tool":"search_code","server":"github","arguments":{"query":"q"},"visible":["github_code","mcp__github__search_code"]}`,
		`not json`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	store := fixture(f)
	var dec schema.CallDecoder
	f.Fuzz(func(t *testing.T, line []byte, pinAssisted bool) {
		r := Resolver{}
		if pinAssisted {
			r.Mode = PinAssisted
		}
		var c schema.Call
		var d schema.Decision
		if err := dec.Decode(line, &c); err != nil {
			Malformed(err, &d)
		} else {
			r.Resolve(store.Snapshot(), &c, &d)
		}
		if d.Class.Index() < 0 || d.Verdict != schema.VerdictOf(d.Class) {
			t.Fatalf("decision %+v", d)
		}
		if d.Class != schema.OK && d.Reason == "" {
			t.Fatalf("rejection without a reason: %+v", d)
		}
		if !json.Valid(d.AppendJSON(nil)) {
			t.Fatalf("invalid decision JSON %s", d.AppendJSON(nil))
		}
	})
}
