package gateway

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// m4Text calls rug__transfer with the arguments of its second definition
// and returns the text and decision of the M4 it must be.
func m4Text(t *testing.T, c *client, meta mcp.Meta) (string, answer) {
	t.Helper()
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "rug__transfer", Arguments: json.RawMessage(`{"to":"bob","amount":5,"cc":"eve"}`), Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	var a answer
	b, _ := json.Marshal(res.Meta[MetaDecision])
	json.Unmarshal(b, &a)
	if !res.IsError || a.Class != "M4" {
		t.Fatalf("not an M4: isError %v, %+v, %q", res.IsError, a, text)
	}
	return text, a
}

// duration reads the duration after prefix in text (Go's notation).
func duration(t *testing.T, text, prefix string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(regexp.QuoteMeta(prefix) + ` ([0-9][0-9a-zµ.]*)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no %q in %q", prefix, text)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("%q in %q: %v", prefix, text, err)
	}
	return d
}

// TestM4TextStateless: an anonymous client without a session (protocol
// 2026-07-28, Go SDK) that lists only after a change and calls within
// list_ttl is refused (M4: it cannot be told from a client that holds the
// earlier listing), and the text says what the gateway knows, not that
// the client was shown a digest: when the definition changed, that a
// client without a session may hold the earlier one for list_ttl, and
// the remedies (list again and retry after the time the text gives,
// which is then served; send the digest held in _meta; authenticate).
// One that sends the digest it holds in _meta is told that digest, as
// sent.
func TestM4TextStateless(t *testing.T) {
	const ttl = 3 * time.Second
	_, url := httpFixture(t, "rug")
	st := start(t, Config{ListTTL: Duration(ttl), Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{})
	old := st.gw.cat.Load().lookup("rug__transfer").digest
	changer := connect(t, st.url, nil)
	if _, rej := changer.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	changed := st.gw.cat.Load().at

	c := connectRevision(t, st.url, nil, stateless)
	if c.cs.ID() != "" {
		t.Fatalf("a session id under %s", stateless)
	}
	if got := c.list(t)["rug__transfer"].Meta[MetaDigest]; got == old {
		t.Fatal("listed after the change, shown the earlier definition")
	}
	text, a := m4Text(t, c, nil)
	elapsed := time.Since(changed)
	if a.SeenDigest != old {
		t.Errorf("seen_digest %s, want the earlier definition's %s", a.SeenDigest, old)
	}
	for _, never := range []string{old, "shown", "sha256:"} {
		if strings.Contains(text, never) {
			t.Errorf("the text says %q: %q", never, text)
		}
	}
	for _, want := range []string{"rug__transfer", "without a session", "list_ttl (3s)", "tools/list", "_meta", MetaDigest, "authenticat"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q: %q", want, text)
		}
	}
	if age := duration(t, text, "changed"); age < 0 || age > elapsed+time.Millisecond {
		t.Errorf("changed %v ago, the change was %v ago", age, elapsed)
	}
	after := duration(t, text, "retry after")
	if after > ttl || after < ttl-elapsed-time.Second {
		t.Errorf("retry after %v: list_ttl %v, %v after the change", after, ttl, elapsed)
	}

	// The digest held, sent in _meta: named as sent, not as shown.
	claimed, _ := m4Text(t, c, mcp.Meta{MetaDigest: old})
	if !strings.Contains(claimed, old) || !strings.Contains(claimed, "_meta") || strings.Contains(claimed, "shown") {
		t.Errorf("claiming %s: %q", old, claimed)
	}

	// The time given is true: after it, listing again, the call is served.
	time.Sleep(after)
	c.list(t)
	if got, rej := c.call(t, "rug__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); rej != nil || got != "sent 5 to bob" {
		t.Fatalf("retried after %v: %q %+v", after, got, rej)
	}
}

// TestM4TextSession: a client whose session was shown the earlier
// definition is told the digest it was shown, the current one and how
// long ago it changed, and to list again (which counts at once: no time
// to wait); a session that has not listed is told to list in it.
func TestM4TextSession(t *testing.T) {
	_, url := httpFixture(t, "rug")
	st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{})
	c := connect(t, st.url, nil)
	old := c.list(t)["rug__transfer"].Meta[MetaDigest].(string)
	if _, rej := c.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	changed := st.gw.cat.Load().at
	now := st.gw.cat.Load().lookup("rug__transfer").digest

	text, _ := m4Text(t, c, nil)
	elapsed := time.Since(changed)
	for _, want := range []string{"shown " + old, "now " + now, "tools/list"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q: %q", want, text)
		}
	}
	if age := duration(t, text, "changed"); age < 0 || age > elapsed+time.Millisecond {
		t.Errorf("changed %v ago, the change was %v ago", age, elapsed)
	}
	if strings.Contains(text, "retry after") {
		t.Errorf("a session's relisting counts at once: %q", text)
	}

	fresh := connect(t, st.url, nil)
	text, _ = m4Text(t, fresh, nil)
	for _, never := range []string{old, "shown"} {
		if strings.Contains(text, never) {
			t.Errorf("a session that has not listed: the text says %q: %q", never, text)
		}
	}
	if !strings.Contains(text, "has not listed") || strings.Contains(text, "retry after") {
		t.Errorf("a session that has not listed: %q", text)
	}
	fresh.list(t)
	if got, rej := fresh.call(t, "rug__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); rej != nil || got != "sent 5 to bob" {
		t.Fatalf("after it listed: %q %+v", got, rej)
	}
}

// TestM4TextAuthenticated: an authenticated client without a session
// that has not listed since a change is told so, not that it was shown
// a digest, and to list again, which counts at once (no time to wait).
func TestM4TextAuthenticated(t *testing.T) {
	_, url := httpFixture(t, "rug")
	tokens, header := aliceTokens(t)
	st := start(t, Config{Upstreams: []Upstream{{Name: "rug", Trust: 1, URL: url}}}, Options{Auth: tokens})
	c := connectRevision(t, st.url, header, stateless)
	old := c.list(t)["rug__transfer"].Meta[MetaDigest].(string)
	if _, rej := c.call(t, "rug__change_schema", `{}`); rej != nil {
		t.Fatal(rej.Message)
	}
	st.waitChanged(t, "rug__transfer")
	text, _ := m4Text(t, c, nil)
	for _, never := range []string{old, "shown", "retry after"} {
		if strings.Contains(text, never) {
			t.Errorf("the text says %q: %q", never, text)
		}
	}
	for _, want := range []string{"(alice) has not listed the tools since", "list_ttl (1m0s)", "tools/list", MetaDigest} {
		if !strings.Contains(text, want) {
			t.Errorf("the text lacks %q: %q", want, text)
		}
	}
	// The SDK keeps a listing for its ttlMs unless told of a change.
	select {
	case <-c.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed reached the client")
	}
	c.list(t)
	if got, rej := c.call(t, "rug__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); rej != nil || got != "sent 5 to bob" {
		t.Fatalf("after it listed: %q %+v", got, rej)
	}
}
