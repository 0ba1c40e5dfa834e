package kafkaconf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tokenEndpoint is an OAuth token endpoint on loopback: the client
// credentials grant for one client, tokens "tok-N" valid for life.
type tokenEndpoint struct {
	*httptest.Server
	clientID, secret string
	post             bool // the client authenticates in the form

	mu       sync.Mutex
	life     time.Duration
	status   int    // answer this status instead of a token (0: a token)
	body     string // with this body
	rejected bool   // tokens issued from now on are refused by the broker
	fetches  int
	issued   map[string]issued
	scopes   []string
}

type issued struct {
	expires  time.Time
	rejected bool
}

func newTokenEndpoint(t *testing.T, life time.Duration) *tokenEndpoint {
	e := &tokenEndpoint{clientID: "toolaudit-prod", secret: "s3cr3t/with+chars", life: life, issued: map[string]issued{}}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func (e *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fetches++
	if e.status != 0 {
		w.WriteHeader(e.status)
		_, _ = w.Write([]byte(e.body))
		return
	}
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	id, secret, basic := r.BasicAuth()
	if e.post {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		basic = false
	}
	if basic {
		// RFC 6749 §2.3.1: form-encoded before Basic.
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	}
	if id != e.clientID || secret != e.secret {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client","error_description":"Client authentication failed"}`))
		return
	}
	e.scopes = append(e.scopes, r.PostForm.Get("scope"))
	tok := fmt.Sprintf("tok-%d", e.fetches)
	e.issued[tok] = issued{expires: time.Now().Add(e.life), rejected: e.rejected}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": e.life.Seconds()})
}

// check is the broker's view of a token: ok, or why not.
func (e *tokenEndpoint) check(tok string) (remaining time.Duration, why string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	is, ok := e.issued[tok]
	switch {
	case !ok:
		return 0, "unknown token"
	case is.rejected:
		return 0, "audience not accepted"
	case !time.Now().Before(is.expires):
		return 0, "expired token"
	}
	return time.Until(is.expires), ""
}

func (e *tokenEndpoint) set(f func(*tokenEndpoint)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(e)
}

// authn is one SASL authentication the broker saw.
type authn struct {
	mechanism string
	token     string            // OAUTHBEARER
	ext       map[string]string // OAUTHBEARER
	payload   map[string]string // AWS_MSK_IAM
	refused   string
}

// saslBroker is a kfake cluster whose SASL handshake and authenticate
// requests are answered by the test (kfake itself knows PLAIN and SCRAM
// only): mechanism is the one it accepts; verify says whether one
// authenticate request's bytes are accepted, returning the response's
// bytes, the session's lifetime (0: none) and, for a refusal, why.
// kfake's own SASL is off (its per-connection state would refuse the
// requests after an authentication it did not run itself), so the hooks
// are the only authentication.
type saslBroker struct {
	*kfake.Cluster
	mu     sync.Mutex
	authns []authn
}

func startSASLBroker(t *testing.T, mechanism string, opts []kfake.Opt, verify func(b []byte) (a authn, resp []byte, lifetime time.Duration)) *saslBroker {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(1, "t")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	b := &saslBroker{Cluster: c}
	c.ControlKey(kmsg.SASLHandshake.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.SASLHandshakeRequest)
		resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
		resp.SupportedMechanisms = []string{mechanism}
		if req.Mechanism != mechanism {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		}
		return resp, nil, true
	})
	c.ControlKey(kmsg.SASLAuthenticate.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := r.(*kmsg.SASLAuthenticateRequest)
		resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		if bytes.Equal(req.SASLAuthBytes, []byte{1}) {
			// RFC 7628 §3.2.3: the client's answer to an error
			// challenge; Kafka then fails the authentication.
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "Authentication failed: invalid_token"
			resp.ErrorMessage = &msg
			return resp, nil, true
		}
		a, out, lifetime := verify(req.SASLAuthBytes)
		a.mechanism = mechanism
		b.mu.Lock()
		b.authns = append(b.authns, a)
		b.mu.Unlock()
		resp.SASLAuthBytes = out
		resp.SessionLifetimeMillis = lifetime.Milliseconds()
		return resp, nil, true
	})
	return b
}

