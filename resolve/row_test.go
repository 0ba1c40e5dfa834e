package resolve

import (
	"reflect"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// TestDecideRow: the row of a call record. A decoded call keeps its
// context, the arguments' shape and hash (raw only when asked) and its
// event id as key; an undecodable one keeps what was read, no argument
// summary, and its event id, or the record's position when it has none.
func TestDecideRow(t *testing.T) {
	store := fixture(t)
	const good = `{"type":"call","event_id":"c-1","emitted_at":"2026-12-01T00:00:10Z","registry":"single","agent_id":"a-1","session_id":"s-1","tool":"search","arguments":{"q":"x"}}`
	for _, tc := range []struct {
		name, event string
		raw         bool
		decoded     bool
		class       schema.Class
		key         string
		emitted     bool // EmittedAt read (else the record's time)
		argsRaw     string
	}{
		{"decoded", good, false, true, schema.OK, "c-1", true, ""},
		{"decoded, raw arguments kept", good, true, true, schema.OK, "c-1", true, `{"q":"x"}`},
		{"malformed with an event id", `{"type":"call","event_id":"c-2","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments":[1]}`,
			true, false, schema.Malformed, "c-2", true, ""},
		{"malformed without one", `{"type":"call",`, true, false, schema.Malformed, "kafka:tool-calls/3/42", false, ""},
		{"unusable time", `{"type":"call","event_id":"c-3","emitted_at":"yesterday","registry":"single","tool":"search","arguments":{"q":"x"}}`,
			false, false, schema.Malformed, "c-3", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := RowDecider{KeepRawArgs: tc.raw}
			row := schema.Row{Topic: "tool-calls", Partition: 3, Offset: 42}
			before := time.Now()
			recorded := time.Date(2026, 12, 1, 5, 0, 0, 0, time.UTC)
			ok := d.DecideRow(store.Snapshot(), []byte(tc.event), recorded, &row)
			if ok != tc.decoded || row.Class != tc.class || row.CallKey != tc.key {
				t.Fatalf("DecideRow = %v, class %s, key %q; want %v, %s, %q", ok, row.Class, row.CallKey, tc.decoded, tc.class, tc.key)
			}
			if row.EmittedAt.Equal(recorded) == tc.emitted {
				t.Errorf("emitted_at %v, want read: %v (else the record's time)", row.EmittedAt, tc.emitted)
			}
			if row.DecidedAt.Before(before) {
				t.Errorf("decided_at %v, before the call", row.DecidedAt)
			}
			if row.ArgsRaw != tc.argsRaw {
				t.Errorf("args_raw %q, want %q", row.ArgsRaw, tc.argsRaw)
			}
			if tc.decoded {
				if row.ArgsShape != `{"q":"string"}` || len(row.ArgsHash) != len("sha256:")+64 {
					t.Errorf("arguments' summary %q %q", row.ArgsShape, row.ArgsHash)
				}
				if row.AgentID != "a-1" || row.SessionID != "s-1" || row.Tool != "search" || row.Registry != "single" {
					t.Errorf("context %+v", row)
				}
			} else if row.ArgsShape != "" || row.ArgsHash != "" {
				t.Errorf("an undecodable call has an arguments' summary %q %q", row.ArgsShape, row.ArgsHash)
			}
		})
	}
}

// TestDecideRowArgsUnrecorded: a call whose arguments were not recorded is
// decided (H3, not enforced) and its row has no arguments' summary: no
// shape, and no hash that would join every such call as equal arguments.
func TestDecideRowArgsUnrecorded(t *testing.T) {
	d := RowDecider{KeepRawArgs: true}
	var row schema.Row
	ev := `{"type":"call","event_id":"c-u","emitted_at":"2026-12-01T00:00:10Z","registry":"single","agent_id":"a-1","tool":"search","arguments_recorded":false}`
	if !d.DecideRow(fixture(t).Snapshot(), []byte(ev), time.Now(), &row) {
		t.Fatalf("not decoded: %+v", row.Decision)
	}
	if row.Class != schema.H3 || row.Reason != ArgsNotRecorded || row.ResolvedTool != "search" {
		t.Errorf("decision %+v", row.Decision)
	}
	if row.ArgsShape != "" || row.ArgsHash != "" || row.ArgsRaw != "" {
		t.Errorf("arguments' summary %q %q %q", row.ArgsShape, row.ArgsHash, row.ArgsRaw)
	}
}

// suggestions records what it was asked and names a fixed tool.
type suggestions struct{ asked []schema.Class }

func (s *suggestions) Tool(_ Versions, _ *schema.Call, d *schema.Decision) string {
	s.asked = append(s.asked, d.Class)
	return "search"
}

