package schema

import (
	"encoding/json"
	"testing"
	"time"
)

func strPtr(s string) *string { return &s }

// TestAppendCall: the bytes of encoded calls, that the JSON Schema accepts
// them as the decoder does, and that decoding gives the call back.
func TestAppendCall(t *testing.T) {
	callS, _, _ := compileSchemas(t)
	at := time.Date(2026, 11, 29, 10, 0, 5, 250_999_999, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		name    string
		call    Call
		args    CallArgs
		want    string
		decodes bool
	}{
		{"full", Call{EventID: "c-1", EmittedAt: at, Registry: "fleet-a", AgentID: "a-7", SessionID: "s-19",
			Model: "m", Provider: "bedrock", Surface: "raw_json", Tool: "create_issue", Server: "github",
			SeenDigest: "sha256:ab", Visible: []string{"create_issue", "search"}},
			CallArgs{JSON: []byte(`{"owner":"o","n":[1,2.5]}`)},
			`{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T09:00:05.250Z","registry":"fleet-a","agent_id":"a-7","session_id":"s-19","model":"m","provider":"bedrock","surface":"raw_json","tool":"create_issue","server":"github","arguments":{"owner":"o","n":[1,2.5]},"seen_digest":"sha256:ab","visible":["create_issue","search"]}`,
			true},
		{"context unknown", Call{EventID: "c-2", EmittedAt: at, Tool: "t"}, CallArgs{JSON: []byte(`{}`)},
			`{"type":"call","event_id":"c-2","emitted_at":"2026-11-29T09:00:05.250Z","registry":"","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"t","server":"","arguments":{}}`,
			true},
		{"empty frontier", Call{EventID: "c-3", EmittedAt: at, Tool: "t", HasVisible: true}, CallArgs{JSON: []byte(`{}`)},
			`{"type":"call","event_id":"c-3","emitted_at":"2026-11-29T09:00:05.250Z","registry":"","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"t","server":"","arguments":{},"visible":[]}`,
			true},
		{"escapes", Call{EventID: "c-\"4\"", EmittedAt: at, Tool: "a<b>&\n\u2028", Registry: "\x01"}, CallArgs{JSON: []byte(`{"k":"<&>"}`)},
			`{"type":"call","event_id":"c-\"4\"","emitted_at":"2026-11-29T09:00:05.250Z","registry":"\u0001","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"a<b>&\n\u2028","server":"","arguments":{"k":"<&>"}}`,
			true},
		{"raw text", Call{EventID: "c-5", EmittedAt: at, Tool: "t"}, CallArgs{Raw: strPtr(`{"q": oops`)},
			`{"type":"call","event_id":"c-5","emitted_at":"2026-11-29T09:00:05.250Z","registry":"","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"t","server":"","arguments_raw":"{\"q\": oops"}`,
			false},
		{"no arguments", Call{EventID: "c-6", EmittedAt: at, Tool: "t"}, CallArgs{},
			`{"type":"call","event_id":"c-6","emitted_at":"2026-11-29T09:00:05.250Z","registry":"","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"t","server":""}`,
			false},
		{"arguments not recorded", Call{EventID: "c-7", EmittedAt: at, Tool: "t", ArgsUnrecorded: true}, CallArgs{Unrecorded: true},
			`{"type":"call","event_id":"c-7","emitted_at":"2026-11-29T09:00:05.250Z","registry":"","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"t","server":"","arguments_recorded":false}`,
			true},
		{"recorded wins over unrecorded", Call{EventID: "c-8", EmittedAt: at, Tool: "t"}, CallArgs{JSON: []byte(`{}`), Unrecorded: true},
			`{"type":"call","event_id":"c-8","emitted_at":"2026-11-29T09:00:05.250Z","registry":"","agent_id":"","session_id":"","model":"","provider":"","surface":"","tool":"t","server":"","arguments":{}}`,
			true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := AppendCall([]byte("prefix"), &tc.call, tc.args)[len("prefix"):]
			if string(line) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", line, tc.want)
			}
			var dec CallDecoder
			var c Call
			err := dec.Decode(line, &c)
			if (err == nil) != tc.decodes {
				t.Fatalf("decode: %v, want decoded %v", err, tc.decodes)
			}
			if got := schemaAccepts(callS, line); got != tc.decodes {
				t.Errorf("JSON Schema accepts %v, decoder %v", got, tc.decodes)
			}
			if err != nil {
				return
			}
			want := tc.call
			want.EmittedAt = want.EmittedAt.UTC().Truncate(time.Millisecond)
			if want.Visible == nil && want.HasVisible {
				want.Visible = []string{}
			}
			want.HasVisible = want.HasVisible || len(want.Visible) > 0
			if c.EventID != want.EventID || !c.EmittedAt.Equal(want.EmittedAt) || c.Registry != want.Registry ||
				c.AgentID != want.AgentID || c.SessionID != want.SessionID || c.Model != want.Model ||
				c.Provider != want.Provider || c.Surface != want.Surface || c.Tool != want.Tool ||
				c.Server != want.Server || c.SeenDigest != want.SeenDigest || c.HasVisible != want.HasVisible ||
				c.ArgsUnrecorded != want.ArgsUnrecorded ||
				len(c.Visible) != len(want.Visible) {
				t.Errorf("decoded\n%+v\nwant\n%+v", c, want)
			}
			var m struct{ Arguments json.RawMessage }
			if err := json.Unmarshal(line, &m); err != nil || string(m.Arguments) != string(tc.args.JSON) {
				t.Errorf("arguments %s, want %s (%v)", m.Arguments, tc.args.JSON, err)
			}
		})
	}
}

