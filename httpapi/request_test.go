package httpapi

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// TestRequests: each unusable request gets its 4xx JSON error; each bad
// call inside a usable one is a MALFORMED decision with 200.
func TestRequests(t *testing.T) {
	s, _ := server(t, Config{MaxBody: 4096, MaxBatch: 3})
	ok := `{"type":"call","event_id":"c-ok","emitted_at":"2026-12-01T00:14:16.129Z","registry":"r","tool":"t","arguments":{}}`
	for _, tc := range []struct {
		name, method, query, body string
		status                    int
		code                      string // error code, or the decisions' classes for 200
	}{
		{"GET", "GET", "", "", 405, "method_not_allowed"},
		{"PUT", "PUT", "", ok, 405, "method_not_allowed"},
		{"unknown parameter", "POST", "?mod=pin-assisted", ok, 400, "bad_request"},
		{"bad mode", "POST", "?mode=lenient", ok, 400, "bad_request"},
		{"bad action", "POST", "?action=blocked", ok, 400, "bad_request"},
		{"repeated parameter", "POST", "?action=enforced&action=observed", ok, 400, "bad_request"},
		{"empty body", "POST", "", "", 400, "bad_request"},
		{"blank body", "POST", "", " \n\t", 400, "bad_request"},
		{"a string", "POST", "", `"call"`, 400, "bad_request"},
		{"not JSON", "POST", "", `hello`, 400, "bad_request"},
		{"empty array", "POST", "", `[]`, 400, "bad_request"},
		{"unterminated array", "POST", "", `[` + ok, 400, "bad_request"},
		{"unterminated string", "POST", "", `[{"a":"b]`, 400, "bad_request"},
		{"empty element", "POST", "", `[` + ok + `,,` + ok + `]`, 400, "bad_request"},
		{"trailing comma", "POST", "", `[` + ok + `,]`, 400, "bad_request"},
		{"data after the array", "POST", "", `[` + ok + `] x`, 400, "bad_request"},
		{"unbalanced brace", "POST", "", `[}]`, 400, "bad_request"},
		{"too many calls", "POST", "", `[` + strings.Repeat(ok+",", 3) + ok + `]`, 413, "payload_too_large"},
		{"body too large", "POST", "", `{"pad":"` + strings.Repeat("x", 4096) + `"}`, 413, "payload_too_large"},
		{"unknown path", "POST", "/../../v1/nothing", ok, 404, "not_found"},
		// Usable requests with bad calls: MALFORMED, 200.
		{"not a call", "POST", "", `{"event_id":"x","tool":""}`, 200, "MALFORMED"},
		{"truncated call", "POST", "", `{"event_id":"x",`, 200, "MALFORMED"},
		{"bad elements", "POST", "", `[1, "x", null, {"event_id":"y"}, {"a":1]]`, 413, "payload_too_large"},
		{"bad elements within the limit", "POST", "", `[1, {"event_id":"y"}, {"a":1]]`, 200, "MALFORMED MALFORMED MALFORMED"},
		{"good and bad", "POST", "", `[` + ok + `, {"event_id":"y"}]`, 200, "H1 MALFORMED"},
		{"one element", "POST", "", `[` + ok + `]`, 200, "H1"},
		{"whitespace around", "POST", "", "\n  " + ok + "\n", 200, "H1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := s.URL + "/v1/resolve" + tc.query
			if strings.HasPrefix(tc.query, "/") {
				url = s.URL + "/v1/nothing"
			}
			req, err := http.NewRequest(tc.method, url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			r := do(t, req)
			if r.status != tc.status || r.header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d (%s), want %d: %s", r.status, r.header.Get("Content-Type"), tc.status, r.body)
			}
			if r.status != 200 {
				var e struct{ Error, Message string }
				d := r.decision(t)
				e.Error, _ = d["error"].(string)
				e.Message, _ = d["message"].(string)
				if e.Error != tc.code || e.Message == "" || len(d) != 2 {
					t.Fatalf("error %v, want code %s", d, tc.code)
				}
				if r.status == 405 && r.header.Get("Allow") != "POST" {
					t.Fatalf("405 without Allow: POST")
				}
				return
			}
			var classes []string
			if strings.HasPrefix(strings.TrimSpace(tc.body), "[") {
				for _, d := range r.decisions(t) {
					classes = append(classes, d["class"].(string))
				}
			} else {
				classes = append(classes, r.decision(t)["class"].(string))
			}
			if got := strings.Join(classes, " "); got != tc.code {
				t.Fatalf("classes %s, want %s", got, tc.code)
			}
		})
	}
}

