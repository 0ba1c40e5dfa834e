package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/schema"
)

// TestReferenceServers: MCP software nobody here wrote on both sides.
// The official TypeScript SDK's client talks to the gateway, which
// merges the reference servers server-everything, server-filesystem and
// server-memory (stdio, spawned by the gateway) and the Go fixture (whose
// transfer tool changes under the client). Honest calls get the servers'
// real results; fabricated and misspelt tools get -32602 naming the
// nearest tools, undeclared arguments and wrong types a result with
// isError whose text names the path and the fix (which a scripted agent
// applies: its retry passes) and the decision in _meta; a name two servers provide is
// M2; the rug pull is M4 by every spelling of the tool's name; every call is audited once and every server's
// listing produced. A Go SDK client of the 2026-07-28 revision, without
// a session, gets the same answers, and M4 for the definition changed
// within list_ttl.
func TestReferenceServers(t *testing.T) {
	npm := gatewaytest.FindNPM(t)
	dir := t.TempDir()
	files := filepath.Join(dir, "files")
	if err := os.Mkdir(files, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ = filepath.EvalSymlinks(files)
	t.Setenv("TOOLAUDIT_KAFKA_SASL_PASSWORD", "not-for-upstreams")
	st := start(t, Config{Upstreams: []Upstream{
		{Name: "everything", Trust: 1, Command: npm.Everything()},
		{Name: "fs", Trust: 2, Command: npm.Filesystem(files)},
		{Name: "memory", Trust: 1, Command: npm.Memory(), Env: map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}},
		fixtureUpstream(t, "fx", 1),
	}}, Options{Getenv: os.Getenv})

	note := filepath.Join(files, "note.txt")
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	steps := []struct {
		step  gatewaytest.Step
		text  string // a forwarded call's text contains it, or a rejection's message or text
		class string // or the rejection's class
		path  string
		tries int // an agent step's corrections
	}{
		{step: gatewaytest.Step{Op: "list"}},
		{step: gatewaytest.Call("everything__echo", `{"message":"hello"}`), text: "hello"},
		{step: gatewaytest.Call("everything__get-sum", `{"a":2,"b":3}`), text: "5"},
		{step: gatewaytest.Call("fs__write_file", `{"path":`+q(note)+`,"content":"kept by the filesystem server"}`), text: "Successfully wrote"},
		{step: gatewaytest.Call("fs__read_text_file", `{"path":`+q(note)+`}`), text: "kept by the filesystem server"},
		{step: gatewaytest.Call("memory__create_entities", `{"entities":[{"name":"gateway","entityType":"service","observations":["decides calls"]}]}`), text: "gateway"},
		{step: gatewaytest.Call("memory__read_graph", `{}`), text: "decides calls"},
		{step: gatewaytest.Call("everything__get-env", `{}`), text: "PATH"},
		{step: gatewaytest.Call("everything__wipe_disk", `{}`), class: "M1"},
		{step: gatewaytest.Call("everything__echoo", `{"message":"hello"}`), class: "M1", text: "everything__echo"},
		{step: gatewaytest.Agent("everything__echo", `{"mesage":"hello again"}`), text: "hello again", tries: 1},
		{step: gatewaytest.Call("fs__delete_file", `{"path":`+q(note)+`}`), class: "M1"},
		{step: gatewaytest.Call("everything__echo", `{"message":"hello","override":true}`), class: "H2", path: "/override", text: `"override" at /override is not declared`},
		{step: gatewaytest.Call("fs__write_file", `{"path":`+q(note)+`,"content":"x","mode":"0777"}`), class: "H2", path: "/mode", text: "/mode"},
		// create_directory accepts {"path"}, but a forgotten key is no
		// borrowed shape (contract v1.2): H2, not H5.
		{step: gatewaytest.Call("fs__write_file", `{"path":`+q(note)+`}`), class: "H2", path: "/content"},
		{step: gatewaytest.Call("everything__get-sum", `{"a":"2","b":3}`), class: "H3", path: "/a", text: "The value at /a is wrong"},
		{step: gatewaytest.Call("memory__create_entities", `{"entities":[{"name":"x","entityType":"y","observations":"not a list"}]}`), class: "H3", path: "/entities/0/observations"},
		{step: gatewaytest.Call("echo", `{"message":"hello"}`), class: "M2"},
		{step: gatewaytest.Call("fx__change_schema", `{}`), text: "transfer changed"},
		{step: gatewaytest.Step{Op: "wait_changed", TimeoutMS: 10000}},
		{step: gatewaytest.Call("fx__transfer", `{"to":"bob","amount":5}`), class: "M4", text: "List the tools again"},
		// The rug pull by other spellings of the same tool, with
		// arguments the new definition accepts.
		{step: gatewaytest.Call("fx/transfer", `{"to":"bob","amount":5,"cc":"eve"}`), class: "M4"},
		{step: gatewaytest.Call("mcp__fx__transfer", `{"to":"bob","amount":5,"cc":"eve"}`), class: "M4"},
		{step: gatewaytest.Call("transfer", `{"to":"bob","amount":5,"cc":"eve"}`), class: "M4"},
		{step: gatewaytest.Step{Op: "list"}},
		{step: gatewaytest.Call("fx__transfer", `{"to":"bob","amount":5,"cc":"eve"}`), text: "sent 5 to bob"},
	}
	var ss []gatewaytest.Step
	for _, s := range steps {
		ss = append(ss, s.step)
	}
	outs := npm.RunClient(t, st.url, "", ss...)
	calls := 0
	for i, s := range steps {
		o := outs[i]
		what := s.step.Op + " " + s.step.Name
		switch {
		case s.step.Op == "list":
			names := map[string]string{}
			for _, tl := range o.Tools {
				names[tl.Name] = tl.Digest
			}
			for _, n := range []string{"everything__echo", "fs__read_text_file", "memory__read_graph", "fx__transfer"} {
				if !strings.HasPrefix(names[n], "sha256:") {
					t.Errorf("%s: %s missing or without a digest", what, n)
				}
			}
		case s.step.Op == "wait_changed":
			if !o.Changed {
				t.Errorf("%s: no notifications/tools/list_changed reached the TypeScript client", what)
			}
		case s.class == "":
			calls += 1 + s.tries
			if !o.OK || o.IsError || !strings.Contains(o.Text(), s.text) || len(o.Tries) != s.tries {
				t.Errorf("%s: ok %v isError %v text %q after %d corrections, want %q after %d (%s)", what, o.OK, o.IsError, o.Text(), len(o.Tries), s.text, s.tries, o.Message)
			}
		default:
			calls++
			var a answer
			if toolError(schema.Class(s.class)) {
				// A result with isError: the text for the model, the
				// decision in _meta.
				json.Unmarshal(o.Meta[MetaDecision], &a)
				if !o.OK || !o.IsError || !strings.Contains(o.Text(), s.text) || (s.path != "" && !strings.Contains(o.Text(), s.path)) {
					t.Errorf("%s: ok %v isError %v text %q, want a result with isError saying %q (%s)", what, o.OK, o.IsError, o.Text(), s.text, o.Message)
				}
			} else {
				json.Unmarshal(o.Data, &a)
				if o.OK || o.Code != -32602 || !strings.Contains(o.Message, s.text) {
					t.Errorf("%s: ok %v code %d message %q, want -32602 saying %q", what, o.OK, o.Code, o.Message, s.text)
				}
			}
			if a.Class != s.class || (s.path != "" && a.Path != s.path) || a.Reason == "" {
				t.Errorf("%s: class %s path %q, want %s %q", what, a.Class, a.Path, s.class, s.path)
			}
		}
	}
	// The Go SDK v1.8.0 client of the 2026-07-28 revision (no session)
	// gets the same answers from the same servers.
	g := connectRevision(t, st.url, nil, stateless)
	if g.cs.ID() != "" || g.cs.InitializeResult().ProtocolVersion != stateless {
		t.Fatalf("Go SDK client: session %q, protocol %s", g.cs.ID(), g.cs.InitializeResult().ProtocolVersion)
	}
	g.list(t)
	for _, c := range []struct{ name, args, class, text string }{
		{"everything__echo", `{"message":"stateless"}`, "", "stateless"},
		{"everything__echoo", `{"message":"x"}`, "M1", "everything__echo"},
		{"fs__write_file", `{"path":` + q(note) + `,"content":"x","mode":"0777"}`, "H2", "/mode"},
		{"everything__get-sum", `{"a":"2","b":3}`, "H3", "/a"},
		// transfer changed within list_ttl of this call, and an
		// anonymous client without a session may still hold the old
		// definition: M4 whether or not it relisted, until list_ttl
		// has passed since the change.
		{"fx__transfer", `{"to":"bob","amount":5,"cc":"eve"}`, "M4", "list the tools again (tools/list) and retry after"},
	} {
		calls++
		got, rej := g.call(t, c.name, c.args)
		switch {
		case c.class == "" && (rej != nil || !strings.Contains(got, c.text)):
			t.Errorf("2026-07-28 %s: %q %+v", c.name, got, rej)
		case c.class != "" && rej == nil:
			t.Errorf("2026-07-28 %s: forwarded %q", c.name, got)
		case c.class != "" && (decodeAnswer(t, rej).Class != c.class || rej.IsError != toolError(schema.Class(c.class)) || !strings.Contains(rej.Message, c.text)):
			t.Errorf("2026-07-28 %s: %+v, want %s saying %q", c.name, rej, c.class, c.text)
		}
	}
	if env := outs[7].Text(); strings.Contains(env, "not-for-upstreams") {
		t.Errorf("an upstream saw the gateway's secret variable: %s", env)
	}
	if recs := st.rec.recs(); len(recs) != calls {
		t.Errorf("%d audit records for %d calls", len(recs), calls)
	}
	servers := map[string]int{}
	for _, l := range st.rec.lists() {
		if l.Op == schema.OpSnapshot && l.Registry == DefaultRegistry {
			servers[l.Server]++
		}
	}
	if servers["everything"] < 1 || servers["fs"] != 1 || servers["memory"] != 1 || servers["fx"] != 2 {
		t.Errorf("listings produced per server: %v", servers)
	}
}
