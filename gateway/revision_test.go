package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/schema"
)

// aliceTokens is a tokens file with one client, alice.
func aliceTokens(t *testing.T) (*bearer.Tokens, http.Header) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte("alice: token-of-alice-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := bearer.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tokens, http.Header{"Authorization": {"Bearer token-of-alice-0123456789"}}
}

// TestRevisions: the same calls from Go SDK v1.8.0 clients of both
// protocol revisions: 2025-11-25 (initialize, a session) and 2026-07-28
// (server/discover, no session, the version in each request's _meta,
// list_changed through subscriptions/listen). A rug pull is M4 by every
// spelling under both; the decisions and the audit records are the
// same, and a scripted agent that applies an H2 answer's fix passes on
// its retry under both. A 2026-07-28 client that subscribed to list_changed relists when
// told and is then checked against the new definition; one that did not
// subscribe keeps its cached listing (ttlMs), so its calls stay M4.
func TestRevisions(t *testing.T) {
	type step struct {
		op, name, args string
		class          string // "" OK
	}
	steps := []step{
		{op: "list"},
		{op: "call", name: "rug__transfer", args: `{"to":"bob","amount":5}`},
		{op: "call", name: "rug__echo", args: `{"mesage":"hi"}`, class: "H2"},
		{op: "agent", name: "rug__echo", args: `{"mesage":"hi"}`},
		{op: "call", name: "rug__echoo", args: `{"message":"hi"}`, class: "M1"},
		{op: "call", name: "rug__change_schema", args: `{}`},
		{op: "changed"},
		{op: "call", name: "rug__transfer", args: `{"to":"bob","amount":5,"cc":"eve"}`, class: "M4"},
		{op: "call", name: "rug/transfer", args: `{"to":"bob","amount":5,"cc":"eve"}`, class: "M4"},
		{op: "call", name: "mcp__rug__transfer", args: `{"to":"bob","amount":5,"cc":"eve"}`, class: "M4"},
		{op: "call", name: "transfer", args: `{"to":"bob","amount":5,"cc":"eve"}`, class: "M4"},
		{op: "list"},
		{op: "call", name: "rug__transfer", args: `{"to":"bob","amount":5}`, class: "H2"},
		{op: "call", name: "rug__transfer", args: `{"to":"bob","amount":5,"cc":"eve"}`},
	}
	type run struct {
		revision  string
		subscribe bool
		after     string // the class of every call after the relisting, when not the step's
	}
	var first []schema.Decision
	type event struct{ server, tool, seen, args string }
	var firstEvents []event
	for _, r := range []run{{legacy, true, ""}, {stateless, true, ""}, {stateless, false, "M4"}} {
		t.Run(fmt.Sprintf("%s-subscribe=%v", r.revision, r.subscribe), func(t *testing.T) {
			rug, url := httpFixture(t, "rug")
			tokens, header := aliceTokens(t)
			st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{Auth: tokens})
			c := connectOptions(t, st.url, header, r.revision, r.subscribe)
			if res := c.cs.InitializeResult(); res.ProtocolVersion != r.revision {
				t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, r.revision)
			}
			if id := c.cs.ID(); (id == "") != (r.revision == stateless) {
				t.Fatalf("session id %q under %s", id, r.revision)
			}
			relisted := false
			for i, s := range steps {
				switch s.op {
				case "list":
					res, err := c.cs.ListTools(context.Background(), nil)
					if err != nil {
						t.Fatal(err)
					}
					if res.TTLMs != int(DefaultListTTL.Milliseconds()) && r.revision == stateless {
						t.Errorf("tools/list ttlMs %d", res.TTLMs)
					}
					relisted = i > 0
				case "changed":
					st.waitChanged(t, "rug__transfer")
					if r.subscribe {
						select {
						case <-c.changed:
						case <-time.After(10 * time.Second):
							t.Fatal("no notifications/tools/list_changed reached the client")
						}
					}
				case "agent":
					// What a model does with the text alone: it renames
					// the key the text names, and the retry passes.
					got, tries := agent(t, c, s.name, s.args)
					if got != "echo: hi" || tries != 1 {
						t.Errorf("step %d: agent got %q after %d corrections", i, got, tries)
					}
				case "call":
					before := rug.Calls()
					_, rej := c.call(t, s.name, s.args)
					want := s.class
					if relisted && r.after != "" {
						want = r.after
					}
					got := "OK"
					if rej != nil {
						got = decodeAnswer(t, rej).Class
					}
					if want == "" {
						want = "OK"
					}
					if got != want {
						t.Errorf("step %d %s %s: %s, want %s", i, s.name, s.args, got, want)
					}
					if forwarded := rug.Calls() != before; forwarded != (got == "OK") {
						t.Errorf("step %d %s: %s, forwarded %v", i, s.name, got, forwarded)
					}
				}
			}
			recs := st.rec.recs()
			var ds []schema.Decision
			var evs []event
			var dec schema.CallDecoder
			for _, rec := range recs {
				d := rec.Decision
				d.EventID, d.RegistryVersion, d.Drift = "", "", false
				ds = append(ds, d)
				var c schema.Call
				if err := dec.Decode(rec.Call, &c); err != nil {
					t.Fatal(err)
				}
				if c.AgentID != "alice" {
					t.Errorf("agent_id %q", c.AgentID)
				}
				evs = append(evs, event{c.Server, c.Tool, c.SeenDigest, string(c.Arguments.Raw())})
			}
			if r.after != "" {
				return
			}
			if first == nil {
				first, firstEvents = ds, evs
				return
			}
			if len(ds) != len(first) {
				t.Fatalf("%d audit records, %d under %s", len(ds), len(first), legacy)
			}
			for i := range ds {
				if ds[i] != first[i] || evs[i] != firstEvents[i] {
					t.Errorf("audit record %d:\n%+v %+v\nunder %s:\n%+v %+v", i, ds[i], evs[i], legacy, first[i], firstEvents[i])
				}
			}
		})
	}
}