// TestHints: a rejection of each class with hints carries them, as the
// suggest package computes them, through the API.
func TestHints(t *testing.T) {
	lines, _ := sample(t)
	byID := map[string]string{}
	for _, l := range lines {
		if i := strings.Index(l, `"event_id": "`); i >= 0 {
			id := l[i+13:]
			byID[id[:strings.IndexByte(id, '"')]] = l
		}
	}
	s, _ := server(t, Config{})
	for _, tc := range []struct {
		id, class, hints string
	}{
		{"c-f678ef", "H1", `{"tools":["play_spotify_song"]}`},
		{"c-f7ca7f", "M1", `{"tools":["database-server__get_current_database_info"]}`},
		{"c-a09972", "M1", `{"tools":["sqlite__semantic_search","sqlite-b__semantic_search"]}`},
		{"c-28dcd0", "M2", `{"tools":["sqlite__descriptive_statistics","sqlite-b__descriptive_statistics"]}`},
		{"c-8c498a", "M3", `{"tools":["database-server__query_database"]}`},
		{"c-bd1f03", "H2", `{"keys":["csv_file_path"],"missing":["csv_file_path"]}`},
		{"c-31b764", "H2", `{"missing":["city"]}`},
		{"c-cb3e30", "H3", `{"expected":{"type":"array"}}`},
		{"c-362ad8", "OK", `{}`},
	} {
		t.Run(tc.class+"/"+tc.id, func(t *testing.T) {
			line, ok := byID[tc.id]
			if !ok {
				t.Fatalf("no call %s in the sample", tc.id)
			}
			r := post(t, s.URL, "", line)
			d := r.decision(t)
			i := strings.Index(string(r.body), `"hints":`)
			got := strings.TrimSuffix(strings.TrimSpace(string(r.body[i+8:])), "}")
			if d["class"] != tc.class || got != tc.hints {
				t.Fatalf("class %v hints %s, want %s %s\n%s", d["class"], got, tc.class, tc.hints, r.body)
			}
			if tc.class == "H1" || tc.class == "M1" {
				if d["suggested_tool"] == "" {
					t.Fatalf("no suggested_tool: %s", r.body)
				}
			} else if d["suggested_tool"] != "" {
				t.Fatalf("suggested_tool %v for %s", d["suggested_tool"], tc.class)
			}
		})
	}
}

// TestModeAndAction: ?mode=pin-assisted decides a same-trust tie that
// strict mode rejects, per request; ?action= is echoed and audited.
func TestModeAndAction(t *testing.T) {
	lines, _ := sample(t)
	var m2 string
	for _, l := range lines {
		if strings.Contains(l, `"c-28dcd0"`) {
			m2 = l
		}
	}
	rec := &recorder{}
	s, _ := server(t, Config{Audit: rec})
	strict := post(t, s.URL, "", m2).decision(t)
	pinned := post(t, s.URL, "?mode=pin-assisted&action=enforced", m2).decision(t)
	if strict["class"] != "M2" || strict["policy_version"] != "strict" {
		t.Fatalf("strict: %v", strict)
	}
	if pinned["class"] == "M2" || pinned["policy_version"] != "pin-assisted" || pinned["action"] != "enforced" || pinned["resolved_server"] == "" {
		t.Fatalf("pin-assisted: %v", pinned)
	}
	if rec.recs[1].Action != "enforced" || rec.recs[1].PolicyVersion != "pin-assisted" || rec.recs[0].Action != "" {
		t.Fatalf("audited actions %q %q", rec.recs[0].Action, rec.recs[1].Action)
	}
	if observed := post(t, s.URL, "?action=observed", m2).decision(t); observed["action"] != "observed" {
		t.Fatalf("observed: %v", observed)
	}
}

// TestAuditFailClosed: when the audit trail does not take the decisions,
// nothing is answered but 503, and nothing is counted as decided.
func TestAuditFailClosed(t *testing.T) {
	down := audit.ProducerFunc(func(context.Context, ...*audit.Record) error {
		return errors.New("kafka: all brokers down")
	})
	s, reg := server(t, Config{Audit: down})
	b, _ := os.ReadFile("../testdata/corpus/sample/calls.jsonl")
	line := strings.SplitN(string(b), "\n", 2)[0]
	for _, body := range []string{line, "[" + line + "," + line + "]"} {
		r := post(t, s.URL, "", body)
		if r.status != 503 || r.header.Get("Retry-After") != "1" || r.decision(t)["error"] != "audit_unavailable" {
			t.Fatalf("status %d, Retry-After %q: %s", r.status, r.header.Get("Retry-After"), r.body)
		}
		if strings.Contains(string(r.body), `"verdict"`) {
			t.Fatalf("a verdict was answered: %s", r.body)
		}
	}
	if n := metricSum(t, reg, "toolaudit_api_decisions_total"); n != 0 {
		t.Fatalf("%v decisions counted", n)
	}
}

