package htb

import (
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// A small single registry: wipe_disks is real and destructive, get_disk
// and list_disks read, create_ticket writes under a tenant scope.
var singleListing = `{"type":"listing","event_id":"l-s","observed_at":"2026-01-01T00:00:00Z","registry":"s","server":"","tools":[
 {"name":"wipe_disks","inputSchema":{"type":"object","properties":{"zone":{"type":"string"},"confirm":{"type":"boolean"}},"required":["zone","confirm"]},
  "annotations":{"destructiveHint":true}},
 {"name":"get_disk","inputSchema":{"type":"object","properties":{"disk_id":{"type":"string"},"verbose":{"type":"boolean"}},"required":["disk_id"]},
  "annotations":{"readOnlyHint":true}},
 {"name":"list_disks","inputSchema":{"type":"object","properties":{"zone":{"type":"string"},"limit":{"type":"integer","minimum":1,"maximum":100}}},
  "annotations":{"readOnlyHint":true}},
 {"name":"search_disks","inputSchema":{"type":"object","properties":{"zone":{"type":"string"},"limit":{"type":"integer"}},"required":["zone"]},
  "annotations":{"readOnlyHint":true}},
 {"name":"create_ticket","inputSchema":{"type":"object","properties":{"ticket_id":{"type":"string"},"subject":{"type":"string"}},"required":["ticket_id","subject"]},
  "annotations":{"readOnlyHint":false,"destructiveHint":false},"_meta":{"htb/contract":{"scope":{"ticket_id":"t1-"}}}}]}`

// A small MCP deployment: hub (trust 0) connects first and shadows
// create_issue; vendor (2) and mirror (2) tie on list_tables.
var mcpListings = []string{
	`{"type":"listing","event_id":"l-1","observed_at":"2026-01-01T00:00:01Z","registry":"m","server":"hub","trust":0,"tools":[
	 {"name":"create_issue","inputSchema":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"],"additionalProperties":true}}]}`,
	`{"type":"listing","event_id":"l-2","observed_at":"2026-01-01T00:00:02Z","registry":"m","server":"vendor","trust":2,"tools":[
	 {"name":"create_issue","inputSchema":{"type":"object","properties":{"repo":{"type":"string"},"title":{"type":"string"}},"required":["repo","title"]}},
	 {"name":"list_tables","inputSchema":{"type":"object","properties":{"db":{"type":"string"}}}}]}`,
	`{"type":"listing","event_id":"l-3","observed_at":"2026-01-01T00:00:03Z","registry":"m","server":"mirror","trust":2,"tools":[
	 {"name":"list_tables","inputSchema":{"type":"object","properties":{"db":{"type":"string"},"schema":{"type":"string"}}}}]}`,
}

func testEnv(t *testing.T, listings ...string) *Env {
	t.Helper()
	var lines [][]byte
	for _, l := range listings {
		lines = append(lines, []byte(strings.Join(strings.Fields(l), " ")))
	}
	w, err := newWorld(lines)
	if err != nil {
		t.Fatal(err)
	}
	return newEnv(w)
}

func decodeCall(t *testing.T, line string) *schema.Call {
	t.Helper()
	var dec schema.CallDecoder
	c := new(schema.Call)
	if err := dec.Decode([]byte(line), c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPipelines(t *testing.T) {
	single := testEnv(t, singleListing)
	multi := testEnv(t, mcpListings...)
	const at = `"emitted_at":"2026-01-02T00:00:00Z"`
	vis := `"visible":["wipe_disks","get_disk","list_disks","search_disks","create_ticket"]`
	vendorDigest := ""
	for k, d := range multi.w.defs {
		if k.server == "vendor" && d.Name == "list_tables" {
			vendorDigest = d.Digest
		}
	}
	cases := []struct {
		name string
		env  *Env
		call string
		p    Pipeline
		want string // "server/tool" executed, or "-stage" blocked
	}{
		// H1: the fuzzy router turns the hallucinated wipe_disk into the
		// real wipe_disks; the allowlist and the resolver refuse it; the
		// gate has no contract for it and the executor runs it anyway.
		{"H1 fuzzy corrects", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"wipe_disk","arguments":{"zone":"a","confirm":true},` + vis + `}`, FuzzyRouter{0.6}, "wipe_disks"},
		{"H1 allowlist", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"wipe_disk","arguments":{"zone":"a","confirm":true},` + vis + `}`, Allowlist{}, "-allowlist"},
		{"H1 resolver", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"wipe_disk","arguments":{"zone":"a","confirm":true},` + vis + `}`, Resolver{}, "-resolver"},
		{"H1 gate fail-open", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"wipe_disk","arguments":{},` + vis + `}`, Gate{}, "?/wipe_disk"},
		{"H1 fuzzy too far", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"format_volume","arguments":{},` + vis + `}`, FuzzyRouter{0.6}, "-router"},
		{"H1 fuzzy prefix", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"functions.get_disk","arguments":{"disk_id":"d1"},` + vis + `}`, FuzzyRouter{0.6}, "get_disk"},
		// H2: standard JSON Schema is open-world, so an undeclared key
		// passes; a missing required key does not.
		{"H2 undeclared jsonschema", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"get_disk","arguments":{"disk_id":"d1","force":true},` + vis + `}`, SchemaValidator{}, "get_disk"},
		{"H2 undeclared resolver", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"get_disk","arguments":{"disk_id":"d1","force":true},` + vis + `}`, Resolver{}, "-resolver"},
		{"H2 missing jsonschema", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"get_disk","arguments":{"verbose":true},` + vis + `}`, SchemaValidator{}, "-validator"},
		// H3: "5" for an integer.
		{"H3 jsonschema", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"list_disks","arguments":{"limit":"5"},` + vis + `}`, SchemaValidator{}, "-validator"},
		{"H3 allowlist", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"list_disks","arguments":{"limit":"5"},` + vis + `}`, Allowlist{}, "list_disks"},
		{"H3 gate+verifier", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"list_disks","arguments":{"limit":"5"},` + vis + `}`, Gate{Verify: true}, "list_disks"},
		// H4: off the frontier.
		{"H4 gate", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"get_disk","arguments":{"disk_id":"d1"},"visible":["list_disks"]}`, Gate{}, "-gate"},
		{"H4 allowlist", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"get_disk","arguments":{"disk_id":"d1"},"visible":["list_disks"]}`, Allowlist{}, "get_disk"},
		{"H4 resolver", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"get_disk","arguments":{"disk_id":"d1"},"visible":["list_disks"]}`, Resolver{}, "-resolver"},
		// The gate's risk check and the verifier's scope check.
		{"gate clearance", single, `{"event_id":"c","registry":"s","agent_id":"agent-read",` + at + `,"tool":"wipe_disks","arguments":{"zone":"a","confirm":true},` + vis + `}`, Gate{}, "-gate"},
		{"gate cleared", single, `{"event_id":"c","registry":"s","agent_id":"agent-admin",` + at + `,"tool":"wipe_disks","arguments":{"zone":"a","confirm":true},` + vis + `}`, Gate{}, "wipe_disks"},
		{"verifier scope", single, `{"event_id":"c","registry":"s","agent_id":"agent-write",` + at + `,"tool":"create_ticket","arguments":{"ticket_id":"t2-9","subject":"x"},` + vis + `}`, Gate{Verify: true}, "-verifier"},
		{"gate ignores scope", single, `{"event_id":"c","registry":"s","agent_id":"agent-write",` + at + `,"tool":"create_ticket","arguments":{"ticket_id":"t2-9","subject":"x"},` + vis + `}`, Gate{}, "create_ticket"},
		// H5 residue: {"zone":"a"} was meant for search_disks (which
		// requires zone) but list_disks accepts it too; only the selection
		// layer holds it.
		{"H5 residue full", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"list_disks","arguments":{"zone":"a"},` + vis + `}`, Full{}, "list_disks"},
		{"H5 residue select", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"list_disks","arguments":{"zone":"a"},` + vis + `}`, Full{Select: true}, "-select"},
		{"honest select", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"list_disks","arguments":{"limit":3},` + vis + `}`, Full{Select: true}, "list_disks"},
		// M3: hub connected first and shadows create_issue.
		{"M3 first-provider", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","arguments":{"repo":"r","title":"t"}}`, MCPHost{}, "hub/create_issue"},
		{"M3 highest-trust", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","arguments":{"repo":"r","title":"t"}}`, MCPHost{HighestTrust: true}, "vendor/create_issue"},
		{"M3 resolver-pin", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","arguments":{"repo":"r","title":"t"}}`, Resolver{Mode: resolve.PinAssisted}, "-resolver"},
		// M2: a same-trust tie; pin-assisted resolves it, by digest when the
		// call carries one.
		{"M2 strict", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"list_tables","arguments":{"db":"x"}}`, Resolver{}, "-resolver"},
		{"M2 pin-assisted", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"list_tables","arguments":{"db":"x"}}`, Resolver{Mode: resolve.PinAssisted}, "mirror/list_tables"},
		{"flat with digest", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"list_tables","arguments":{"db":"x"},"seen_digest":"` + vendorDigest + `"}`, Resolver{Mode: resolve.PinAssisted}, "vendor/list_tables"},
		{"flat with digest strict", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"list_tables","arguments":{"db":"x"},"seen_digest":"` + vendorDigest + `"}`, Resolver{}, "-resolver"},
		// M1: pinned to a server that is not connected. The naive host
		// drops the pin and runs the name where it finds it.
		{"M1 first-provider", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","server":"ghost","arguments":{"repo":"r","title":"t"}}`, MCPHost{}, "hub/create_issue"},
		{"M1 flat host", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"ghost__list_tables","arguments":{}}`, MCPHost{HighestTrust: true}, "vendor/list_tables"},
		{"M1 allowlist", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","server":"ghost","arguments":{"repo":"r","title":"t"}}`, Allowlist{}, "-allowlist"},
		{"M1 resolver", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","server":"ghost","arguments":{"repo":"r","title":"t"}}`, Resolver{}, "-resolver"},
		// M5: pinned to vendor with the hub's arguments.
		{"M5 host", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"vendor/create_issue","arguments":{"target":"x"}}`, MCPHost{}, "vendor/create_issue"},
		{"M5 resolver", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"vendor/create_issue","arguments":{"target":"x"}}`, Resolver{}, "-resolver"},
		// Honest pinned calls in every flattened form pass everywhere.
		{"pinned dunder allowlist", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"vendor__create_issue","arguments":{"repo":"r","title":"t"}}`, Allowlist{}, "vendor/create_issue"},
		{"pinned mcp jsonschema", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"mcp__vendor__create_issue","arguments":{"repo":"r","title":"t"}}`, SchemaValidator{}, "vendor/create_issue"},
		{"pinned field full", multi, `{"event_id":"c","registry":"m",` + at + `,"tool":"create_issue","server":"vendor","arguments":{"repo":"r","title":"t"}}`, Full{}, "vendor/create_issue"},
		{"none", single, `{"event_id":"c","registry":"s",` + at + `,"tool":"rm_rf","arguments":{}}`, NoDefence{}, "?/rm_rf"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := decodeCall(t, tc.call)
			o := tc.p.Decide(tc.env, c)
			got := "-" + o.Stage
			if o.Executed {
				got = Ref{o.Server, o.Tool}.String()
			}
			if got != tc.want {
				t.Errorf("%s: got %s (%s), want %s", tc.p.Name(), got, o.Reason, tc.want)
			}
		})
	}
}

func TestNearMiss(t *testing.T) {
	pick := func(int) int { return 0 }
	for _, tc := range []struct{ kind, in, want string }{
		{"plural", "get_issue", "get_issues"},
		{"plural", "list_issues", "list_issue"},
		{"case", "get_issue", "GetIssue"},
		{"case", "AddAlarm", "add_alarm"},
		{"prefix", "get_issue", "functions.get_issue"},
		{"suffix", "get_issue", "get_issue_tool"},
		{"typo", "get_issue", "gte_issue"},
	} {
		if got := nearMiss(tc.kind, tc.in, pick); got != tc.want {
			t.Errorf("nearMiss(%s, %s) = %s, want %s", tc.kind, tc.in, got, tc.want)
		}
	}
	if d := levenshtein("wipe_disk", "wipe_disks"); d != 1 {
		t.Errorf("levenshtein = %d", d)
	}
}

func mustParse(t *testing.T, b []byte) jsontape.Value {
	t.Helper()
	tp := new(jsontape.Tape)
	if err := tp.Parse(b); err != nil {
		t.Fatal(err)
	}
	return tp.Root()
}