// fix is the correction a rejection's text gives for a key.
var fix = regexp.MustCompile(`send "([^"]+)" instead of "([^"]+)"`)

// agent is a scripted agent: it calls, and while the answer is an error
// whose text names a key to send instead of another, renames it and
// calls again (at most 3 times). It returns the last text and the
// number of corrections.
func agent(t *testing.T, c *client, name, args string) (string, int) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatal(err)
	}
	for tries := 0; ; tries++ {
		b, _ := json.Marshal(a)
		got, rej := c.call(t, name, string(b))
		if rej == nil {
			return got, tries
		}
		m := fix.FindStringSubmatch(rej.Message)
		if m == nil || tries == 3 {
			return rej.Message, tries
		}
		a[m[1]] = a[m[2]]
		delete(a, m[2])
	}
}

// connectOptions connects a Go SDK client of the revision, subscribed to
// list_changed or not.
func connectOptions(t *testing.T, url string, header http.Header, revision string, subscribe bool) *client {
	t.Helper()
	c := &client{changed: make(chan struct{}, 16)}
	opts := &mcp.ClientOptions{}
	if subscribe {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		}
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	hc := &http.Client{Transport: headerTransport{header}}
	cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	c.cs = cs
	return c
}

// TestStatelessTTL: a client without a session may hold a listing for
// ListTTL. After a change, an anonymous client's calls are M4 for
// ListTTL from the change, relisting or not (it cannot be told from
// another anonymous client), then checked against the new definition.
func TestStatelessTTL(t *testing.T) {
	const ttl = 400 * time.Millisecond
	rug, url := httpFixture(t, "rug")
	st := start(t, Config{ListTTL: Duration(ttl), Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{})
	c := connectOptions(t, st.url, nil, stateless, true)
	c.list(t)
	if _, rej := c.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	changed := st.gw.cat.Load().at
	<-c.changed
	c.list(t)
	before := rug.Calls()
	for {
		_, rej := c.call(t, "rug__transfer", `{"to":"bob","amount":5,"cc":"eve"}`)
		since := time.Since(changed)
		switch {
		case rej != nil && decodeAnswer(t, rej).Class == "M4":
			if since > ttl+time.Second {
				t.Fatalf("M4 %v after the change, list_ttl %v", since, ttl)
			}
			time.Sleep(50 * time.Millisecond)
			continue
		case rej != nil:
			t.Fatalf("%s", rej.Message)
		case since < ttl:
			t.Fatalf("forwarded %v after the change, within list_ttl %v", since, ttl)
		}
		break
	}
	if rug.Calls() != before+1 {
		t.Errorf("the upstream received %d calls", rug.Calls()-before)
	}
}

// TestSessionNotListed: a session that has not listed is checked as a
// client without a session: its client may hold the listing of an
// earlier session (one closed under it), so a definition changed within
// list_ttl is M4 until it lists.
func TestSessionNotListed(t *testing.T) {
	rug, url := httpFixture(t, "rug")
	st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{})
	first := connect(t, st.url, nil)
	first.list(t)
	if _, rej := first.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	first.cs.Close()
	again := connect(t, st.url, nil)
	before := rug.Calls()
	if _, rej := again.call(t, "rug__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); rej == nil || decodeAnswer(t, rej).Class != "M4" {
		t.Fatalf("a new session's call before it listed: %+v", rej)
	}
	again.list(t)
	if got, rej := again.call(t, "rug__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); rej != nil || got != "sent 5 to bob" {
		t.Fatalf("after it listed: %q %+v", got, rej)
	}
	if n := rug.Calls() - before; n != 1 {
		t.Errorf("the upstream received %d calls, want 1", n)
	}
}