func (b *saslBroker) seen() []authn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]authn(nil), b.authns...)
}

// oauthBroker accepts OAUTHBEARER tokens that e issued and that have not
// expired, for the token's remaining lifetime (as Kafka's
// OAuthBearerValidatorCallbackHandler does: the session ends with the
// token, so franz-go re-authenticates before). A refused token gets RFC
// 7628's error challenge.
func oauthBroker(t *testing.T, e *tokenEndpoint) *saslBroker {
	return startSASLBroker(t, "OAUTHBEARER", nil, func(msg []byte) (authn, []byte, time.Duration) {
		a := parseGS2(t, msg)
		remaining, why := e.check(a.token)
		if why != "" {
			a.refused = why
			return a, []byte(`{"status":"invalid_token"}`), 0
		}
		return a, nil, remaining
	})
}

// parseGS2 reads RFC 7628's client message "n,,\x01auth=Bearer
// TOKEN\x01key=value\x01...\x01".
func parseGS2(t *testing.T, msg []byte) authn {
	s, ok := strings.CutPrefix(string(msg), "n,,\x01")
	if !ok || !strings.HasSuffix(s, "\x01\x01") {
		t.Errorf("OAUTHBEARER message %q: not a GS2 header and fields", msg)
		return authn{}
	}
	a := authn{ext: map[string]string{}}
	for _, kv := range strings.Split(strings.TrimSuffix(s, "\x01\x01"), "\x01") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "auth" {
			a.token, ok = strings.CutPrefix(v, "Bearer ")
			if !ok {
				t.Errorf("auth field %q", v)
			}
			continue
		}
		a.ext[k] = v
	}
	return a
}

func oauthConfig(t *testing.T, e *tokenEndpoint) Config {
	return Config{SASLMechanism: "oauthbearer", OAuth: OAuth{
		TokenURL: e.URL + "/oauth2/token", ClientID: e.clientID, ClientSecretFile: secretFile(t, e.secret+"\n"),
		Scope: "kafka.produce kafka.consume", Extensions: Extensions{"logicalCluster": "lkc-abc123", "identityPoolId": "pool-x1"},
	}}
}

