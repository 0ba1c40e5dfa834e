package gateway

import (
	"slices"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/schema"
)

// TestCalls drives one gateway merging a stdio upstream (this binary as
// the fixture server) and a Streamable HTTP one, both trust 1, with the
// Go SDK's client: every call is answered by the upstream or rejected,
// a name as JSON-RPC -32602 naming what to call, arguments as a result
// with isError whose text says what is wrong, where and what would be
// right, both with the decision; every decision is audited once.
func TestCalls(t *testing.T) {
	web, webURL := httpFixture(t, "web")
	st := start(t, Config{Upstreams: []Upstream{fixtureUpstream(t, "fx", 1), {Name: "web", Trust: 1, URL: webURL}}}, Options{})
	c := connect(t, st.url, nil)
	tools := c.list(t)
	for _, name := range []string{"fx__echo", "fx__add", "fx__transfer", "web__echo", "web__add"} {
		tl := tools[name]
		if tl == nil {
			t.Fatalf("tools/list lacks %s: %v", name, tools)
		}
		if d, _ := tl.Meta[MetaDigest].(string); !strings.HasPrefix(d, "sha256:") {
			t.Errorf("%s: _meta digest %v", name, tl.Meta)
		}
	}
	if len(tools) != 12 {
		t.Errorf("tools/list: %d tools, want 12 (6 per upstream)", len(tools))
	}

	for _, tc := range []struct {
		name, tool, args string
		want             string // the upstream's text, for a forwarded call
		class, path      string // the rejection, else ""
		hint             string // a name the hints must give
		text             string // the rejection's message or text must say it
	}{
		{name: "honest stdio", tool: "fx__echo", args: `{"message":"hi"}`, want: "echo: hi"},
		{name: "honest http", tool: "web__add", args: `{"a":2,"b":3}`, want: "5"},
		{name: "no arguments", tool: "fx__change_schema", args: "", want: "transfer changed"},
		{name: "no arguments back", tool: "fx__change_schema", args: "", want: "transfer changed"},
		{name: "fabricated qualified", tool: "fx__wipe_disk", args: `{}`, class: "M1"},
		{name: "fabricated bare", tool: "wipe_disk", args: `{}`, class: "M1"},
		{name: "misspelt", tool: "fx__ecoh", args: `{"message":"hi"}`, class: "M1", hint: "fx__echo", text: "Nearest tool names: fx__echo"},
		{name: "misspelt bare", tool: "trasnfer", args: `{"to":"a","amount":1}`, class: "M1", hint: "fx__transfer", text: "fx__transfer"},
		{name: "undeclared argument", tool: "fx__echo", args: `{"message":"hi","override":true}`, class: "H2", path: "/override", text: `Argument "override" at /override is not declared by fx__echo`},
		{name: "misspelt argument", tool: "fx__echo", args: `{"mesage":"hi"}`, class: "H2", path: "/mesage", hint: "message", text: `send "message" instead of "mesage"`},
		{name: "misnamed argument", tool: "web__echo", args: `{"msg":"hi"}`, class: "H2", hint: "message", text: `missing: "message"`},
		{name: "missing argument", tool: "fx__add", args: `{"a":1}`, class: "H2", path: "/b", hint: "b", text: `Required argument "b" is missing at /b`},
		{name: "arguments of another tool", tool: "web__echo", args: `{"to":"bob","amount":5}`, class: "H5", hint: "__transfer", text: "__transfer: call "},
		{name: "wrong type", tool: "fx__add", args: `{"a":"2","b":3}`, class: "H3", path: "/a", hint: `"integer"`, text: `The value at /a is wrong`},
		// add accepts {} too, but a missing key is no borrowed shape (v1.2).
		{name: "missing key only", tool: "web__echo", args: `{}`, class: "H2", hint: "message"},
		{name: "repeated key", tool: "fx__echo", args: `{"message":"a","message":"b"}`, class: "MALFORMED"},
		{name: "arguments not an object", tool: "fx__echo", args: `["hi"]`, class: "MALFORMED"},
		{name: "same name on two servers", tool: "echo", args: `{"message":"hi"}`, class: "M2", hint: "web__echo", text: "Call one of: fx__echo, web__echo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(st.rec.recs())
			got, je := c.call(t, tc.tool, tc.args)
			recs := st.rec.recs()
			if len(recs) != before+1 {
				t.Fatalf("%d audit records for one call", len(recs)-before)
			}
			rec := recs[len(recs)-1]
			if rec.Source != schema.SourceGateway || rec.Action != schema.ActionEnforced {
				t.Errorf("record source %q action %q", rec.Source, rec.Action)
			}
			if tc.class == "" {
				if je != nil {
					t.Fatalf("error %d %s", je.Code, je.Message)
				}
				if got != tc.want {
					t.Errorf("result %q, want %q", got, tc.want)
				}
				if rec.Decision.Class != schema.OK {
					t.Errorf("audited class %s", rec.Decision.Class)
				}
				return
			}
			if je == nil {
				t.Fatalf("forwarded (%q), want a %s rejection", got, tc.class)
			}
			if arg := toolError(schema.Class(tc.class)); arg != je.IsError || (!arg && je.Code != -32602) {
				t.Errorf("isError %v code %d, want a result with isError for arguments, -32602 for a name", je.IsError, je.Code)
			}
			t.Logf("%s: %s", tc.class, je.Message)
			if !strings.Contains(je.Message, tc.text) {
				t.Errorf("text %q lacks %q", je.Message, tc.text)
			}
			a := decodeAnswer(t, je)
			if a.Class != tc.class || (tc.path != "" && a.Path != tc.path) {
				t.Errorf("class %s path %q, want %s %q (%s)", a.Class, a.Path, tc.class, tc.path, je.Message)
			}
			if !strings.Contains(je.Message, tc.class) || a.Reason == "" {
				t.Errorf("message %q, reason %q", je.Message, a.Reason)
			}
			if a.Source != "gateway" || a.Action != "enforced" || a.EventID != rec.Decision.EventID {
				t.Errorf("answer %+v, record %s", a, rec.Decision.EventID)
			}
			if a.SuggestedTool != rec.SuggestedTool || (tc.class == "M1" && tc.hint != "" && a.SuggestedTool != tc.hint) {
				t.Errorf("suggested_tool answered %q, recorded %q: want a name clients call", a.SuggestedTool, rec.SuggestedTool)
			}
			if string(rec.Decision.Class) != tc.class {
				t.Errorf("audited class %s", rec.Decision.Class)
			}
			h := a.Hints
			if all := strings.Join(slices.Concat(h.Tools, h.Keys, h.Missing), " ") + string(h.Expected); tc.hint != "" && !strings.Contains(all, tc.hint) {
				t.Errorf("hints %s lack %s", all, tc.hint)
			}
		})
	}
	if n := web.Calls(); n != 1 {
		t.Errorf("the HTTP upstream received %d calls, want 1 (the rejected ones never reach it)", n)
	}
}

