package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/schema"
)

// TestRugPull: a definition that changes after the session listed it is
// M4 and never reaches the upstream; once the client lists again, the
// new definition is the one checked.
func TestRugPull(t *testing.T) {
	st := start(t, Config{Upstreams: []Upstream{fixtureUpstream(t, "fx", 1)}}, Options{})
	c := connect(t, st.url, nil)
	before := c.list(t)["fx__transfer"].Meta[MetaDigest]
	if got, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5}`); je != nil || got != "sent 5 to bob" {
		t.Fatalf("before the change: %q %v", got, je)
	}
	if _, je := c.call(t, "fx__change_schema", `{}`); je != nil {
		t.Fatal(je)
	}
	select {
	case <-c.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed reached the client")
	}
	_, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5}`)
	if je == nil {
		t.Fatal("the call after the rug pull was forwarded")
	}
	a := decodeAnswer(t, je)
	if a.Class != "M4" || !je.IsError || !strings.Contains(je.Message, "List the tools again") || a.SeenDigest != before || a.CurrentDigest == before || a.CurrentDigest == "" {
		t.Fatalf("after the rug pull: %s %+v", je.Message, a)
	}
	after := c.list(t)["fx__transfer"].Meta[MetaDigest]
	if after != a.CurrentDigest {
		t.Errorf("listed digest %v, decision's current digest %s", after, a.CurrentDigest)
	}
	if _, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5}`); je == nil || decodeAnswer(t, je).Class != "H2" {
		t.Errorf("old arguments against the new definition: %v", je)
	}
	if got, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); je != nil || got != "sent 5 to bob" {
		t.Errorf("new arguments: %q %v", got, je)
	}
	// The listings topic has both definitions, the second with cc.
	var fx []*schema.Listing
	for _, l := range st.rec.lists() {
		if l.Server == "fx" {
			fx = append(fx, l)
		}
	}
	if len(fx) != 2 || !fx[0].ObservedAt.Before(fx[1].ObservedAt) {
		t.Fatalf("%d listings of fx", len(fx))
	}
	for _, tl := range fx[1].Tools {
		if tl.Name == "transfer" && !bytes.Contains(tl.InputSchema, []byte(`"cc"`)) {
			t.Errorf("second listing's transfer: %s", tl.InputSchema)
		}
	}
}

// TestPolicy: two upstreams exposing the same names; a bare name is
// decided by the mode and the trust tiers, a qualified name always
// reaches its server.
func TestPolicy(t *testing.T) {
	for _, tc := range []struct {
		mode         string
		trustA       int
		trustB       int
		class        string // of the bare name
		hintA, hintB bool
	}{
		{"strict", 1, 1, "M2", true, true},
		{"pin-assisted", 1, 1, "OK", false, false},
		{"strict", 2, 1, "M3", true, true},
		{"pin-assisted", 2, 1, "M3", true, true},
	} {
		t.Run(fmt.Sprintf("%s-%d-%d", tc.mode, tc.trustA, tc.trustB), func(t *testing.T) {
			a, urlA := httpFixture(t, "a")
			b, urlB := httpFixture(t, "b")
			st := start(t, Config{Mode: tc.mode, Separator: ".", Upstreams: []Upstream{{Name: "a", Trust: tc.trustA, URL: urlA}, {Name: "b", Trust: tc.trustB, URL: urlB}}}, Options{})
			c := connect(t, st.url, nil)
			c.list(t)
			got, je := c.call(t, "echo", `{"message":"x"}`)
			switch {
			case tc.class == "OK" && je != nil:
				t.Fatalf("bare name: %s", je.Message)
			case tc.class == "OK" && got != "echo: x":
				t.Fatalf("bare name: %q", got)
			case tc.class != "OK" && je == nil:
				t.Fatalf("bare name forwarded: %q", got)
			case tc.class != "OK":
				if ans := decodeAnswer(t, je); ans.Class != tc.class {
					t.Fatalf("bare name: %s, want %s", ans.Class, tc.class)
				}
			}
			for _, q := range []string{"a.echo", "b.echo"} {
				if got, je := c.call(t, q, `{"message":"x"}`); je != nil || got != "echo: x" {
					t.Errorf("%s: %q %v", q, got, je)
				}
			}
			if n := a.Calls() + b.Calls(); n != 2+int64(boolInt(tc.class == "OK")) {
				t.Errorf("upstreams received %d calls", n)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestSupervision: an upstream that dies is an error to clients at once,
// is restarted with its tools listed again, and then serves.
func TestSupervision(t *testing.T) {
	st := start(t, Config{Upstreams: []Upstream{fixtureUpstream(t, "fx", 1)}}, Options{})
	c := connect(t, st.url, nil)
	c.list(t)
	start := time.Now()
	_, je := c.call(t, "fx__crash", `{}`)
	if je == nil || je.Code != CodeUnavailable || time.Since(start) > 5*time.Second {
		t.Fatalf("call that kills the upstream: %v after %v", je, time.Since(start))
	}
	waitFor(t, 20*time.Second, "the upstream restarted", func() bool {
		got, je := c.call(t, "fx__echo", `{"message":"back"}`)
		if je != nil {
			if je.Code != CodeUnavailable {
				t.Fatalf("while restarting: %d %s", je.Code, je.Message)
			}
			return false
		}
		return got == "echo: back"
	})
}

// TestUpstreamTimeout: a call the upstream does not answer in time is an
// error to the client after the timeout, and the session goes on.
func TestUpstreamTimeout(t *testing.T) {
	st := start(t, Config{Limits: Limits{UpstreamTimeout: Duration(300 * time.Millisecond)}, Upstreams: []Upstream{fixtureUpstream(t, "fx", 1)}}, Options{})
	c := connect(t, st.url, nil)
	c.list(t)
	begin := time.Now()
	_, je := c.call(t, "fx__sleep", `{"ms":10000}`)
	took := time.Since(begin)
	if je == nil || je.Code != CodeUnavailable || !strings.Contains(je.Message, "in time") || took > 3*time.Second {
		t.Fatalf("slow call: %v after %v", je, took)
	}
	if got, je := c.call(t, "fx__sleep", `{"ms":1}`); je != nil || got != "slept 1ms" {
		t.Errorf("next call: %q %v", got, je)
	}
}

// TestAuditFailClosed: a decision the audit trail does not take is not
// acted on: no verdict, no forwarding.
func TestAuditFailClosed(t *testing.T) {
	web, url := httpFixture(t, "web")
	st := start(t, Config{Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}}}, Options{})
	c := connect(t, st.url, nil)
	c.list(t)
	st.rec.setFail(errors.New("broker down"))
	for _, args := range []string{`{"message":"hi"}`, `{"message":"hi","x":1}`} {
		_, je := c.call(t, "web__echo", args)
		if je == nil || je.Code != CodeUnavailable || !strings.Contains(je.Message, "audit") {
			t.Errorf("%s with the audit trail down: %v", args, je)
		}
	}
	if web.Calls() != 0 {
		t.Errorf("the upstream received %d calls", web.Calls())
	}
	st.rec.setFail(nil)
	if got, je := c.call(t, "web__echo", `{"message":"hi"}`); je != nil || got != "echo: hi" {
		t.Errorf("after recovery: %q %v", got, je)
	}
}

// TestListingNotProduced: an upstream whose listing cannot be produced is
// not called (its tools are not in the registry), and is once the
// listing goes through.
func TestListingNotProduced(t *testing.T) {
	rec := &recorder{fail: errors.New("broker down")}
	_, url := httpFixture(t, "web")
	gw, err := New(Options{Config: Config{Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}}}, Listings: rec, Audit: rec, Upstream: fastUpstreams})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- gw.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(300 * time.Millisecond)
	if ok, down := gw.Ready(); ok || len(down) != 1 {
		t.Fatalf("ready %v, down %v with the listing not produced", ok, down)
	}
	if n := len(gw.cat.Load().tools); n != 0 {
		t.Fatalf("catalogue of %d tools", n)
	}
	rec.setFail(nil)
	waitFor(t, 10*time.Second, "the listing retried", func() bool { ok, _ := gw.Ready(); return ok })
	if n := len(gw.cat.Load().tools); n != 6 {
		t.Fatalf("catalogue of %d tools", n)
	}
}

// TestObserve: in observe mode a rejected call that names a server is
// forwarded and recorded as observed.
func TestObserve(t *testing.T) {
	web, url := httpFixture(t, "web")
	st := start(t, Config{Observe: true, Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}}}, Options{})
	c := connect(t, st.url, nil)
	c.list(t)
	if got, je := c.call(t, "web__echo", `{"message":"hi","override":true}`); je != nil || got != "echo: hi" {
		t.Fatalf("observed call: %q %v", got, je)
	}
	if _, je := c.call(t, "web__wipe", `{}`); je == nil || decodeAnswer(t, je).Action != "observed" {
		t.Fatalf("a call to no tool is still answered: %v", je)
	}
	recs := st.rec.recs()
	if len(recs) != 2 || recs[0].Action != schema.ActionObserved || recs[0].Decision.Class != schema.H2 || recs[1].Decision.Class != schema.M1 {
		t.Errorf("records %+v", recs)
	}
	if web.Calls() != 1 {
		t.Errorf("upstream calls %d", web.Calls())
	}
}

// TestLimits: sessions, request size and calls in flight are bounded.
func TestLimits(t *testing.T) {
	web, url := httpFixture(t, "web")
	st := start(t, Config{
		Limits:    Limits{MaxSessions: 1, MaxRequestBytes: 4096, MaxInFlight: 1},
		Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}},
	}, Options{})
	c := connect(t, st.url, nil)
	c.list(t)

	t.Run("sessions", func(t *testing.T) {
		cl := mcp.NewClient(&mcp.Implementation{Name: "second", Version: "1"}, nil)
		cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: st.url}, &mcp.ClientSessionOptions{ProtocolVersion: legacy})
		if err == nil {
			cs.Close()
			t.Fatal("a second session was opened with max_sessions 1")
		}
		// A client of the stateless revision holds no session: served.
		if got, je := connectRevision(t, st.url, nil, stateless).call(t, "web__echo", `{"message":"hi"}`); je != nil || got != "echo: hi" {
			t.Errorf("a stateless client with the session table full: %q %v", got, je)
		}
		resp, err := http.Post(st.url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("new session beyond the limit: HTTP %d", resp.StatusCode)
		}
	})
	t.Run("in flight", func(t *testing.T) {
		var wg sync.WaitGroup
		before := web.Calls()
		wg.Go(func() {
			c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web__sleep", Arguments: map[string]any{"ms": 1000}})
		})
		waitFor(t, 5*time.Second, "the slow call at the upstream", func() bool { return web.Calls() == before+1 })
		_, je := c.call(t, "web__echo", `{"message":"hi"}`)
		if je == nil || je.Code != CodeUnavailable || !strings.Contains(je.Message, "in flight") {
			t.Errorf("second call in flight: %v", je)
		}
		wg.Wait()
	})
	// Last: the SDK client closes its session after a 413.
	t.Run("request bytes", func(t *testing.T) {
		defer func() {
			// The closed session leaves the table: a new one is let in.
			c.cs.Close()
			waitFor(t, 10*time.Second, "the session table emptied", func() bool { return st.gw.sessions.len() == 0 })
			connect(t, st.url, nil).list(t)
		}()
		before := len(st.rec.recs())
		big := `{"message":"` + strings.Repeat("x", 8192) + `"}`
		if _, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web__echo", Arguments: json.RawMessage(big)}); err == nil {
			t.Fatal("an 8 KiB request was taken with max_request_bytes 4096")
		}
		if len(st.rec.recs()) != before {
			t.Error("the oversize call was decided")
		}
	})
}

// TestBareNameBeforeComplete: while a higher-trust upstream has not
// listed yet, a bare name that only the lower-trust one provides is not
// decided (it would be allowed, and become M3 a moment later): -32603
// naming the missing upstream, no audit record, nothing forwarded. A
// qualified name is served. Once both listed, the bare name is M3.
func TestBareNameBeforeComplete(t *testing.T) {
	low, urlLow := httpFixture(t, "low")
	high, urlHigh := httpFixture(t, "high")
	var up atomic.Bool // the high-trust upstream answers only once set
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		httputil.NewSingleHostReverseProxy(mustURL(t, urlHigh)).ServeHTTP(w, r)
	}))
	t.Cleanup(func() { gate.CloseClientConnections(); gate.Close() })
	st := startNoWait(t, Config{Upstreams: []Upstream{{Name: "high", Trust: 2, URL: gate.URL}, {Name: "low", Trust: 1, URL: urlLow}}}, Options{})
	waitFor(t, 20*time.Second, "low listed", func() bool { return len(st.rec.lists()) == 1 })
	c := connect(t, st.url, nil)
	_, je := c.call(t, "echo", `{"message":"x"}`)
	if je == nil || je.Code != CodeUnavailable || !strings.Contains(je.Message, "not yet: high") {
		t.Fatalf("bare name before high listed: %v", je)
	}
	if n := len(st.rec.recs()); n != 0 {
		t.Fatalf("%d audit records for a call not decided", n)
	}
	if got, je := c.call(t, "low__echo", `{"message":"x"}`); je != nil || got != "echo: x" {
		t.Fatalf("qualified name before high listed: %q %v", got, je)
	}
	up.Store(true)
	waitFor(t, 20*time.Second, "every upstream listed", func() bool { ok, _ := st.gw.Ready(); return ok })
	_, je = c.call(t, "echo", `{"message":"x"}`)
	if je == nil || je.Code != CodeRejected || decodeAnswer(t, je).Class != "M3" {
		t.Fatalf("bare name once both listed: %v", je)
	}
	if low.Calls() != 1 || high.Calls() != 0 {
		t.Fatalf("upstreams got %d (low) and %d (high) calls, want 1 and 0", low.Calls(), high.Calls())
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestRugPullSpellings: after a definition changed under a session that
// was shown it, every spelling that resolves to that tool (the
// catalogue's name, bare, server/tool, mcp__server__tool) is decided
// with the digest the session was shown: M4, never forwarded; every
// audit record carries it, and deciding a recorded event again gives
// its decision (the seen_digest added after the first decision changed
// nothing but itself).
func TestRugPullSpellings(t *testing.T) {
	rug, url := httpFixture(t, "rug")
	st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{})
	c := connect(t, st.url, nil)
	shown := c.list(t)["rug__transfer"].Meta[MetaDigest].(string)
	spellings := []string{"rug__transfer", "rug/transfer", "mcp__rug__transfer", "transfer"}
	for _, n := range spellings {
		if got, je := c.call(t, n, `{"to":"bob","amount":5}`); je != nil || got != "sent 5 to bob" {
			t.Fatalf("%s before the change: %q %v", n, got, je)
		}
	}
	if _, je := c.call(t, "rug__change_schema", `{}`); je != nil {
		t.Fatal(je)
	}
	st.waitChanged(t, "rug__transfer")
	before := rug.Calls()
	for _, n := range spellings {
		_, je := c.call(t, n, `{"to":"bob","amount":5,"cc":"eve"}`)
		if je == nil {
			t.Errorf("%s after the change: forwarded", n)
			continue
		}
		if a := decodeAnswer(t, je); a.Class != "M4" || a.SeenDigest != shown || a.ResolvedServer != "rug" || a.ResolvedTool != "transfer" {
			t.Errorf("%s after the change: %s %+v", n, je.Message, a)
		}
	}
	if n := rug.Calls() - before; n != 0 {
		t.Errorf("the upstream received %d calls after the change", n)
	}
	recs := st.rec.recs()
	if len(recs) != 2*len(spellings)+1 {
		t.Fatalf("%d audit records", len(recs))
	}
	vs := st.gw.store.Snapshot()
	var dec schema.CallDecoder
	var call schema.Call
	for i, r := range recs {
		if r.Decision.Class != schema.M4 && r.Decision.Class != schema.OK {
			t.Errorf("record %d: %s", i, r.Decision.Class)
		}
		if i != len(spellings) && r.Decision.SeenDigest != shown { // change_schema was shown too
			t.Errorf("record %d (%s): seen_digest %q, want the one shown", i, r.Decision.Class, r.Decision.SeenDigest)
		}
		var again schema.Decision
		st.gw.step.Resolver.Decide(vs, &dec, r.Call, &call, &again)
		want := r.Decision
		again.Drift, want.Drift = false, false
		if again != want {
			t.Errorf("record %d decided again:\n%+v\nrecorded:\n%+v", i, again, want)
		}
		if call.SeenDigest != r.Decision.SeenDigest {
			t.Errorf("record %d: the event's seen_digest %q, the decision's %q", i, call.SeenDigest, r.Decision.SeenDigest)
		}
	}
}

// TestSessionGone: the TypeScript SDK's client closes its transport
// without DELETE; its session is closed within session_grace of its
// event stream closing, not session_idle. A client that lives keeps its
// session however long it waits.
func TestSessionGone(t *testing.T) {
	npm := gatewaytest.FindNPM(t)
	const grace = 300 * time.Millisecond
	_, url := httpFixture(t, "web")
	st := start(t, Config{Limits: Limits{SessionGrace: Duration(grace), SessionIdle: Duration(time.Hour)}, Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}}}, Options{})
	outs := npm.RunClient(t, st.url, "",
		gatewaytest.Step{Op: "list"},
		gatewaytest.Step{Op: "wait_changed", TimeoutMS: int(4 * grace / time.Millisecond)},
		gatewaytest.Call("web__echo", `{"message":"still here"}`),
	)
	if o := outs[2]; !o.OK || o.Text() != "echo: still here" {
		t.Fatalf("a call after waiting longer than session_grace: %+v", o)
	}
	begin := time.Now()
	waitFor(t, 10*time.Second, "the session closed", func() bool { return st.gw.sessions.len() == 0 })
	if took := time.Since(begin); took > grace+2*time.Second {
		t.Errorf("the session closed %v after the client exited, session_grace %v", took, grace)
	}
	if got := testutil.ToFloat64(st.gw.m.gone); got != 1 {
		t.Errorf("sessions_gone_total %v", got)
	}
}