// TestOAuthBearer: franz-go's OAUTHBEARER mechanism fed by the client
// credentials grant connects, produces and consumes; the broker, which
// ends each session when its token expires, sees only valid tokens, with
// the extensions, and a new token well before the first one expires;
// the endpoint is asked a few times, not at every authentication.
func TestOAuthBearer(t *testing.T) {
	e := newTokenEndpoint(t, 3*time.Second)
	b := oauthBroker(t, e)
	cfg := oauthConfig(t, e)
	cl := client(t, cfg, b.Cluster, kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cfg.Check(ctx, cl); err != nil {
		t.Fatalf("Check: %v", err)
	}
	// 6 s: two token lifetimes; the produce connection re-authenticates
	// as its sessions end.
	for end := time.Now().Add(6 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("hello")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	tokens := map[string]bool{}
	authns := b.seen()
	for _, a := range authns {
		if a.refused != "" {
			t.Errorf("the broker refused token %s: %s", a.token, a.refused)
		}
		if a.ext["logicalCluster"] != "lkc-abc123" || a.ext["identityPoolId"] != "pool-x1" || len(a.ext) != 2 {
			t.Errorf("extensions %v", a.ext)
		}
		tokens[a.token] = true
	}
	e.mu.Lock()
	fetches, scopes := e.fetches, e.scopes
	e.mu.Unlock()
	t.Logf("%d authentications, %d tokens, %d fetches", len(authns), len(tokens), fetches)
	if len(tokens) < 3 {
		t.Errorf("%d distinct tokens over two lifetimes: not refreshed", len(tokens))
	}
	if fetches >= len(authns) || fetches > 8 {
		t.Errorf("%d fetches for %d authentications: the token is not cached", fetches, len(authns))
	}
	if scopes[0] != "kafka.produce kafka.consume" {
		t.Errorf("scope %q", scopes[0])
	}
	fs := cl.PollFetches(ctx)
	if err := fs.Err0(); err != nil || len(fs.Records()) == 0 {
		t.Fatalf("consume: %v, %d records", err, len(fs.Records()))
	}
}

// TestOAuthBearerRefused: a refusal by the token endpoint or by the
// broker fails Check at once, naming the one that refused; an endpoint
// that fails for a while (5xx) is waited for, and the error names it.
// No message holds the client secret.
func TestOAuthBearerRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(*tokenEndpoint, *Config)
		refused bool
		want    []string
	}{
		{"wrong client secret", func(e *tokenEndpoint, c *Config) { e.secret = "other" }, true,
			[]string{"token endpoint refused", "HTTP 401", "invalid_client", "Client authentication failed", "/oauth2/token"}},
		{"client auth post to a basic endpoint", func(e *tokenEndpoint, c *Config) { c.OAuth.ClientAuth = ClientAuthPost }, true,
			[]string{"--kafka-sasl-oauth-client-auth", "invalid_client"}},
		{"not a token endpoint", func(e *tokenEndpoint, c *Config) { e.status, e.body = http.StatusNotFound, "<html>not found</html>" }, true,
			[]string{"token endpoint refused", "HTTP 404"}},
		{"token the broker refuses", func(e *tokenEndpoint, c *Config) { e.rejected = true }, true,
			[]string{"broker refused the OAuth token", "SASL_AUTHENTICATION_FAILED", "invalid_token"}},
		{"endpoint unavailable", func(e *tokenEndpoint, c *Config) { e.status, e.body = http.StatusServiceUnavailable, "busy" }, false,
			[]string{"OAuth token endpoint gave no token", "HTTP 503", "deadline"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTokenEndpoint(t, time.Minute)
			b := oauthBroker(t, e)
			cfg := oauthConfig(t, e)
			secret := e.secret
			tc.setup(e, &cfg)
			cl := client(t, cfg, b.Cluster)
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := cfg.Check(ctx, cl)
			if err == nil || errors.Is(err, ErrRefused) != tc.refused {
				t.Fatalf("Check = %v, want refused %v", err, tc.refused)
			}
			if d := time.Since(start); tc.refused && d > time.Second {
				t.Fatalf("refused after %v: a retry loop", d)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check = %v\nwant it to say %q", err, w)
				}
			}
			t.Logf("%v", err)
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the message shows the client secret: %v", err)
			}
		})
	}
}

