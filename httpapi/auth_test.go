package httpapi

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/bearer"
)

const (
	tokenA = "client-a-0123456789abcdef"
	tokenB = "client-b-0123456789abcdef"
)

func tokensFile(t *testing.T, content string) (*bearer.Tokens, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	tk, err := bearer.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tk, path
}

// TestAuth: with tokens, /v1/* needs one (401 JSON without or with a bad
// one, 403 when the file lists none); probes and metrics stay open unless
// AuthProbes.
func TestAuth(t *testing.T) {
	tk, path := tokensFile(t, "a:"+tokenA+"\n")
	empty, _ := tokensFile(t, "# nobody yet\n")
	open, _ := server(t, Config{Tokens: tk})
	closed, _ := server(t, Config{Tokens: tk, AuthProbes: true})
	none, _ := server(t, Config{Tokens: empty})
	call := `{"event_id":"x"}`
	for _, tc := range []struct {
		name, url, method, path, auth string
		status                        int
		code, challenge               string
	}{
		{"no token", open.URL, "POST", "/v1/resolve", "", 401, "unauthorized", `Bearer realm="toolaudit"`},
		{"bad token", open.URL, "POST", "/v1/resolve", "Bearer " + tokenB, 401, "unauthorized", `Bearer realm="toolaudit", error="invalid_token"`},
		{"basic auth", open.URL, "POST", "/v1/resolve", "Basic YTpi", 401, "unauthorized", `Bearer realm="toolaudit"`},
		{"good token", open.URL, "POST", "/v1/resolve", "Bearer " + tokenA, 200, "", ""},
		{"unknown /v1 path, no token", open.URL, "GET", "/v1/other", "", 401, "unauthorized", `Bearer realm="toolaudit"`},
		{"unknown /v1 path, token", open.URL, "GET", "/v1/other", "Bearer " + tokenA, 404, "not_found", ""},
		{"healthz open", open.URL, "GET", "/healthz", "", 200, "", ""},
		{"metrics open", open.URL, "GET", "/metrics", "", 200, "", ""},
		{"healthz closed", closed.URL, "GET", "/healthz", "", 401, "unauthorized", `Bearer realm="toolaudit"`},
		{"readyz closed", closed.URL, "GET", "/readyz", "", 401, "unauthorized", `Bearer realm="toolaudit"`},
		{"metrics closed", closed.URL, "GET", "/metrics", "Bearer " + tokenB, 401, "unauthorized", `Bearer realm="toolaudit", error="invalid_token"`},
		{"metrics closed, token", closed.URL, "GET", "/metrics", "Bearer " + tokenA, 200, "", ""},
		{"no tokens configured", none.URL, "POST", "/v1/resolve", "Bearer " + tokenA, 403, "forbidden", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.url+tc.path, strings.NewReader(call))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			r := do(t, req)
			if r.status != tc.status || r.header.Get("WWW-Authenticate") != tc.challenge {
				t.Fatalf("status %d, WWW-Authenticate %q: %s", r.status, r.header.Get("WWW-Authenticate"), r.body)
			}
			if tc.code != "" && r.decision(t)["error"] != tc.code {
				t.Fatalf("error %s", r.body)
			}
		})
	}
	// A new file, reloaded: the old token is refused, the new one taken.
	if err := os.WriteFile(path, []byte("b:"+tokenB+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tk.Reload(); err != nil {
		t.Fatal(err)
	}
	for tok, want := range map[string]int{tokenA: 401, tokenB: 200} {
		req, _ := http.NewRequest("POST", open.URL+"/v1/resolve", strings.NewReader(call))
		req.Header.Set("Authorization", "Bearer "+tok)
		if r := do(t, req); r.status != want {
			t.Fatalf("after reload, %s: status %d, want %d", tok[:8], r.status, want)
		}
	}
}