// TestAppendListing: the bytes of encoded listings, accepted by the JSON
// Schema and decoded back, the tools as given.
func TestAppendListing(t *testing.T) {
	_, listingS, _ := compileSchemas(t)
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	tools := [][]byte{
		[]byte(`{"name":"create_issue","title":"Create","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}},"annotations":{"readOnlyHint":false}}`),
		[]byte(`{"name":"search","inputSchema":{"type":"object"}}`),
	}
	for _, tc := range []struct {
		name  string
		l     Listing
		tools [][]byte
		want  string
	}{
		{"snapshot", Listing{EventID: "l-1", ObservedAt: at, Registry: "fleet-a", Server: "github", Trust: 2, Op: OpSnapshot}, tools,
			`{"type":"listing","event_id":"l-1","observed_at":"2026-11-29T10:00:00.000Z","registry":"fleet-a","server":"github","trust":2,"op":"snapshot","tools":[` +
				string(tools[0]) + "," + string(tools[1]) + `]}`},
		{"no tools", Listing{EventID: "l-2", ObservedAt: at, Registry: "r", Op: OpSnapshot}, nil,
			`{"type":"listing","event_id":"l-2","observed_at":"2026-11-29T10:00:00.000Z","registry":"r","server":"","trust":0,"op":"snapshot","tools":[]}`},
		{"remove", Listing{EventID: "l-3", ObservedAt: at, Registry: "r", Server: "s", Trust: -1, Op: OpRemove}, nil,
			`{"type":"listing","event_id":"l-3","observed_at":"2026-11-29T10:00:00.000Z","registry":"r","server":"s","trust":-1,"op":"remove","tools":[]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := AppendListing(nil, &tc.l, tc.tools)
			if string(line) != tc.want {
				t.Fatalf("got\n%s\nwant\n%s", line, tc.want)
			}
			if !schemaAccepts(listingS, line) {
				t.Error("JSON Schema rejects it")
			}
			l, err := DecodeListing(line)
			if err != nil {
				t.Fatal(err)
			}
			if l.EventID != tc.l.EventID || !l.ObservedAt.Equal(tc.l.ObservedAt) || l.Registry != tc.l.Registry ||
				l.Server != tc.l.Server || l.Trust != tc.l.Trust || l.Op != tc.l.Op || len(l.Tools) != len(tc.tools) {
				t.Errorf("decoded %+v", l)
			}
			if l.Key() != tc.l.Registry+"/"+tc.l.Server {
				t.Errorf("key %q", l.Key())
			}
		})
	}
}

// TestKeys: the contract's record keys.
func TestKeys(t *testing.T) {
	for _, tc := range []struct{ session, agent, want string }{
		{"s", "a", "s"}, {"", "a", "a"}, {"", "", ""},
	} {
		c := Call{SessionID: tc.session, AgentID: tc.agent}
		if got := CallKey(tc.session, tc.agent); got != tc.want || c.Key() != tc.want {
			t.Errorf("CallKey(%q, %q) = %q, Call.Key %q; want %q", tc.session, tc.agent, got, c.Key(), tc.want)
		}
	}
	if got := ListingKey("fleet-a", ""); got != "fleet-a/" {
		t.Errorf("ListingKey = %q", got)
	}
}