// TestTokenSourceRefresh: a token is reused until 80% of its lifetime,
// then replaced; a failed refresh hands out the current token while it
// is valid (with a warning), and fails once it is about to expire.
func TestTokenSourceRefresh(t *testing.T) {
	e := newTokenEndpoint(t, 100*time.Second)
	cfg := oauthConfig(t, e)
	var logs bytes.Buffer
	ts, err := newTokenSource(cfg.OAuth, func() (string, error) { return e.secret, nil }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	at := func(d time.Duration) { ts.now = func() time.Time { return t0.Add(d) } }
	for _, step := range []struct {
		at      time.Duration
		down    bool
		token   string // "" an error
		fetches int
	}{
		{0, false, "tok-1", 1},
		{79 * time.Second, false, "tok-1", 1},
		{81 * time.Second, false, "tok-2", 2},
		{160 * time.Second, false, "tok-2", 2},
		{162 * time.Second, true, "tok-2", 3}, // due, the endpoint is down: the current one
		{170 * time.Second, true, "tok-2", 4},
		{177 * time.Second, true, "", 5}, // 4 s before its expiry: no more
		{178 * time.Second, false, "tok-6", 6},
	} {
		at(step.at)
		e.set(func(e *tokenEndpoint) {
			e.status, e.body = 0, ""
			if step.down {
				e.status, e.body = http.StatusBadGateway, "down"
			}
		})
		tok, err := ts.Token(context.Background())
		e.mu.Lock()
		fetches := e.fetches
		e.mu.Unlock()
		if tok != step.token || (err == nil) != (step.token != "") || fetches != step.fetches {
			t.Fatalf("at %v: token %q, %v, %d fetches; want %q, %d fetches", step.at, tok, err, fetches, step.token, step.fetches)
		}
	}
	if !strings.Contains(logs.String(), "refreshing the token failed") || strings.Contains(logs.String(), "tok-") {
		t.Errorf("warnings (with no token in them):\n%s", logs.String())
	}
}

// TestTokenEndpointAnswers: what the endpoint answers is hostile: bounded,
// checked, and its text cleaned before it reaches a log; a redirect is
// not followed (the form holds the secret).
func TestTokenEndpointAnswers(t *testing.T) {
	var elsewhere int
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere++ }))
	defer other.Close()
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		want    string // "" a token
		refused bool
		life    time.Duration
	}{
		{"expires_in as a string", 200, `{"access_token":"eyJ.a-b_c~d+e/f==","token_type":"bearer","expires_in":"3599"}`, "", false, 3599 * time.Second},
		{"no expires_in", 200, `{"access_token":"abc","token_type":"Bearer"}`, "", false, defaultLife},
		{"a year", 200, `{"access_token":"abc","expires_in":31536000}`, "", false, maxLife},
		{"no token", 200, `{"token_type":"Bearer","expires_in":60}`, "no access_token", true, 0},
		{"framing in the token", 200, "{\"access_token\":\"abc\\u0001auth=Bearer x\",\"expires_in\":60}", "b64token", true, 0},
		{"not bearer", 200, `{"access_token":"abc","token_type":"mac","expires_in":60}`, `token_type "mac"`, true, 0},
		{"negative lifetime", 200, `{"access_token":"abc","expires_in":-5}`, "expires_in", true, 0},
		{"not json", 200, `<html>`, "not a token response", true, 0},
		{"too large", 200, `{"access_token":"` + strings.Repeat("a", maxTokenBody) + `"}`, "larger than", true, 0},
		{"error text cleaned", 400, "{\"error\":\"invalid_scope\",\"error_description\":\"bad\\u001b[31m scope " + strings.Repeat("x", 500) + "\"}", "invalid_scope: bad[31m scope xxx", true, 0},
		{"redirect", 302, "", "HTTP 302", true, 0},
		{"rate limited", 429, `{"error":"slow_down"}`, "HTTP 429: slow_down", false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.status == 302 {
					http.Redirect(w, r, other.URL, http.StatusFound)
					return
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			ts, err := newTokenSource(OAuth{TokenURL: srv.URL + "/token?key=q5ecret", ClientID: "c"}, func() (string, error) { return "s", nil }, slog.Default())
			if err != nil {
				t.Fatal(err)
			}
			tok, life, err := ts.fetch(context.Background())
			if tc.want == "" {
				if err != nil || tok == "" || life != tc.life {
					t.Fatalf("fetch = %q, %v, %v; want a token for %v", tok, life, err, tc.life)
				}
				return
			}
			var te *TokenError
			if !errors.As(err, &te) || te.Refused() != tc.refused || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fetch = %v, want a TokenError (refused %v) saying %q", err, tc.refused, tc.want)
			}
			if strings.Contains(err.Error(), "q5ecret") || !strings.Contains(err.Error(), "/token:") {
				t.Errorf("the message shows the URL's query, or not its path: %v", err)
			}
			if len(err.Error()) > 600 || strings.ContainsRune(err.Error(), 0x1b) {
				t.Errorf("error text not bounded or not cleaned: %q", err.Error())
			}
		})
	}
	if elsewhere != 0 {
		t.Errorf("the redirect was followed")
	}
}