// TestUnenforcedRefused: in the call path a call that reaches a part of
// its tool's contract the checker does not enforce (a reference outside
// the schema) is refused with a reason that says so, never allowed.
func TestUnenforcedRefused(t *testing.T) {
	store := registry.New()
	l, err := schema.DecodeListing([]byte(`{"type":"listing","event_id":"l1","observed_at":"2026-12-01T00:00:00Z","registry":"u","server":"","op":"snapshot",
		"tools":[{"name":"deploy","inputSchema":{"type":"object","properties":{"target":{"$ref":"https://schemas.example/t.json"},"dry":{"type":"boolean"}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	store.Apply(l)
	s, _ := server(t, Config{Store: store})
	for _, tc := range []struct{ args, class, verdict string }{
		{`{"target":{"region":"eu"}}`, "H3", "reject"},
		{`{"dry":true}`, "OK", "allow"},
	} {
		d := post(t, s.URL, "", `{"type":"call","event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"u","tool":"deploy","arguments":`+tc.args+`}`).decision(t)
		if d["class"] != tc.class || d["verdict"] != tc.verdict {
			t.Errorf("%s: %v", tc.args, d)
		}
		if reason, _ := d["reason"].(string); tc.class == "H3" && !signature.NotEnforced(reason) {
			t.Errorf("%s: reason %q does not say the contract is not enforced", tc.args, reason)
		}
	}
}

// TestArgsUnrecordedRefused: in the call path a call that says its
// arguments were not recorded is refused, with the tool its name resolved
// to and a reason that says the arguments were not checked, and the hints
// of a rejection do not invent keys for them.
func TestArgsUnrecordedRefused(t *testing.T) {
	store := registry.New()
	l, err := schema.DecodeListing([]byte(`{"type":"listing","event_id":"l1","observed_at":"2026-12-01T00:00:00Z","registry":"u","server":"","op":"snapshot",
		"tools":[{"name":"deploy","inputSchema":{"type":"object","properties":{"dry":{"type":"boolean"}}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	store.Apply(l)
	s, _ := server(t, Config{Store: store})
	d := post(t, s.URL, "", `{"type":"call","event_id":"c","emitted_at":"2026-12-01T00:00:01Z","registry":"u","tool":"deploy","arguments_recorded":false}`).decision(t)
	if d["class"] != "H3" || d["verdict"] != "reject" || d["resolved_tool"] != "deploy" {
		t.Fatalf("%v", d)
	}
	if reason, _ := d["reason"].(string); !signature.NotEnforced(reason) || !strings.Contains(reason, "arguments not recorded") {
		t.Errorf("reason %q", reason)
	}
	if h, _ := d["hints"].(map[string]any); h["keys"] != nil || h["missing"] != nil {
		t.Errorf("hints %v", h)
	}
}

// TestPolicyStamp: the API stamps the resolver's policy
// (resolve.Resolver.Policy), as the stream, re-analysis, check and the
// gateway do: under --formats assert and an approvals policy it keeps
// +formats and +approvals(POLICY), with the request's mode.
func TestPolicyStamp(t *testing.T) {
	lines, _ := sample(t)
	block, err := approvals.ParsePolicy("block")
	if err != nil {
		t.Fatal(err)
	}
	r := resolve.Resolver{Formats: true, Approvals: approvals.NewGate(block, nil)}
	rec := &recorder{}
	s, _ := server(t, Config{Audit: rec, Resolver: r})
	pinned := r
	pinned.Mode = resolve.PinAssisted
	for i, tc := range []struct{ query, want string }{
		{"", r.Policy()},
		{"?mode=pin-assisted", pinned.Policy()},
	} {
		d := post(t, s.URL, tc.query, lines[0]).decision(t)
		if d["policy_version"] != tc.want || rec.recs[i].PolicyVersion != tc.want {
			t.Fatalf("%q: answered %v, audited %q; want %q", tc.query, d["policy_version"], rec.recs[i].PolicyVersion, tc.want)
		}
	}
	if r.Policy() != "strict+formats+approvals(block+tofu)" {
		t.Fatalf("the resolver's stamp is %q", r.Policy())
	}
}
