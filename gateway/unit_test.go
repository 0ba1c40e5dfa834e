package gateway

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/schema"
)

// TestAuth: without a valid token nothing is served; a client's calls
// carry its name as agent_id; a session cannot be used with another
// client's token.
func TestAuth(t *testing.T) {
	_, url := httpFixture(t, "web")
	file := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(file, []byte("# the API's tokens file\nalice: token-of-alice-0123456789\nbob: token-of-bob-0123456789\n"), 0o600)
	tokens, err := bearer.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := start(t, Config{Upstreams: []Upstream{{Name: "web", Trust: 1, URL: url}}}, Options{Auth: tokens})
	for _, h := range []string{"", "Bearer nope", "Basic token-of-alice-0123456789"} {
		req, _ := http.NewRequest(http.MethodPost, st.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("Authorization %q: HTTP %d", h, resp.StatusCode)
		}
	}
	alice := connect(t, st.url, http.Header{"Authorization": {"Bearer token-of-alice-0123456789"}})
	alice.list(t)
	if _, je := alice.call(t, "web__echo", `{"message":"hi"}`); je != nil {
		t.Fatal(je)
	}
	var dec schema.CallDecoder
	var c schema.Call
	if err := dec.Decode(st.rec.recs()[0].Call, &c); err != nil || c.AgentID != "alice" {
		t.Errorf("agent_id %q (%v)", c.AgentID, err)
	}
	// Bob presents Alice's session id.
	req, _ := http.NewRequest(http.MethodPost, st.url, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer token-of-bob-0123456789")
	req.Header.Set(sessionHeader, alice.cs.ID())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("another client's session: HTTP %d", resp.StatusCode)
	}
	// A tokens file without tokens refuses everyone: 403.
	os.WriteFile(file, []byte("# nobody\n"), 0o600)
	if err := tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	req, _ = http.NewRequest(http.MethodPost, st.url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer token-of-alice-0123456789")
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("no tokens configured: HTTP %d", resp.StatusCode)
	}
}

// TestUnusableListing: a listing the registry would refuse whole
// withdraws the server (op remove) instead of keeping its old tools; an
// identical relisting is not produced again.
func TestUnusableListing(t *testing.T) {
	rec := &recorder{}
	gw, err := New(Options{Config: Config{Upstreams: []Upstream{{Name: "s", Trust: 1, URL: "http://127.0.0.1:1"}}}, Listings: rec, Audit: rec})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	good := []*mcp.Tool{{Name: "a", InputSchema: map[string]any{"type": "object"}}}
	twice := []*mcp.Tool{good[0], good[0]}
	steps := []struct {
		tools    []*mcp.Tool
		listings int
		op       schema.Op
		shown    int
	}{
		{good, 1, schema.OpSnapshot, 1},
		{good, 1, schema.OpSnapshot, 1}, // unchanged: not produced
		{twice, 2, schema.OpRemove, 0},
		{twice, 2, schema.OpRemove, 0},
		{good, 3, schema.OpSnapshot, 1},
	}
	for i, s := range steps {
		if err := gw.record(ctx, "s", s.tools); err != nil {
			t.Fatal(err)
		}
		ls := rec.lists()
		if len(ls) != s.listings || ls[len(ls)-1].Op != s.op || len(gw.cat.Load().tools) != s.shown {
			t.Fatalf("step %d: %d listings, last %s, %d tools shown", i, len(ls), ls[len(ls)-1].Op, len(gw.cat.Load().tools))
		}
	}
}

// TestClock: listings are strictly increasing in milliseconds and a call
// is never stamped before the latest listing, whatever the wall clock.
func TestClock(t *testing.T) {
	base := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	now := base
	c := &clock{now: func() time.Time { return now }}
	l1, l2 := c.listing(), c.listing()
	if !l2.After(l1) || l2.Sub(l1) != time.Millisecond {
		t.Errorf("listings %v %v", l1, l2)
	}
	now = base.Add(-time.Hour) // the wall clock stepped back
	if got := c.call(); got.Before(l2) {
		t.Errorf("call %v before listing %v", got, l2)
	}
	now = base.Add(time.Second + 1234567)
	if got := c.call(); !got.Equal(base.Add(time.Second + time.Millisecond)) {
		t.Errorf("call %v: not the wall clock in milliseconds", got)
	}
}

// TestConfig reads the good and bad configurations of testdata/config.
func TestConfig(t *testing.T) {
	files, _ := filepath.Glob("testdata/config/*.yaml")
	if len(files) < 10 {
		t.Fatalf("%d configurations in testdata/config", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// The first line of a bad file says what the error must say.
			first, _, _ := strings.Cut(string(b), "\n")
			want, bad := strings.CutPrefix(first, "# error: ")
			_, err = ParseConfig(b)
			switch {
			case bad && err == nil:
				t.Fatalf("accepted; want an error saying %q", want)
			case bad && !strings.Contains(err.Error(), want):
				t.Fatalf("error %q; want it to say %q", err, want)
			case !bad && err != nil:
				t.Fatal(err)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte("upstreams: [{name: a, command: [x]}]"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Registry != DefaultRegistry || c.Separator != "__" || c.Mode != "strict" || c.Formats != "annotate" || c.Limits.MaxSessions != DefaultMaxSessions ||
		time.Duration(c.Limits.UpstreamTimeout) != DefaultUpstreamTimeout || c.Upstreams[0].Trust != 0 ||
		time.Duration(c.ListTTL) != DefaultListTTL || time.Duration(c.PollTools) != DefaultPollTools || time.Duration(c.Limits.SessionGrace) != DefaultSessionGrace {
		t.Errorf("defaults %+v", c)
	}
	env := c.Upstreams[0]
	env.Env = map[string]string{"HOME": "/h", "X": "1"}
	env.InheritEnv = []string{"PROXY"}
	got := strings.Join(env.environ(func(k string) string {
		return map[string]string{"PATH": "/bin", "HOME": "/root", "PROXY": "p", "SECRET": "s"}[k]
	}), " ")
	if got != "PATH=/bin PROXY=p HOME=/h X=1" {
		t.Errorf("environment %q", got)
	}
}