// TestExtensions: the repeatable flag's values follow RFC 7628's syntax.
func TestExtensions(t *testing.T) {
	for _, tc := range []struct {
		in, err string
	}{
		{"logicalCluster=lkc-1", ""},
		{"identityPoolId=pool-a b", ""},
		{"noequals", "KEY=VALUE"},
		{"=v", "KEY=VALUE"},
		{"logical_cluster=x", "letters only"},
		{"auth=Bearer x", "token's own"},
		{"k=a\x01b", "printable"},
		{"logicalCluster=again", "twice"},
	} {
		var e Extensions
		if tc.in == "logicalCluster=again" {
			e = Extensions{"logicalCluster": "x"}
		}
		err := e.Set(tc.in)
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("Set(%q) = %v, want %q", tc.in, err, tc.err)
		}
	}
	e := Extensions{}
	_ = e.Set("b=2")
	_ = e.Set("a=1,c=3")
	if e.String() != "a=1,b=2,c=3" {
		t.Errorf("String = %q", e.String())
	}
}

// TestRegisterOAuth: the oauthbearer flags fill Config; the extension
// flag repeats, or takes a list (as one environment variable sets it).
func TestRegisterOAuth(t *testing.T) {
	var c Config
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	c.Register(fs)
	if err := fs.Parse([]string{"--kafka-sasl-mechanism", "oauthbearer", "--kafka-sasl-oauth-token-url", "https://idp.example/token",
		"--kafka-sasl-oauth-client-id", "c", "--kafka-sasl-oauth-scope", "a b", "--kafka-sasl-oauth-client-auth", "post",
		"--kafka-sasl-oauth-extension", "logicalCluster=lkc-1", "--kafka-sasl-oauth-extension", "identityPoolId=pool-1,x=y"}); err != nil {
		t.Fatal(err)
	}
	want := OAuth{TokenURL: "https://idp.example/token", ClientID: "c", Scope: "a b", ClientAuth: ClientAuthPost,
		Extensions: Extensions{"logicalCluster": "lkc-1", "identityPoolId": "pool-1", "x": "y"}}
	if fmt.Sprint(c.OAuth) != fmt.Sprint(want) {
		t.Fatalf("parsed %+v, want %+v", c.OAuth, want)
	}
}

// TestTokenSourceOneFetch: connections authenticating at once (franz-go
// opens several per broker) share one request to the endpoint.
func TestTokenSourceOneFetch(t *testing.T) {
	e := newTokenEndpoint(t, time.Minute)
	ts, err := newTokenSource(oauthConfig(t, e).OAuth, func() (string, error) { return e.secret, nil }, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	toks := make([]string, 20)
	for i := range toks {
		wg.Go(func() { toks[i], _ = ts.Token(context.Background()) })
	}
	wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fetches != 1 || toks[0] != "tok-1" || toks[19] != "tok-1" {
		t.Fatalf("%d fetches, tokens %v", e.fetches, toks)
	}
}

// pingFunc is a Pinger of a test's own.
type pingFunc func(ctx context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

// TestCheckLastError: when the caller's deadline cuts an attempt short
// (a dial under way), the error names the failure of the attempt before
// (here the token endpoint's 503), not the cut dial.
func TestCheckLastError(t *testing.T) {
	calls := 0
	p := pingFunc(func(ctx context.Context) error {
		if calls++; calls == 1 {
			return &TokenError{URL: "https://idp.example/token", Status: http.StatusServiceUnavailable}
		}
		<-ctx.Done()
		return fmt.Errorf("unable to dial: %w", ctx.Err())
	})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := Config{SASLMechanism: "oauthbearer"}.Check(ctx, p)
	if err == nil || !strings.Contains(err.Error(), "OAuth token endpoint gave no token") || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("Check = %v", err)
	}
}