// TestSilentChange: a server that changes a definition without
// list_changed (it does not declare listChanged) is seen by the
// gateway's polling (poll_tools); the gateway tells its clients, and
// the calls of a client that was shown the old definition are M4 by
// every spelling, under both revisions.
func TestSilentChange(t *testing.T) {
	rug := gatewaytest.NewQuietFixture("rug")
	url := serveFixture(t, rug)
	up := fastUpstreams
	up.Poll = 100 * time.Millisecond
	st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{Upstream: up})
	session := connect(t, st.url, nil)
	session.list(t)
	nosession := connectRevision(t, st.url, nil, stateless)
	nosession.list(t)
	if _, rej := session.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	select {
	case <-session.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not tell its client of the change it polled")
	}
	before := rug.Calls()
	for _, c := range []*client{session, nosession} {
		for _, n := range []string{"rug__transfer", "rug/transfer", "mcp__rug__transfer", "transfer"} {
			if _, rej := c.call(t, n, `{"to":"bob","amount":5,"cc":"eve"}`); rej == nil || decodeAnswer(t, rej).Class != "M4" {
				t.Errorf("%s after a silent change: %+v", n, rej)
			}
		}
	}
	if n := rug.Calls() - before; n != 0 {
		t.Errorf("the upstream received %d calls", n)
	}
}

// TestListenLimit: subscriptions/listen streams, held open by clients
// without a session, are bounded by max_sessions as sessions are.
func TestListenLimit(t *testing.T) {
	_, url := httpFixture(t, "web")
	st := start(t, Config{Limits: Limits{MaxSessions: 1}, Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}}}, Options{})
	connectOptions(t, st.url, nil, stateless, true)
	refused := st.gw.m.refused.WithLabelValues("sessions")
	open := func() int { // the SDK's sessions: a stream holds one
		n := 0
		for range st.gw.server.Sessions() {
			n++
		}
		return n
	}
	waitFor(t, 10*time.Second, "the first stream open", func() bool { return open() == 1 })
	// The SDK's client opens its stream without waiting for an answer:
	// the refusal is seen at the gateway.
	connectOptions(t, st.url, nil, stateless, true)
	waitFor(t, 10*time.Second, "the second stream refused", func() bool { return testutil.ToFloat64(refused) == 1 })
	waitFor(t, 10*time.Second, "the refused request ended", func() bool { return open() == 1 })
	// Without a subscription the client is served.
	if got, rej := connectOptions(t, st.url, nil, stateless, false).call(t, "web__echo", `{"message":"hi"}`); rej != nil || got != "echo: hi" {
		t.Errorf("a client without a subscription: %q %+v", got, rej)
	}
}

// TestClaimedDigest: a client without a session may say which
// definition it holds (the listed digest, in the call's _meta): it is
// checked exactly, with no list_ttl window. A session's catalogue
// prevails over what its client says.
func TestClaimedDigest(t *testing.T) {
	rug, url := httpFixture(t, "rug")
	st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{})
	c := connectRevision(t, st.url, nil, stateless)
	old := c.list(t)["rug__transfer"].Meta[MetaDigest].(string)
	if _, rej := c.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	<-c.changed
	now := c.list(t)["rug__transfer"].Meta[MetaDigest].(string)
	call := func(c *client, name, digest string) string {
		res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: json.RawMessage(`{"to":"bob","amount":5,"cc":"eve"}`), Meta: mcp.Meta{MetaDigest: digest}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError {
			return "OK"
		}
		var a answer
		b, _ := json.Marshal(res.Meta[MetaDecision])
		json.Unmarshal(b, &a)
		return a.Class + " " + a.SeenDigest
	}
	before := rug.Calls()
	for _, tc := range []struct{ name, digest, want string }{
		{"rug__transfer", now, "OK"},
		{"transfer", now, "OK"},
		{"rug__transfer", old, "M4 " + old},
		{"rug/transfer", old, "M4 " + old},
		// Not a digest: no claim, the list_ttl rule.
		{"rug__transfer", strings.Repeat("x", 100<<10), "M4 " + old},
		{"rug__transfer", "sha256:" + strings.ToUpper(now[7:]), "M4 " + old},
	} {
		if got := call(c, tc.name, tc.digest); got != tc.want {
			t.Errorf("%s claiming %.20s: %.40s, want %.40s", tc.name, tc.digest, got, tc.want)
		}
	}
	// Within list_ttl, without a claim: M4 (anonymous).
	if got := call(c, "rug__transfer", ""); got != "M4 "+old {
		t.Errorf("no claim: %s", got)
	}
	// A session that listed: its catalogue, not the claim.
	legacy := connect(t, st.url, nil)
	legacy.list(t)
	if got := call(legacy, "rug__transfer", old); got != "OK" {
		t.Errorf("a session claiming the old digest: %s", got)
	}
	if n := rug.Calls() - before; n != 3 {
		t.Errorf("the upstream received %d calls, want 3", n)
	}
}
