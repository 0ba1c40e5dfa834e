package schema

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolaudit/toolaudit/jsontape"
)

func TestDecodeCall(t *testing.T) {
	tests := []struct {
		name, line, reason string // reason "" means the call is usable
	}{
		{"minimal", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{}}`, ""},
		{"empty tool", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"","arguments":{}}`, "tool name missing or empty"},
		{"no tool", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","arguments":{}}`, "tool name missing or empty"},
		{"bad time", `{"event_id":"c","emitted_at":"yesterday","registry":"r","tool":"t","arguments":{}}`, "emitted_at is not an RFC 3339 UTC timestamp"},
		{"offset time", `{"event_id":"c","emitted_at":"2026-12-01T01:00:00+01:00","registry":"r","tool":"t","arguments":{}}`, "emitted_at is not an RFC 3339 UTC timestamp"},
		{"no time", `{"event_id":"c","registry":"r","tool":"t","arguments":{}}`, "emitted_at missing"},
		{"raw only", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments_raw":"{oops"}`, "arguments are not JSON (only arguments_raw)"},
		{"no arguments", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t"}`, "arguments missing"},
		{"string arguments", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":"{}"}`, "arguments is not an object"},
		{"repeated key", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{"q":{"a":1,"a~/b":1,"a~/b":2}}}`, "repeated member name at /arguments/q/a~0~1b"},
		{"repeated tool", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","tool":"wipe_disk","arguments":{}}`, "repeated member name at /tool"},
		{"repeated arguments", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{},"arguments":{"x":1}}`, "repeated member name at /arguments"},
		{"repeated escaped", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","\u0074ool":"u","arguments":{}}`, "repeated member name at /tool"},
		{"repeated event_id", `{"event_id":"c","event_id":"d","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{}}`, "repeated member name at /event_id"},
		{"repeated visible", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{},"visible":["t"],"visible":[]}`, "repeated member name at /visible"},
		{"not json", `{"event_id":"c",`, "not valid JSON: unexpected end of input at byte 16"},
		{"NaN", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{"a":NaN}}`, "not valid JSON: unexpected character \"N\" at byte 95"},
		{"invalid UTF-8 id", "{\"event_id\":\"c\xff\",\"emitted_at\":\"2026-12-01T00:00:00Z\",\"registry\":\"r\",\"tool\":\"t\",\"arguments\":{}}", "invalid UTF-8 at byte 14"},
		{"invalid UTF-8 args", "{\"event_id\":\"c\",\"emitted_at\":\"2026-12-01T00:00:00Z\",\"registry\":\"r\",\"tool\":\"t\",\"arguments\":{\"a\":\"\xfe\"}}", "invalid UTF-8 at byte 96"},
		{"deep", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{"a":` + strings.Repeat("[", 300) + strings.Repeat("]", 300) + `}}`, "nesting deeper than 128 levels at byte 221"},
		{"year 3000", `{"event_id":"c","emitted_at":"3000-01-01T00:00:00Z","registry":"r","tool":"t","arguments":{}}`, "emitted_at outside the supported range [1900-01-01T00:00:00Z, 2262-04-11T00:00:00Z)"},
		{"end of range", `{"event_id":"c","emitted_at":"2262-04-11T00:00:00Z","registry":"r","tool":"t","arguments":{}}`, "emitted_at outside the supported range [1900-01-01T00:00:00Z, 2262-04-11T00:00:00Z)"},
		{"last instant", `{"event_id":"c","emitted_at":"2262-04-10T23:59:59.999999999Z","registry":"r","tool":"t","arguments":{}}`, ""},
		{"year 1899", `{"event_id":"c","emitted_at":"1899-12-31T23:59:59.999Z","registry":"r","tool":"t","arguments":{}}`, "emitted_at outside the supported range [1900-01-01T00:00:00Z, 2262-04-11T00:00:00Z)"},
		{"year 1900", `{"event_id":"c","emitted_at":"1900-01-01T00:00:00Z","registry":"r","tool":"t","arguments":{}}`, ""},
		{"array", `[]`, "event is not a JSON object"},
		{"listing", `{"type":"listing","event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{}}`, `type is not "call"`},
		{"trace", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{},"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"0000000000000002"}`, ""},
		{"short trace", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{},"trace_id":"5b8efff798038103"}`, "trace_id is not 32 lowercase hex digits"},
		{"upper span", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{},"span_id":"000000000000000A"}`, "span_id is not 16 lowercase hex digits"},
		{"number trace", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments":{},"trace_id":7}`, "trace_id is not a string"},
		{"blank", "  \n", "empty line"},
	}
	var d CallDecoder
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Call
			err := d.Decode([]byte(tt.line), &c)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if c.Arguments.Kind() != jsontape.Object || c.EventID != "c" || c.Tool != "t" {
					t.Fatalf("decoded %+v", c)
				}
				return
			}
			me, ok := err.(*MalformedError)
			if !ok {
				t.Fatalf("err = %v, want *MalformedError", err)
			}
			if me.Reason != tt.reason {
				t.Fatalf("reason = %q, want %q", me.Reason, tt.reason)
			}
			if strings.Contains(tt.line, `"event_id":"c"`) && tt.name != "repeated event_id" && me.EventID != "c" && !strings.HasPrefix(me.Reason, "not valid JSON") &&
				!strings.HasPrefix(me.Reason, "invalid UTF-8") && !strings.HasPrefix(me.Reason, "nesting") {
				t.Fatalf("event id lost: %q", me.EventID)
			}
		})
	}
}

