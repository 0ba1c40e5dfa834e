package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/schema"
)

const (
	mailV1 = `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`
	mailV2 = `{"type":"object","properties":{"to":{"type":"string"},"bcc":{"type":"string"}},"required":["to"]}`
)

func mailListing(at time.Time, inputSchema string) []byte {
	l := &schema.Listing{EventID: "mail-" + at.Format("150405.000"), ObservedAt: at, Registry: "appr", Server: "mail", Trust: 1, Op: schema.OpSnapshot}
	return schema.AppendListing(nil, l, [][]byte{[]byte(`{"name":"send","inputSchema":` + inputSchema + `}`)})
}

func mailCall(id string) string {
	c := &schema.Call{EventID: id, EmittedAt: time.Now().UTC(), Registry: "appr", AgentID: "a", SessionID: "s-" + id, Tool: "send", Server: "mail"}
	return string(schema.AppendCall(nil, c, schema.CallArgs{JSON: []byte(`{"to":"x@example.com"}`)}))
}

// TestApprovalsFleet: two resolverd run instances under --approvals
// block answer POST /v1/resolve. mail's send is approved as listed
// (resolverd registry approve); the server changes it (a rug pull,
// announced by a new listing): both instances refuse it as M4 naming the
// current and the approved digest; once an approver's token approves it
// (POST /v1/approvals to one instance), both allow it, within the bound
// measured here; the rows stored carry approval and baseline_version.
// The stream decides with the same baseline: once v1 is rejected, a call
// emitted while v1 was current is M4 (rejected) from the calls topic.
func TestApprovalsFleet(t *testing.T) {
	t.Parallel() // its own broker and database
	e := newEnv(t, chenginetest.Server(t), 3)
	e.createTopics(3, "tool-audit")
	v1, _ := schema.Digest("send", []byte(mailV1))
	v2, _ := schema.Digest("send", []byte(mailV2))
	e.produce("tool-listings", [][]byte{mailListing(time.Now().Add(-time.Hour).UTC(), mailV1)}, 0)
	registry := func(args ...string) string {
		t.Helper()
		out, err := execCommand(append(append([]string{"registry"}, args...), "--brokers", strings.Join(e.brokers, ","))...).CombinedOutput()
		if err != nil {
			t.Fatalf("registry %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	approve := func(digest string) {
		registry("approve", "--registry", "appr", "--server", "mail", "--tool", "send", "--digest", digest, "--by", "e2e", "--reason", "reviewed")
	}
	approve(v1)

	approvers := filepath.Join(t.TempDir(), "approvers")
	os.WriteFile(approvers, []byte("alice:alice-approves-0123456789\n"), 0o600)
	var urls []string
	for range 2 {
		d := e.start("--http", "127.0.0.1:0", "--approvals", "block", "--http-approvers-file", approvers)
		urls = append(urls, d.apiURL(t))
		d.waitLog(t, "approvals caught up", 30*time.Second)
		d.waitLog(t, "listings caught up", 30*time.Second)
	}
	n := 0
	decide := func(url string) map[string]any {
		t.Helper()
		n++
		a := postTo(t, url, "", mailCall(fmt.Sprintf("c%d", n)))
		var d map[string]any
		if a.status != 200 || json.Unmarshal(a.body, &d) != nil {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		return d
	}
	for _, u := range urls {
		if d := decide(u); d["class"] != "OK" || d["approval"] != "approved" || d["baseline_version"] != "1" {
			t.Fatalf("before the change: %v", d)
		}
	}

	e.produce("tool-listings", [][]byte{mailListing(time.Now().UTC(), mailV2)}, 0)
	for _, u := range urls {
		deadline := time.Now().Add(30 * time.Second)
		for {
			d := decide(u)
			if d["class"] == "M4" {
				if r := d["reason"].(string); !strings.Contains(r, v2) || !strings.Contains(r, "approved: "+v1) || d["approval"] != "unapproved" {
					t.Fatalf("refusal: %v", d)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the changed definition is still allowed: %v", d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if out := registry("pending"); !strings.Contains(out, "unapproved  "+v2) || !strings.Contains(out, "+ /bcc") {
		t.Fatalf("pending:\n%s", out)
	}

	// The approval of v2 over HTTP, to the first instance, by an
	// approver's token: recorded by its name.
	req, _ := http.NewRequest("POST", urls[0]+"/v1/approvals", strings.NewReader(
		`{"registry":"appr","server":"mail","tool":"send","digest":"`+v2+`","verb":"approve","reason":"bcc is fine"}`))
	req.Header.Set("Authorization", "Bearer alice-approves-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	approved := time.Now()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"by":"alice"`) || !strings.Contains(string(body), `"baseline_version":2`) {
		t.Fatalf("POST /v1/approvals: %d %s", resp.StatusCode, body)
	}
	took := reached(t, approved, len(urls), func(i int) bool {
		d := decide(urls[i])
		if d["class"] == "OK" && (d["approval"] != "approved" || d["baseline_version"] != "2") {
			t.Fatalf("after the approval: %v", d)
		}
		return d["class"] == "OK"
	})
	t.Logf("the approval reached both instances %v after POST /v1/approvals answered", took)

	// Stored: every API decision with its approval and baseline version.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var unapproved, approvedRows uint64
		err := e.connect().QueryRow(context.Background(), fmt.Sprintf(`SELECT countIf(approval = 'unapproved' AND class = 'M4' AND baseline_version = '1'),
			countIf(approval = 'approved' AND class = 'OK') FROM %s.decisions FINAL WHERE source = 'api'`, e.db)).Scan(&unapproved, &approvedRows)
		if err != nil {
			t.Fatal(err)
		}
		if unapproved >= 2 && approvedRows >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored: %d unapproved M4, %d approved OK", unapproved, approvedRows)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The stream decides with the same baseline: v1 rejected now, a call
	// emitted when v1 was current is M4 (rejected), one emitted now OK.
	registry("reject", "--registry", "appr", "--server", "mail", "--tool", "send", "--digest", v1, "--by", "e2e", "--reason", "superseded")
	old := &schema.Call{EventID: "stream-old", EmittedAt: time.Now().Add(-30 * time.Minute).UTC(), Registry: "appr", AgentID: "a", SessionID: "s", Tool: "send", Server: "mail"}
	cur := &schema.Call{EventID: "stream-new", EmittedAt: time.Now().UTC(), Registry: "appr", AgentID: "a", SessionID: "s", Tool: "send", Server: "mail"}
	// The instances follow the topic: let the rejection reach them first.
	reached(t, time.Now(), len(urls), func(i int) bool {
		d := decide(urls[i])
		return d["baseline_version"] == "3"
	})
	var calls [][]byte
	for _, c := range []*schema.Call{old, cur} {
		calls = append(calls, schema.AppendCall(nil, c, schema.CallArgs{JSON: []byte(`{"to":"x@example.com"}`)}))
	}
	e.produce("tool-calls", calls, 0)
	want := map[string][3]string{"stream-old": {"M4", "rejected", "3"}, "stream-new": {"OK", "approved", "3"}}
	deadline = time.Now().Add(60 * time.Second)
	for {
		rows, err := e.connect().Query(context.Background(), fmt.Sprintf(`SELECT call_key, class, approval, baseline_version
			FROM %s.decisions FINAL WHERE source = 'stream' AND call_key IN ('stream-old', 'stream-new')`, e.db))
		if err != nil {
			t.Fatal(err)
		}
		got := map[string][3]string{}
		for rows.Next() {
			var k string
			var v [3]string
			rows.Scan(&k, &v[0], &v[1], &v[2])
			got[k] = v
		}
		rows.Close()
		if len(got) == 2 {
			if got["stream-old"] != want["stream-old"] || got["stream-new"] != want["stream-new"] {
				t.Fatalf("stream rows %v, want %v", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream rows %v after 60 s", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReanalyzeApprovals: "what if we had enforced approvals": a window
// re-analysed under block, against a lockfile and against the approvals
// topic after importing it, differs from the plain re-analysis in
// exactly the calls to the one tool whose approved definition is not its
// current one (each M4 but those M3 or M4 already); every decision with
// a resolved tool carries the baseline version that decided it.
func TestReanalyzeApprovals(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 3)
	e.produce("tool-listings", c.listings, 0)
	var rs []*kgo.Record
	var from, to time.Time
	for _, l := range c.calls {
		var m struct {
			EmittedAt string `json:"emitted_at"`
		}
		_ = json.Unmarshal(l, &m)
		ts, err := schema.ParseTime(m.EmittedAt)
		if err != nil {
			continue // no usable time: outside any window
		}
		if from.IsZero() || ts.Before(from) {
			from = ts
		}
		if ts.After(to) {
			to = ts
		}
		rs = append(rs, &kgo.Record{Topic: "tool-calls", Value: l, Timestamp: ts})
	}
	slices.SortStableFunc(rs, func(a, b *kgo.Record) int { return a.Timestamp.Compare(b.Timestamp) })
	if err := e.producer.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	window := []string{"--from", from.Format(time.RFC3339Nano), "--to", to.Add(time.Millisecond).Format(time.RFC3339Nano)}
	e.resolverd(t, 0, "migrate")
	e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "base", "--progress", "none"}, window...)...)

	// The lockfile: every definition the window resolved to, but for the
	// tool with the most allowed calls another definition than its own.
	rows, err := e.connect().Query(context.Background(), fmt.Sprintf(`SELECT registry, resolved_server, resolved_tool, current_digest, countIf(verdict = 'allow')
		FROM %s.decisions FINAL WHERE analysis_id = 'base' AND current_digest != '' GROUP BY ALL`, e.db))
	if err != nil {
		t.Fatal(err)
	}
	type def struct{ registry, server, tool, digest string }
	var defs []def
	victim, most := def{}, uint64(0)
	for rows.Next() {
		var d def
		var n uint64
		if err := rows.Scan(&d.registry, &d.server, &d.tool, &d.digest, &n); err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
		if n > most || n == most && d.tool < victim.tool {
			victim, most = d, n
		}
	}
	rows.Close()
	var lock strings.Builder
	lock.WriteString(`{"toolaudit":"approvals-lock/v1"}` + "\n")
	slices.SortFunc(defs, func(a, b def) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, d := range defs {
		if d == victim {
			d.digest = "sha256:" + strings.Repeat("0", 64)
		}
		b, _ := json.Marshal(map[string]string{"registry": d.registry, "server": d.server, "tool": d.tool, "digest": d.digest,
			"state": "approved", "by": "e2e", "at": "2026-12-01T00:00:00.000Z", "reason": ""})
		lock.Write(append(b, '\n'))
	}
	lf := filepath.Join(t.TempDir(), "fleet.lock")
	os.WriteFile(lf, []byte(lock.String()), 0o600)
	e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "locked", "--progress", "none", "--approvals", "block", "--approvals-lock", lf}, window...)...)
	if out, err := execCommand("registry", "lock", "--import", lf, "--by", "e2e", "--brokers", strings.Join(e.brokers, ",")).CombinedOutput(); err != nil {
		t.Fatalf("lock --import: %v\n%s", err, out)
	}
	e.resolverd(t, 0, append([]string{"reanalyze", "--analysis", "topic", "--progress", "none", "--approvals", "block"}, window...)...)

	classes := func(analysis string) map[string][3]string {
		rows, err := e.connect().Query(context.Background(), fmt.Sprintf(`SELECT call_key, class, approval, baseline_version
			FROM %s.decisions FINAL WHERE analysis_id = ?`, e.db), analysis)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[string][3]string{}
		for rows.Next() {
			var k string
			var v [3]string
			if err := rows.Scan(&k, &v[0], &v[1], &v[2]); err != nil {
				t.Fatal(err)
			}
			out[k] = v
		}
		return out
	}
	base := classes("base")
	victimCalls := e.count(fmt.Sprintf("SELECT count() FROM {db}.decisions FINAL WHERE analysis_id = 'base' AND resolved_tool = '%s' AND resolved_server = '%s' AND class NOT IN ('M3', 'M4')", victim.tool, victim.server))
	for _, analysis := range []string{"locked", "topic"} {
		got := classes(analysis)
		if len(got) != len(base) || len(base) < 500 {
			t.Fatalf("%s: %d decisions, base %d", analysis, len(got), len(base))
		}
		changed := int64(0)
		version := map[string]bool{}
		for k, b := range base {
			g := got[k]
			if g[0] != b[0] {
				changed++
				if g[0] != "M4" || g[1] != "unapproved" {
					t.Fatalf("%s: %s %v -> %v", analysis, k, b, g)
				}
			}
			if g[1] != "" {
				version[g[2]] = true
			}
		}
		if changed != victimCalls || changed < int64(most) || most == 0 {
			t.Fatalf("%s: %d calls changed, want the %d calls to %s (%d of them allowed)", analysis, changed, victimCalls, victim.tool, most)
		}
		if len(version) != 1 {
			t.Fatalf("%s: baseline versions %v", analysis, version)
		}
		t.Logf("%s: %d calls to %s/%s refused, %d of them allowed before; baseline version %v", analysis, changed, victim.server, victim.tool, most, version)
	}
}

// TestGatewayApprovals: two resolverd gateway processes, each in front
// of its own Go fixture server, under --approvals block. The fleet's
// definitions are approved from `registry pending` (a lockfile
// imported); each server then changes transfer and announces it, and the
// client relists: both gateways refuse the new definition (M4, approval
// unapproved, a text saying an operator must approve it) until `registry
// approve` approves it, then forward it; the time the approval took to
// reach both is logged.
func TestGatewayApprovals(t *testing.T) {
	t.Parallel() // its own broker and database
	e := newEnv(t, chenginetest.Server(t), 3)
	e.createTopics(3, "tool-audit")
	brokers := strings.Join(e.brokers, ",")
	registry := func(args ...string) string {
		t.Helper()
		out, err := execCommand(append(append([]string{"registry"}, args...), "--brokers", brokers)...).Output()
		if err != nil {
			t.Fatalf("registry %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	empty := filepath.Join(t.TempDir(), "empty.lock")
	os.WriteFile(empty, []byte(`{"toolaudit":"approvals-lock/v1"}`+"\n"), 0o600)
	registry("lock", "--import", empty, "--by", "e2e") // creates the topic, writes nothing
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf("registry: e2e-approvals\nupstreams:\n  - {name: fx, trust: 1, command: [%q], env: {%s: fx}}\n", exe, gatewaytest.FixtureEnv)
	var clients []*mcp.ClientSession
	for range 2 {
		_, url := e.startGateway(config, "--approvals", "block")
		// A session (2025-11-25): its relisting is the gateway's record
		// of the definition the client holds.
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-approvals", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		clients = append(clients, cs)
	}
	// Approve what is pending: every definition is new.
	pendingLock := func() string {
		t.Helper()
		var lock strings.Builder
		lock.WriteString(`{"toolaudit":"approvals-lock/v1"}` + "\n")
		for _, l := range strings.Split(strings.TrimSpace(registry("pending", "--all", "--json", "--registry", "e2e-approvals")), "\n") {
			var it struct{ Registry, Server, Tool, Digest, Approval string }
			if err := json.Unmarshal([]byte(l), &it); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			b, _ := json.Marshal(map[string]string{"registry": it.Registry, "server": it.Server, "tool": it.Tool, "digest": it.Digest,
				"state": "approved", "by": "e2e", "at": "2026-12-01T00:00:00.000Z", "reason": "first review"})
			lock.Write(append(b, '\n'))
		}
		return lock.String()
	}
	lf := filepath.Join(t.TempDir(), "fleet.lock")
	os.WriteFile(lf, []byte(pendingLock()), 0o600)
	registry("lock", "--import", lf, "--by", "e2e")

	call := func(cs *mcp.ClientSession, args map[string]any) (string, map[string]any) {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__transfer", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for _, c := range res.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				text += tc.Text
			}
		}
		var d map[string]any
		if res.IsError {
			b, _ := json.Marshal(res.Meta["io.toolaudit/decision"])
			json.Unmarshal(b, &d)
		}
		return text, d
	}
	digestOf := func(cs *mcp.ClientSession) string {
		t.Helper()
		ts, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range ts.Tools {
			if tl.Name == "fx__transfer" {
				d, _ := tl.Meta["io.toolaudit/digest"].(string)
				return d
			}
		}
		t.Fatal("no fx__transfer listed")
		return ""
	}
	before := digestOf(clients[0])
	for _, cs := range clients {
		deadline := time.Now().Add(10 * time.Second)
		for { // the gateway follows the topic: the import reaches it
			text, d := call(cs, map[string]any{"to": "bob", "amount": 1})
			if text == "sent 1 to bob" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("approved definition refused: %s %v", text, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__change_schema", Arguments: map[string]any{}})
		if err != nil || res.IsError {
			b, _ := json.Marshal(res)
			t.Fatalf("change_schema: %v %s", err, b)
		}
	}
	var after string
	for _, cs := range clients {
		deadline := time.Now().Add(10 * time.Second)
		for after = digestOf(cs); after == before; after = digestOf(cs) { // relisted: the client holds the new definition
			if time.Now().After(deadline) {
				t.Fatalf("the change was not listed: %q still", before)
			}
			time.Sleep(20 * time.Millisecond)
		}
		text, d := call(cs, map[string]any{"to": "bob", "amount": 1, "cc": "eve"})
		if d["class"] != "M4" || d["approval"] != "unapproved" || !strings.Contains(text, "not approved by the operators") ||
			!strings.Contains(d["reason"].(string), after) || !strings.Contains(d["reason"].(string), before) {
			t.Fatalf("the unapproved definition: %s %v", text, d)
		}
	}
	if out := registry("pending", "--registry", "e2e-approvals"); !strings.Contains(out, "unapproved  "+after) || !strings.Contains(out, "+ /cc") {
		t.Fatalf("pending:\n%s", out)
	}
	registry("approve", "--registry", "e2e-approvals", "--server", "fx", "--tool", "transfer", "--digest", after, "--by", "e2e", "--reason", "cc reviewed")
	approved := time.Now()
	took := reached(t, approved, len(clients), func(i int) bool {
		text, _ := call(clients[i], map[string]any{"to": "bob", "amount": 1, "cc": "eve"})
		return text == "sent 1 to bob"
	})
	t.Logf("the approval reached both gateways %v after registry approve returned", took)
}

// reached polls each of n instances until allowed(i) reports that it
// decides under the approval written at approved, and returns how long
// after that each did; more than 10 s fails the test.
func reached(t *testing.T, approved time.Time, n int, allowed func(i int) bool) []time.Duration {
	t.Helper()
	var took []time.Duration
	for i := range n {
		for !allowed(i) {
			if time.Since(approved) > 10*time.Second {
				t.Fatalf("the approval did not reach instance %d in 10 s", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(approved))
	}
	return took
}