// TestDecideRowKeyAndSuggestion: with a key, args_hash is the keyed one
// the live pipeline stores; the suggester is asked for H1 and M1 rows
// only; DescribeCall fills a decided call's context and summary without
// deciding it.
func TestDecideRowKeyAndSuggestion(t *testing.T) {
	store := fixture(t)
	key, err := schema.NewArgsKey([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	var s suggestions
	d := RowDecider{ArgsKey: key, Suggest: &s}
	const (
		ok = `{"type":"call","event_id":"c-1","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"search","arguments":{"q":"x"}}`
		h1 = `{"type":"call","event_id":"c-2","emitted_at":"2026-12-01T00:00:10Z","registry":"single","tool":"serch","arguments":{"q":"x"}}`
	)
	var row schema.Row
	if !d.DecideRow(store.Snapshot(), []byte(ok), time.Time{}, &row) || row.Class != schema.OK || row.SuggestedTool != "" {
		t.Fatalf("ok: class %s, suggested %q", row.Class, row.SuggestedTool)
	}
	want := schema.NewArgsSummarizer(key)
	var c schema.Call
	var dec schema.CallDecoder
	if err := dec.Decode([]byte(ok), &c); err != nil {
		t.Fatal(err)
	}
	if h := want.Hash(c.Arguments); row.ArgsHash != h || row.ArgsHash == schema.ArgsHash(c.Arguments) {
		t.Errorf("args_hash %q, want the keyed %q", row.ArgsHash, h)
	}
	row = schema.Row{}
	if !d.DecideRow(store.Snapshot(), []byte(h1), time.Time{}, &row) || row.Class != schema.H1 || row.SuggestedTool != "search" {
		t.Fatalf("h1: class %s, suggested %q", row.Class, row.SuggestedTool)
	}
	if len(s.asked) != 1 || s.asked[0] != schema.H1 {
		t.Errorf("suggester asked for %v, want [H1]", s.asked)
	}
	row = schema.Row{Decision: schema.Decision{EventID: "c-2", Class: schema.H2}} // as an audit record fills it
	if !d.DescribeCall([]byte(h1), time.Time{}, &row) || row.Class != schema.H2 || row.Tool != "serch" || row.CallKey != "c-2" || row.ArgsHash == "" {
		t.Errorf("DescribeCall: %+v", row)
	}
	row = schema.Row{Topic: "t", Partition: 1, Offset: 2}
	if d.DescribeCall([]byte(`{"type":"call",`), time.Time{}, &row) || row.CallKey != "kafka:t/1/2" || row.ArgsHash != "" {
		t.Errorf("DescribeCall of a bad call: %+v", row)
	}
}

// TestDecideRowListingChanges: a RowDecider kept across listings applied
// between its calls (the pipeline's workers decide while listings
// arrive) decides each call as a fresh one does on the store's snapshot
// then: whatever a decider keeps from one call to the next (its
// decoder's and summarizer's buffers, or a cache of the last registry
// version, tried for issue 25) must not survive a late listing, a
// remove, a later listing or a registry first listed midway.
func TestDecideRowListingChanges(t *testing.T) {
	store := registry.New()
	str := `{"type":"object","properties":{"x":{"type":"string"}},"required":["x"]}`
	num := `{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`
	call := func(reg string, sec int) string {
		return `{"type":"call","event_id":"c","emitted_at":"` + at(sec).Format(time.RFC3339Nano) + `","registry":"` + reg + `","tool":"f","arguments":{"x":"y"}}`
	}
	var kept RowDecider
	for _, step := range []struct {
		name    string
		listing *schema.Listing // applied before the calls
		reg     string
		sec     int
		want    schema.Class
	}{
		{"first listing", snap("a1", 0, "late", "", 0, tl("f", str)), "late", 30, schema.OK},
		{"again, remembered", nil, "late", 30, schema.OK},
		{"a late listing changes the version current at the call", snap("a2", 20, "late", "", 0, tl("f", num)), "late", 30, schema.H3},
		{"a later listing leaves it", snap("a3", 40, "late", "", 0, tl("f", str)), "late", 30, schema.H3},
		{"after the later listing", nil, "late", 45, schema.OK},
		{"a remove in between", &schema.Listing{EventID: "a4", ObservedAt: at(25), Registry: "late", Op: schema.OpRemove}, "late", 30, schema.M1},
		{"a registry first listed now", snap("b1", 0, "later", "", 0, tl("f", num)), "later", 30, schema.H3},
		{"back to the first", nil, "late", 45, schema.OK},
		{"before any listing", nil, "late", -5, schema.H1},
	} {
		if step.listing != nil {
			if issues := store.Apply(step.listing); len(issues) != 0 {
				t.Fatalf("%s: %v", step.name, issues)
			}
		}
		ev := []byte(call(step.reg, step.sec))
		var got, want schema.Row
		kept.DecideRow(store.Snapshot(), ev, at(step.sec), &got)
		var fresh RowDecider
		fresh.DecideRow(store.Snapshot(), ev, at(step.sec), &want)
		if got.Class != step.want {
			t.Errorf("%s: class %s (%s), want %s", step.name, got.Class, got.Reason, step.want)
		}
		if !reflect.DeepEqual(got.Decision, want.Decision) {
			t.Errorf("%s: decision\n%+v\nwant (a fresh decider)\n%+v", step.name, got.Decision, want.Decision)
		}
	}
}