func TestDecodeCallFields(t *testing.T) {
	line := `{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:05.250Z","registry":"fleet-a","agent_id":"a-7","session_id":"s-19",
	 "model":"m","provider":"bedrock","surface":"raw_json","tool":"create_issue","server":"github","arguments":{"owner":"o"},
	 "seen_digest":"sha256:00","visible":["create_issue","search_code"],"trace_id":"5b8efff798038103d269b633813fc60c","span_id":"0000000000000002"}`
	var d CallDecoder
	var c Call
	if err := d.Decode([]byte(line), &c); err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 11, 29, 10, 0, 5, 250e6, time.UTC)
	if !c.EmittedAt.Equal(want) || c.Registry != "fleet-a" || c.AgentID != "a-7" || c.Key() != "s-19" ||
		c.Model != "m" || c.Provider != "bedrock" || c.Surface != "raw_json" || c.Server != "github" ||
		c.SeenDigest != "sha256:00" || !c.HasVisible || len(c.Visible) != 2 || c.Visible[1] != "search_code" ||
		!c.Arguments.Get("owner").StrIs("o") || c.TraceID != "5b8efff798038103d269b633813fc60c" || c.SpanID != "0000000000000002" {
		t.Fatalf("decoded %+v", c)
	}
}

func TestParseTime(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"2026-12-01T00:00:00Z", true},
		{"2026-12-01T00:00:00.123Z", true},
		{"2026-12-01T00:00:00.123456789Z", true},
		{"2026-12-01t00:00:00z", true},
		{"2026-12-01T00:00:00+00:00", true},
		{"2026-12-01T00:00:00-00:00", false},
		{"2026-12-01T00:00:00+01:00", false},
		{"2026-12-01T00:00:00", false},
		{"2026-12-01", false},
		{"2026-12-01 00:00:00Z", false},
		{"2026-02-30T00:00:00Z", false},
		{"", false},
	}
	for _, tt := range tests {
		_, err := ParseTime(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseTime(%q) err = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func compileSchemas(t testing.TB) (call, listing, decision *jsonschema.Schema) {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for _, s := range [][]byte{CallSchema, ListingSchema, DecisionSchema} {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(doc.(map[string]any)["$id"].(string), doc); err != nil {
			t.Fatal(err)
		}
	}
	must := func(id string) *jsonschema.Schema {
		s, err := c.Compile("https://toolaudit.dev/schema/v1/" + id)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return must("call.schema.json"), must("listing.schema.json"), must("decision.schema.json")
}

func schemaAccepts(s *jsonschema.Schema, line []byte) bool {
	if !json.Valid(line) {
		return false
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(line))
	return err == nil && s.Validate(v) == nil
}

func readLines(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, bytes.Clone(sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJSONSchemasAgreeWithDecoders: the published JSON Schemas and the Go
// decoders accept exactly the same events, on the corpus and on hand-made
// bad events, except for the rules the schemas' descriptions name.
func TestJSONSchemasAgreeWithDecoders(t *testing.T) {
	callS, listingS, _ := compileSchemas(t)
	corpus := filepath.Join("..", "testdata", "corpus")
	type file struct {
		path  string
		kind  string // call or listing
		valid int    // 1: all valid, 0: all invalid, -1: decoder-only rules (decoder rejects, schema accepts)
	}
	files := []file{
		{filepath.Join(corpus, "sample", "calls.jsonl"), "call", 2},
		{filepath.Join(corpus, "bfcl", "calls.jsonl"), "call", 1},
		{filepath.Join(corpus, "sample", "listings.jsonl"), "listing", 1},
		{filepath.Join(corpus, "bfcl", "listings.jsonl"), "listing", 1},
		{filepath.Join(corpus, "mcp", "listings.jsonl"), "listing", 1},
		{filepath.Join(corpus, "mcp", "history.jsonl"), "listing", 1},
		{"testdata/good_calls.jsonl", "call", 1},
		{"testdata/bad_calls.jsonl", "call", 0},
		{"testdata/good_listings.jsonl", "listing", 1},
		{"testdata/bad_listings.jsonl", "listing", 0},
		{"testdata/decoder_only_bad.jsonl", "", -1},
	}
	var dec CallDecoder
	for _, f := range files {
		lines := readLines(t, f.path)
		for i, line := range lines {
			kind := f.kind
			if kind == "" {
				kind = "call"
				if bytes.Contains(line, []byte(`"listing"`)) {
					kind = "listing"
				}
			}
			var decoded, valid bool
			if kind == "call" {
				var c Call
				decoded = dec.Decode(line, &c) == nil
				valid = schemaAccepts(callS, line)
			} else {
				_, err := DecodeListing(line)
				decoded = err == nil
				valid = schemaAccepts(listingS, line)
			}
			where := f.path + ":" + strconv.Itoa(i+1)
			switch f.valid {
			case -1:
				if decoded || !valid {
					t.Errorf("%s: decoder-only rule: decoded=%v schema=%v, want false/true", where, decoded, valid)
				}
				continue
			case 0, 1:
				if decoded != (f.valid == 1) {
					t.Errorf("%s: decoded=%v, want %v", where, decoded, f.valid == 1)
				}
			}
			if decoded != valid {
				t.Errorf("%s: decoder says %v, JSON Schema says %v", where, decoded, valid)
			}
		}
	}
}

func TestDecisionEncoding(t *testing.T) {
	_, _, decS := compileSchemas(t)
	ds := []Decision{
		{EventID: "c-1", Class: OK, Verdict: Allow, ResolvedServer: "s", ResolvedTool: "t", RegistryVersion: "rv-1",
			CurrentDigest: "sha256:" + strings.Repeat("ab", 32), SeenDigest: "x"},
		{EventID: "c-2\"\\\n\x01\u2028<>&", Class: H3, Verdict: Reject, Reason: "wrong type", Path: "/a~1b/0", Coercible: true, Drift: true},
		{EventID: "bad \xff utf8", Class: Malformed, Verdict: Reject, Reason: "not valid JSON"},
	}
	for _, d := range ds {
		b := d.AppendJSON(nil)
		if !json.Valid(b) {
			t.Fatalf("invalid JSON: %s", b)
		}
		if !schemaAccepts(decS, b) {
			t.Fatalf("decision schema rejects %s", b)
		}
		var back map[string]any
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if want := strings.ToValidUTF8(d.EventID, "\ufffd"); back["event_id"] != want {
			t.Fatalf("event_id round trip: %q, want %q", back["event_id"], want)
		}
		if back["class"] != string(d.Class) || back["verdict"] != string(d.Verdict) || back["drift"] != d.Drift {
			t.Fatalf("round trip: %s", b)
		}
	}
	bad := Decision{EventID: "c", Class: H1, Verdict: Allow}
	if schemaAccepts(decS, bad.AppendJSON(nil)) {
		t.Fatal("decision schema accepts an allowed H1")
	}
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quote\"back\\slash", "\x00\x1f\x7f", "tab\tnl\ncr\r", "é😀", "\u2028\u2029", "<&>"} {
		var got any
		if err := json.Unmarshal(AppendString(nil, s), &got); err != nil || got != s {
			t.Errorf("AppendString(%q) round trip = %q, %v", s, got, err)
		}
	}
}

// TestWindow: a window holds From and what follows, up to To excluded;
// the window time of a call without a usable emitted_at is its record's.
func TestWindow(t *testing.T) {
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := Window{Topic: "tool-calls", From: from, To: from.Add(time.Hour)}
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{from.Add(-time.Nanosecond), false},
		{from, true},
		{from.Add(30 * time.Minute), true},
		{w.To.Add(-time.Nanosecond), true},
		{w.To, false},
	} {
		if got := w.Contains(tc.at); got != tc.want {
			t.Errorf("Contains(%v) = %v, want %v", tc.at, got, tc.want)
		}
	}
	rec := from.Add(time.Minute)
	if got := WindowTime(time.Time{}, rec); !got.Equal(rec) {
		t.Errorf("WindowTime without emitted_at = %v, want the record's %v", got, rec)
	}
	if got := WindowTime(from, rec); !got.Equal(from) {
		t.Errorf("WindowTime = %v, want emitted_at %v", got, from)
	}
}

// TestDecodeListingRejectsWhole: a listing that can be read two ways, or
// whose time is out of range, is rejected whole, with a reason saying
// where (wire contract rules 9 and 10).
func TestDecodeListingRejectsWhole(t *testing.T) {
	const head = `{"type":"listing","event_id":"l","observed_at":"2026-12-01T00:00:00Z","registry":"r","server":"s",`
	tests := []struct{ name, line, reason string }{
		{"ok", head + `"tools":[{"name":"a","inputSchema":{"type":"object"}},{"name":"b","inputSchema":{}}]}`, ""},
		{"repeated top-level", head + `"registry":"r2","tools":[]}`, "repeated member name at /registry"},
		{"repeated tools", head + `"tools":[],"tools":[{"name":"x","inputSchema":{}}]}`, "repeated member name at /tools"},
		{"repeated tool member", head + `"tools":[{"name":"a","name":"b","inputSchema":{}}]}`, "repeated member name at /tools/0/name"},
		{"repeated in inputSchema", head + `"tools":[{"name":"a","inputSchema":{}},{"name":"b","inputSchema":{"type":"object","properties":{"x":{"type":"string","type":"integer"}}}}]}`,
			"repeated member name at /tools/1/inputSchema/properties/x/type"},
		{"tool named twice", head + `"tools":[{"name":"a","inputSchema":{}},{"name":"a","inputSchema":{}}]}`, `tools[1]: tool name "a" appears twice`},
		{"year 3000", `{"event_id":"l","observed_at":"3000-01-01T00:00:00Z","registry":"r","tools":[]}`, "observed_at outside the supported range [1900-01-01T00:00:00Z, 2262-04-11T00:00:00Z)"},
		{"invalid UTF-8", head + "\"tools\":[{\"name\":\"a\",\"description\":\"\xff\",\"inputSchema\":{}}]}", "invalid UTF-8 at byte 134"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := DecodeListing([]byte(tt.line))
			if tt.reason == "" {
				if err != nil || len(l.Tools) != 2 || string(l.Tools[0].InputSchema) != `{"type":"object"}` {
					t.Fatalf("DecodeListing = %+v, %v", l, err)
				}
				return
			}
			var me *MalformedError
			if !errors.As(err, &me) || me.Reason != tt.reason {
				t.Fatalf("err = %v, want reason %q", err, tt.reason)
			}
		})
	}
}

// TestDecodeMalformedKeepsFields: a MALFORMED call keeps every member
// that was readable, emitted_at above all, whichever member failed first
// (a call without a tool was stored at 1970-01-01: the decoder stopped
// before the time, so diff --from/--to left it out while reanalyze
// decided it); the reason stays the first failure.
func TestDecodeMalformedKeepsFields(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name, line, reason string
		id, tool, session  string
		at                 time.Time
	}{
		{"no tool", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","session_id":"s","arguments":{}}`,
			"tool name missing or empty", "c", "", "s", at},
		{"no tool, no id", `{"emitted_at":"2026-12-01T00:00:00Z","registry":"r","session_id":"s","arguments":{}}`,
			"event_id missing or not a non-empty string", "", "", "s", at},
		{"bad time", `{"event_id":"c","emitted_at":"yesterday","registry":"r","session_id":"s","tool":"t","arguments":{}}`,
			"emitted_at is not an RFC 3339 UTC timestamp", "c", "t", "s", time.Time{}},
		{"no arguments", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","session_id":"s","tool":"t"}`,
			"arguments missing", "c", "t", "s", at},
		{"bad session, no tool", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","session_id":5,"arguments":{}}`,
			"tool name missing or empty", "c", "", "", at},
		{"bad visible", `{"event_id":"c","emitted_at":"2026-12-01T00:00:00Z","registry":"r","session_id":"s","tool":"t","arguments":{},"visible":[1]}`,
			"visible is not an array of strings", "c", "t", "s", at},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var d CallDecoder
			var c Call
			err := d.Decode([]byte(tt.line), &c)
			var me *MalformedError
			if !errors.As(err, &me) || me.Reason != tt.reason || me.EventID != tt.id {
				t.Fatalf("err = %v, want reason %q, id %q", err, tt.reason, tt.id)
			}
			if c.EventID != tt.id || c.Tool != tt.tool || c.SessionID != tt.session || c.Registry != "r" || !c.EmittedAt.Equal(tt.at) {
				t.Errorf("kept %+v; want id %q, tool %q, session %q, registry r, emitted_at %v", c, tt.id, tt.tool, tt.session, tt.at)
			}
			if c.Arguments.Exists() || c.HasVisible {
				t.Errorf("a MALFORMED call has arguments or visible: %+v", c)
			}
		})
	}
}