// TestCallEvent checks the call event the gateway builds: the session,
// the surface, the pin, the digest the session was shown.
func TestCallEvent(t *testing.T) {
	st := start(t, Config{Registry: "fleet", Upstreams: []Upstream{fixtureUpstream(t, "fx", 1)}}, Options{})
	c := connect(t, st.url, nil)
	tools := c.list(t)
	if _, je := c.call(t, "fx__echo", `{"message":"hi"}`); je != nil {
		t.Fatal(je)
	}
	recs := st.rec.recs()
	var dec schema.CallDecoder
	var call schema.Call
	if err := dec.Decode(recs[0].Call, &call); err != nil {
		t.Fatalf("call event %s: %v", recs[0].Call, err)
	}
	want := tools["fx__echo"].Meta[MetaDigest]
	if call.Registry != "fleet" || call.Surface != Surface || call.SessionID != c.cs.ID() || call.SessionID == "" ||
		call.Server != "fx" || call.Tool != "echo" || call.SeenDigest != want || call.EmittedAt.IsZero() {
		t.Errorf("call event %s (seen digest want %v)", recs[0].Call, want)
	}
	if recs[0].Key != call.SessionID {
		t.Errorf("record key %q", recs[0].Key)
	}
	d := recs[0].Decision
	if d.RegistryVersion == "" || d.CurrentDigest != want || d.ResolvedServer != "fx" || d.ResolvedTool != "echo" {
		t.Errorf("decision %+v", d)
	}
}

// TestHintsQualifiedName: a hint names a tool as clients call it, with
// the gateway's separator, also for a server whose name holds "__" (the
// hints' own qualification): a bare misspelt name near a tool two servers
// share. The error's message names them too.
func TestHintsQualifiedName(t *testing.T) {
	_, urlA := httpFixture(t, "git__hub")
	_, urlB := httpFixture(t, "web")
	st := start(t, Config{Separator: ".", Upstreams: []Upstream{{Name: "git__hub", Trust: 1, URL: urlA}, {Name: "web", Trust: 1, URL: urlB}}}, Options{})
	c := connect(t, st.url, nil)
	c.list(t)
	_, je := c.call(t, "ecoh", `{"message":"hi"}`)
	if je == nil {
		t.Fatal("a misspelt tool was forwarded")
	}
	if a := decodeAnswer(t, je); a.Class != "M1" || !slices.Contains(a.Hints.Tools, "git__hub.echo") || !slices.Contains(a.Hints.Tools, "web.echo") {
		t.Fatalf("class %s, hints %v; want M1 with git__hub.echo and web.echo", a.Class, a.Hints.Tools)
	}
	if !strings.Contains(je.Message, "git__hub.echo") || je.Code != -32602 {
		t.Errorf("message %q (code %d) does not name git__hub.echo", je.Message, je.Code)
	}
}
