package resolve

import (
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func snap(id string, sec int, reg, server string, trust int, tools ...schema.Tool) *schema.Listing {
	return &schema.Listing{EventID: id, ObservedAt: at(sec), Registry: reg, Server: server, Trust: trust, Op: schema.OpSnapshot, Tools: tools}
}

func tl(name, inputSchema string) schema.Tool {
	return schema.Tool{Name: name, InputSchema: []byte(inputSchema)}
}

const (
	issueSchema  = `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"},"n":{"type":"integer","minimum":1},"labels":{"type":"array","items":{"type":"string"}},"meta":{"type":"object"}},"required":["owner","repo","title"]}`
	searchSchema = `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`
	emptySchema  = `{"type":"object","properties":{}}`
)

// fixture: a single registry and a merged MCP namespace with the shapes of
// the real manifests (github vs github-ref, sqlite vs database-server).
func fixture(t testing.TB) *registry.Store {
	t.Helper()
	s := registry.New()
	issues := s.Apply(
		snap("s1", 0, "single", "", 0,
			tl("create_issue", issueSchema),
			tl("search", searchSchema),
			tl("__init", `{"type":"object","properties":{"force":{"type":"boolean"}}}`),
			tl("set_color", `{"type":"object","properties":{"color":{"enum":["red","green"]},"level":{"type":["integer","null"]}},"required":["color"]}`)),
		snap("g1", 0, "fleet", "github", 2,
			tl("create_issue", issueSchema),
			tl("search_code", `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)),
		snap("r1", 0, "fleet", "github-ref", 1,
			tl("create_issue", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"},"body":{"type":"string"}},"required":["owner","repo","title","body"]}`),
			tl("search_code", `{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)),
		snap("q1", 0, "fleet", "sqlite", 1,
			tl("list_tables", `{"type":"object","properties":{},"title":"sqlite"}`),
			tl("describe_table", `{"type":"object","properties":{"table_name":{"type":"string"}},"required":["table_name"]}`)),
		snap("d1", 0, "fleet", "database-server", 1,
			tl("list_tables", emptySchema),
			tl("describe_table", `{"type":"object","properties":{"table_name":{"type":"string"}},"required":["table_name"]}`),
			tl("query_database", `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)),
		snap("h1", 0, "fleet", "hub", 0,
			tl("query_database", `{"type":"object","properties":{"query":{"type":"string"},"note":{"type":"string"}},"required":["query","note"]}`)),
		// Later: github's create_issue changes (drift), gitlab's removal.
		snap("g2", 100, "fleet", "github", 2,
			tl("create_issue", `{"type":"object","properties":{"owner":{"type":"string"},"repo":{"type":"string"},"title":{"type":"string"},"assignee":{"type":"string"}},"required":["owner","repo","title"]}`),
			tl("search_code", `{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)),
		&schema.Listing{EventID: "d2", ObservedAt: at(50), Registry: "fleet", Server: "database-server", Op: schema.OpRemove},
		// A description-only change keeps the digest.
		&schema.Listing{EventID: "s2", ObservedAt: at(10), Registry: "single", Op: schema.OpSnapshot, Tools: []schema.Tool{
			{Name: "create_issue", InputSchema: []byte(issueSchema), Description: "now with more words"},
			tl("search", searchSchema), tl("__init", `{"type":"object","properties":{"force":{"type":"boolean"}}}`),
			tl("set_color", `{"type":"object","properties":{"color":{"enum":["red","green"]},"level":{"type":["integer","null"]}},"required":["color"]}`)}},
	)
	if len(issues) != 0 {
		t.Fatalf("fixture issues: %v", issues)
	}
	return s
}

type call struct {
	reg, tool, server, args, seen string
	sec                           int
	visible                       []string
}

func (c call) build(t testing.TB) *schema.Call {
	sc := &schema.Call{EventID: "c", Registry: c.reg, Tool: c.tool, Server: c.server, SeenDigest: c.seen,
		EmittedAt: at(c.sec), Visible: c.visible, HasVisible: c.visible != nil}
	if c.args == "" {
		c.args = `{}`
	}
	tp := new(jsontape.Tape)
	if err := tp.Parse([]byte(c.args)); err != nil {
		t.Fatal(err)
	}
	sc.Arguments = tp.Root()
	return sc
}

func digestOf(t testing.TB, s *registry.Store, reg, server, tool string, sec int) string {
	return s.At(reg, at(sec)).Server(server).Tool(tool).Digest
}

func TestResolve(t *testing.T) {
	s := fixture(t)
	issue := `{"owner":"o","repo":"r","title":"t"}`
	oldIssueDigest := digestOf(t, s, "fleet", "github", "create_issue", 1)
	sqliteList := digestOf(t, s, "fleet", "sqlite", "list_tables", 1)
	tests := []struct {
		name   string
		mode   Mode
		c      call
		class  schema.Class
		server string // resolved server, "-" for none
		path   string
		reason string // substring
		coerce bool
		drift  bool
	}{
		// Single registry: name.
		{"ok", Strict, call{reg: "single", tool: "create_issue", args: issue, sec: 1}, schema.OK, "", "", "", false, false},
		{"fabricated", Strict, call{reg: "single", tool: "wipe_disk", sec: 1}, schema.H1, "-", "", "no tool named", false, false},
		{"near miss case", Strict, call{reg: "single", tool: "Create_issue", args: issue, sec: 1}, schema.H1, "-", "", "", false, false},
		{"functions prefix", Strict, call{reg: "single", tool: "functions.create_issue", args: issue, sec: 1}, schema.H1, "-", "", "", false, false},
		{"name beginning with __", Strict, call{reg: "single", tool: "__init", args: `{"force":true}`, sec: 1}, schema.OK, "", "", "", false, false},
		{"__ prefix is not a server", Strict, call{reg: "single", tool: "__create_issue", args: issue, sec: 1}, schema.H1, "-", "", "", false, false},
		{"flattened in single registry", Strict, call{reg: "single", tool: "x__create_issue", args: issue, sec: 1}, schema.H1, "-", "", "", false, false},
		{"unknown registry", Strict, call{reg: "nope", tool: "create_issue", args: issue, sec: 1}, schema.H1, "-", "", "no listing", false, false},
		{"before first listing", Strict, call{reg: "single", tool: "create_issue", args: issue, sec: -1}, schema.H1, "-", "", "no listing", false, false},
		{"pin in single registry", Strict, call{reg: "single", tool: "create_issue", server: "github", args: issue, sec: 1}, schema.M1, "-", "", "not connected", false, false},
		// Single registry: arguments.
		{"undeclared", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","override":true}`, sec: 1}, schema.H2, "", "/override", "undeclared", false, false},
		{"missing required", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r"}`, sec: 1}, schema.H2, "", "/title", "required", false, false},
		{"free-form nested object", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","meta":{"any":{"thing":[1]}}}`, sec: 1}, schema.OK, "", "", "", false, false},
		{"2.0 is an integer", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","n":2.0}`, sec: 1}, schema.OK, "", "", "", false, false},
		{"fraction for integer", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","n":2.5}`, sec: 1}, schema.H3, "", "/n", "wrong type", false, false},
		{"string for integer", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","n":"5"}`, sec: 1}, schema.H3, "", "/n", "wrong type", true, false},
		{"range", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","n":0}`, sec: 1}, schema.H3, "", "/n", "minimum", false, false},
		{"null", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":null}`, sec: 1}, schema.H3, "", "/title", "", false, false},
		{"nullable", Strict, call{reg: "single", tool: "set_color", args: `{"color":"red","level":null}`, sec: 1}, schema.OK, "", "", "", false, false},
		{"enum", Strict, call{reg: "single", tool: "set_color", args: `{"color":"blue"}`, sec: 1}, schema.H3, "", "/color", "enum", false, false},
		{"nested type", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":"o","repo":"r","title":"t","labels":["a",1]}`, sec: 1}, schema.H3, "", "/labels/1", "", true, false},
		{"key beats value", Strict, call{reg: "single", tool: "create_issue", args: `{"owner":1,"repo":"r","title":"t","x":1}`, sec: 1}, schema.H2, "", "/x", "", false, false},
		{"sibling's arguments", Strict, call{reg: "single", tool: "create_issue", args: `{"q":"bug"}`, sec: 1}, schema.H5, "", "/q", `"search"`, false, false},
		{"visible", Strict, call{reg: "single", tool: "search", args: `{"q":"x"}`, sec: 1, visible: []string{"search"}}, schema.OK, "", "", "", false, false},
		{"not visible", Strict, call{reg: "single", tool: "search", args: `{"q":"x"}`, sec: 1, visible: []string{"create_issue"}}, schema.H4, "", "", "visible", false, false},
		{"empty frontier", Strict, call{reg: "single", tool: "search", args: `{"q":"x"}`, sec: 1, visible: []string{}}, schema.H4, "", "", "", false, false},
		{"arguments before H4", Strict, call{reg: "single", tool: "search", args: `{"q":1}`, sec: 1, visible: []string{"create_issue"}}, schema.H3, "", "/q", "", true, false},
		{"description-only change keeps digest", Strict, call{reg: "single", tool: "create_issue", args: issue, sec: 20,
			seen: digestOf(t, s, "single", "", "create_issue", 1)}, schema.OK, "", "", "", false, false},
		// Merged MCP namespace: names.
		{"unique provider", Strict, call{reg: "fleet", tool: "search_code", server: "github", args: `{"query":"x"}`, sec: 1}, schema.OK, "github", "", "", false, false},
		{"unknown in fleet", Strict, call{reg: "fleet", tool: "wipe_disk", sec: 1}, schema.M1, "-", "", "no connected server", false, false},
		{"pin to absent server", Strict, call{reg: "fleet", tool: "list_tables", server: "shell", sec: 1}, schema.M1, "-", "", "not connected", false, false},
		{"pin lacks tool", Strict, call{reg: "fleet", tool: "query_database", server: "sqlite", args: `{"query":"x"}`, sec: 1}, schema.M1, "-", "", "has no tool", false, false},
		{"removed server", Strict, call{reg: "fleet", tool: "list_tables", server: "database-server", sec: 60}, schema.M1, "-", "", "not connected", false, false},
		{"after remove unique again", Strict, call{reg: "fleet", tool: "list_tables", sec: 60}, schema.OK, "sqlite", "", "", false, false},
		{"same-trust collision", Strict, call{reg: "fleet", tool: "list_tables", sec: 1}, schema.M2, "-", "", "no pin", false, false},
		{"same-trust collision pin-assisted", PinAssisted, call{reg: "fleet", tool: "list_tables", sec: 1}, schema.OK, "database-server", "", "", false, true},
		{"pin-assisted follows seen_digest", PinAssisted, call{reg: "fleet", tool: "list_tables", sec: 1, seen: sqliteList}, schema.OK, "sqlite", "", "", false, false},
		{"shadowed", Strict, call{reg: "fleet", tool: "create_issue", args: issue, sec: 1}, schema.M3, "-", "", "shadows", false, false},
		{"shadowed pin-assisted", PinAssisted, call{reg: "fleet", tool: "create_issue", args: issue, sec: 1}, schema.M3, "-", "", "shadows", false, false},
		{"shadowed by trust 0", Strict, call{reg: "fleet", tool: "query_database", args: `{"query":"x"}`, sec: 1}, schema.M3, "-", "", "", false, false},
		{"pinned beats shadow", Strict, call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 1}, schema.OK, "github", "", "", false, true},
		{"flattened __", Strict, call{reg: "fleet", tool: "github__create_issue", args: issue, sec: 1}, schema.OK, "github", "", "", false, true},
		{"flattened /", Strict, call{reg: "fleet", tool: "github/create_issue", args: issue, sec: 1}, schema.OK, "github", "", "", false, true},
		{"flattened mcp__", Strict, call{reg: "fleet", tool: "mcp__github-ref__search_code", args: `{"q":"x"}`, sec: 1}, schema.OK, "github-ref", "", "", false, false},
		{"flattened prefix lacks tool", Strict, call{reg: "fleet", tool: "sqlite__query_database", args: `{"query":"x"}`, sec: 1}, schema.M1, "-", "", "has no tool", false, false},
		{"flattened prefix not a server", Strict, call{reg: "fleet", tool: "shell__list_tables", sec: 1}, schema.M1, "-", "", "no connected server", false, false},
		{"visible flattened", Strict, call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 1, visible: []string{"github__create_issue"}}, schema.OK, "github", "", "", false, true},
		{"visible mcp__ form", Strict, call{reg: "fleet", tool: "search_code", server: "github", args: `{"query":"x"}`, sec: 1, visible: []string{"mcp__github__search_code"}}, schema.OK, "github", "", "", false, false},
		{"visible overlapping prefix and suffix", Strict, call{reg: "fleet", tool: "search_code", server: "github", args: `{"query":"x"}`, sec: 1, visible: []string{"github_code", "githubsearch_code", "github__search_cod"}}, schema.H4, "github", "", "", false, false},
		// Digests and arguments across servers.
		{"stale digest", Strict, call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 101, seen: oldIssueDigest}, schema.M4, "github", "", "seen_digest", false, false},
		{"current digest", Strict, call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 1, seen: oldIssueDigest}, schema.OK, "github", "", "", false, true},
		{"digest of another server", Strict, call{reg: "fleet", tool: "list_tables", server: "sqlite", sec: 1, seen: digestOf(t, s, "fleet", "github", "search_code", 1)}, schema.M4, "sqlite", "", "", false, false},
		{"M4 before arguments", Strict, call{reg: "fleet", tool: "create_issue", server: "github", args: `{"x":1}`, sec: 101, seen: oldIssueDigest}, schema.M4, "github", "", "", false, false},
		{"name before M4", Strict, call{reg: "fleet", tool: "create_issue", args: issue, sec: 1, seen: "sha256:00"}, schema.M3, "-", "", "", false, false},
		{"arguments for another server", Strict, call{reg: "fleet", tool: "search_code", server: "github-ref", args: `{"query":"x"}`, sec: 1}, schema.M5, "github-ref", "/query", `server "github"`, false, false},
		{"M5 before H5", Strict, call{reg: "fleet", tool: "query_database", server: "hub", args: `{"query":"x"}`, sec: 1}, schema.M5, "hub", "/note", "", false, false},
		{"H5 across servers", Strict, call{reg: "fleet", tool: "describe_table", server: "sqlite", args: `{"query":"x"}`, sec: 1}, schema.H5, "sqlite", "/query", "", false, false},
		{"drift recorded on a rejection", Strict, call{reg: "fleet", tool: "create_issue", server: "github", args: `{"owner":"o"}`, sec: 1}, schema.H2, "github", "/repo", "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Resolver{Mode: tt.mode}
			var d schema.Decision
			r.Resolve(s.Snapshot(), tt.c.build(t), &d)
			if d.Class != tt.class {
				t.Fatalf("class %s (%s), want %s", d.Class, d.Reason, tt.class)
			}
			if d.Verdict != schema.VerdictOf(tt.class) {
				t.Fatalf("verdict %s for %s", d.Verdict, d.Class)
			}
			wantServer := tt.server
			if tt.server == "-" {
				wantServer = ""
				if d.ResolvedTool != "" {
					t.Fatalf("resolved tool %q, want none", d.ResolvedTool)
				}
			} else if d.ResolvedTool == "" || d.CurrentDigest == "" || d.RegistryVersion == "" {
				t.Fatalf("unresolved: %+v", d)
			}
			if d.ResolvedServer != wantServer {
				t.Fatalf("resolved server %q, want %q", d.ResolvedServer, wantServer)
			}
			if d.Path != tt.path || d.Coercible != tt.coerce || d.Drift != tt.drift {
				t.Fatalf("path %q coercible %v drift %v, want %q %v %v", d.Path, d.Coercible, d.Drift, tt.path, tt.coerce, tt.drift)
			}
			if !strings.Contains(d.Reason, tt.reason) || (tt.class != schema.OK && d.Reason == "") {
				t.Fatalf("reason %q, want it to contain %q", d.Reason, tt.reason)
			}
		})
	}
}

func TestMalformed(t *testing.T) {
	var d schema.Decision
	var dec schema.CallDecoder
	var c schema.Call
	err := dec.Decode([]byte(`{"event_id":"c-9","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"t","arguments_raw":"{"}`), &c)
	Malformed(err, &d)
	if d.Class != schema.Malformed || d.Verdict != schema.Reject || d.EventID != "c-9" || !strings.Contains(d.Reason, "arguments_raw") {
		t.Fatalf("decision %+v", d)
	}
}

func TestResolveAllocations(t *testing.T) {
	s := fixture(t)
	snap := s.Snapshot()
	c := call{reg: "fleet", tool: "github__create_issue", args: `{"owner":"o","repo":"r","title":"t","labels":["a"],"n":3}`, sec: 1,
		seen: digestOf(t, s, "fleet", "github", "create_issue", 1), visible: []string{"github__create_issue"}}.build(t)
	var r Resolver
	var d schema.Decision
	if n := testing.AllocsPerRun(200, func() { r.Resolve(snap, c, &d) }); n > 0 {
		t.Fatalf("Resolve allocates %.1f times on the OK path", n)
	}
	if d.Class != schema.OK {
		t.Fatalf("class %s", d.Class)
	}
}

// TestVisibleOverlap is a regression test: a visible entry that begins
// with the server's name and ends with the tool's name, the two
// overlapping ("github_sync" for github/hub_sync), crashed the frontier
// check.
func TestVisibleOverlap(t *testing.T) {
	s := registry.New()
	s.Apply(snap("g", 0, "r", "github", 1, tl("hub_sync", emptySchema)), snap("o", 0, "r", "other", 1, tl("x", emptySchema)))
	for _, tc := range []struct {
		visible string
		want    schema.Class
	}{{"github_sync", schema.H4}, {"mcp__github__hub_sync", schema.OK}, {"github/hub_sync", schema.OK}, {"github__hub_sync", schema.OK}} {
		var d schema.Decision
		c := call{reg: "r", tool: "hub_sync", server: "github", sec: 1, visible: []string{tc.visible}}.build(t)
		(&Resolver{}).Resolve(s.Snapshot(), c, &d)
		if d.Class != tc.want {
			t.Errorf("visible %q: class %s, want %s", tc.visible, d.Class, tc.want)
		}
	}
}

// TestUnenforcedFailsClosed: arguments that reach a part of the contract
// the checker does not enforce (a reference outside the schema, a
// lookahead pattern) are refused as H3 with a reason that says so, while
// calls that do not reach it are decided as usual.
func TestUnenforcedFailsClosed(t *testing.T) {
	s := registry.New()
	s.Apply(snap("u1", 0, "open", "", 0,
		tl("deploy", `{"type":"object","properties":{"target":{"$ref":"https://schemas.example/target.json"},"env":{"type":"string","pattern":"^(?!prod)"},"dry":{"type":"boolean"}}}`)))
	snapshot := s.Snapshot()
	var r Resolver
	for _, tc := range []struct {
		args  string
		class schema.Class
		path  string
	}{
		{`{"target":{"anything":1}}`, schema.H3, "/target"},
		{`{"env":"prod-eu"}`, schema.H3, "/env"},
		{`{"dry":true}`, schema.OK, ""},
		{`{"env":7}`, schema.H3, "/env"}, // a definite failure: wrong type
	} {
		var d schema.Decision
		r.Resolve(snapshot, call{reg: "open", tool: "deploy", args: tc.args, sec: 1}.build(t), &d)
		if d.Class != tc.class || d.Path != tc.path {
			t.Errorf("%s: %s %q at %q, want %s at %q", tc.args, d.Class, d.Reason, d.Path, tc.class, tc.path)
		}
		unenforced := tc.class == schema.H3 && tc.args != `{"env":7}`
		if signature.NotEnforced(d.Reason) != unenforced || (unenforced && schema.VerdictOf(d.Class) != schema.Reject) {
			t.Errorf("%s: reason %q, verdict %s", tc.args, d.Reason, schema.VerdictOf(d.Class))
		}
	}
}
