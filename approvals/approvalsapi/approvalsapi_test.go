package approvalsapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/approvals/topic"
	"github.com/toolaudit/toolaudit/internal/bearer"
)

const (
	aliceToken = "alice-token-0123456789"
	agentToken = "agent-token-0123456789"
	digest     = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
)

// TestApprovalsAPI: over real HTTP against a kfake approvals topic, an
// approver's token writes the approval, by its name, and the answer
// carries the baseline version; every other request is refused and
// writes nothing (a token valid for the API but not an approver's with
// 403, not 401); a topic that cannot take it is a 503 with Retry-After.
func TestApprovalsAPI(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "wide"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(kf.ListenAddrs()...)}
	ctx := context.Background()
	if err := topic.Ensure(ctx, opts, topic.Default); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "approvers")
	os.WriteFile(tf, []byte("alice:"+aliceToken+"\n"), 0o600)
	approvers, err := bearer.Load(tf, nil)
	if err != nil {
		t.Fatal(err)
	}
	af := filepath.Join(t.TempDir(), "tokens") // the API's: the agent's and alice's
	os.WriteFile(af, []byte("agent:"+agentToken+"\nalice:"+aliceToken+"\n"), 0o600)
	apiTokens, err := bearer.Load(af, nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(t string) (*httptest.Server, *handler) {
		h, err := New(Config{Approvers: approvers, Tokens: apiTokens, Registerer: prometheus.NewRegistry(), Now: func() time.Time { return time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC) },
			Write: func(ctx context.Context, e *approvals.Event) (int64, error) { return topic.Produce(ctx, opts, t, e) }})
		if err != nil {
			panic(err)
		}
		return httptest.NewServer(h), h.(*handler)
	}
	s, h := serve(topic.Default)
	defer s.Close()
	good := `{"registry":"prod","server":"mail","tool":"send","digest":"` + digest + `","verb":"approve","reason":"reviewed in #7"}`
	var header http.Header // of the last answer
	post := func(url, method, token, body string) (int, string) {
		req, _ := http.NewRequest(method, url+Path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		header = resp.Header
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, method, token, body string
		status                    int
		msg                       string
	}{
		{"get", "GET", aliceToken, "", 405, "use POST"},
		{"no token", "POST", "", good, 401, "missing bearer token"},
		{"not an approver", "POST", agentToken, good, 403, `"error":"not_approver","message":"not an approver: the token \"agent\" is valid for /v1/resolve`},
		{"no one's token", "POST", "stranger-token-0123456789", good, 401, "invalid bearer token"},
		{"not json", "POST", aliceToken, `{`, 400, "request"},
		{"repeated member", "POST", aliceToken, strings.Replace(good, `"tool":"send"`, `"tool":"send","tool":"x"`, 1), 400, "repeated"},
		{"by from the client", "POST", aliceToken, strings.Replace(good, `{`, `{"by":"mallory",`, 1), 400, `unknown member \"by\"`},
		{"no reason", "POST", aliceToken, strings.Replace(good, `"reason":"reviewed in #7"`, `"reason":""`, 1), 400, "reason missing"},
		{"bad digest", "POST", aliceToken, strings.Replace(good, digest, "sha256:abc", 1), 400, "is not sha256:"},
		{"bad verb", "POST", aliceToken, strings.Replace(good, `"approve"`, `"allow"`, 1), 400, "is not approve, reject or revoke"},
		{"too large", "POST", aliceToken, `{"reason":"` + strings.Repeat("x", maxBody) + `"}`, 400, "too large"},
	} {
		if status, body := post(s.URL, tc.method, tc.token, tc.body); status != tc.status || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %s, want %d and %q", tc.name, status, body, tc.status, tc.msg)
		}
	}
	set, _, err := topic.Load(ctx, opts, topic.Default, nil)
	if err != nil || set.Version() != 0 {
		t.Fatalf("refused requests wrote: version %d, %v", set.Version(), err)
	}
	status, body := post(s.URL, "POST", aliceToken, good)
	var got map[string]any
	if status != 200 || json.Unmarshal([]byte(body), &got) != nil || got["by"] != "alice" || got["baseline_version"] != 1.0 || got["at"] != "2026-12-01T10:00:00.000Z" {
		t.Fatalf("approve: %d %s", status, body)
	}
	set, _, err = topic.Load(ctx, opts, topic.Default, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := set.Snapshot().Lookup("prod", "mail", "send", digest); e == nil || e.State != approvals.Approved || e.By != "alice" || e.Reason != "reviewed in #7" {
		t.Fatalf("in the topic: %+v", e)
	}
	if n := testutil.ToFloat64(h.written.WithLabelValues("approve")); n != 1 {
		t.Errorf("approve counted %v", n)
	}
	if n := testutil.ToFloat64(h.written.WithLabelValues("forbidden")); n != 1 {
		t.Errorf("forbidden counted %v", n)
	}
	// A topic that cannot take it: 503, nothing in force.
	bad, _ := serve("wide")
	defer bad.Close()
	if status, body := post(bad.URL, "POST", aliceToken, good); status != 503 || !strings.HasPrefix(body, `{"error":"approvals_unavailable","message":"the approval was not recorded: `) {
		t.Fatalf("wide topic: %d %s", status, body)
	}
	// The /v1 envelope's headers, as /v1/resolve answers them: a 503
	// says when to retry.
	for k, v := range map[string]string{"Retry-After": "1", "Content-Type": "application/json", "Cache-Control": "no-store"} {
		if got := header.Get(k); got != v {
			t.Errorf("503 %s: %q, want %q", k, got, v)
		}
	}
}
