package kafkaconf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// EnvOAuthClientSecret is the environment variable of the OAuth client
// secret when --kafka-sasl-oauth-client-secret-file is not given.
const EnvOAuthClientSecret = "TOOLAUDIT_KAFKA_SASL_OAUTH_CLIENT_SECRET"

// OAuth client authentication methods (RFC 6749 §2.3.1).
const (
	ClientAuthBasic = "basic" // HTTP Basic, the method every server must support
	ClientAuthPost  = "post"  // client_id and client_secret in the form
)

// OAuth is where oauthbearer gets its tokens: the client credentials grant
// (RFC 6749 §4.4) at a token endpoint.
type OAuth struct {
	// TokenURL is the token endpoint: https, or http to a loopback
	// address only (the client secret crosses it).
	TokenURL string
	ClientID string
	// ClientSecretFile holds the client secret; empty: the variable
	// EnvOAuthClientSecret.
	ClientSecretFile string
	// Scope is the grant's scope parameter; empty: none sent.
	Scope string
	// ClientAuth is ClientAuthBasic (default) or ClientAuthPost.
	ClientAuth string
	// Extensions are the SASL extensions sent with the token (RFC 7628
	// §3.1): Confluent Cloud's logicalCluster and identityPoolId.
	Extensions Extensions
}

func (o OAuth) given() bool {
	return o.TokenURL != "" || o.ClientID != "" || o.ClientSecretFile != "" || o.Scope != "" || len(o.Extensions) > 0 ||
		(o.ClientAuth != "" && o.ClientAuth != ClientAuthBasic)
}

// validate checks o's flags, without reading the secret.
func (o OAuth) validate() error {
	if o.TokenURL == "" || o.ClientID == "" {
		return errors.New("--kafka-sasl-mechanism oauthbearer needs --kafka-sasl-oauth-token-url and --kafka-sasl-oauth-client-id")
	}
	if _, err := tokenURL(o.TokenURL); err != nil {
		return err
	}
	switch o.ClientAuth {
	case "", ClientAuthBasic, ClientAuthPost:
	default:
		return fmt.Errorf("--kafka-sasl-oauth-client-auth %q: want basic or post", o.ClientAuth)
	}
	return nil
}

// tokenURL parses the token endpoint's address: absolute, no user
// information (it would end up in logs), https unless the host is a
// loopback address.
func tokenURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("--kafka-sasl-oauth-token-url: %w", err)
	}
	if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("--kafka-sasl-oauth-token-url %q: want an https:// address", shownURL(u))
	}
	if u.User != nil {
		return nil, errors.New("--kafka-sasl-oauth-token-url: no user information in the address: the client id and secret have their own flags")
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return nil, fmt.Errorf("--kafka-sasl-oauth-token-url %s: the client secret would cross the network in clear text: use https (http only to a loopback address)", shownURL(u))
	}
	return u, nil
}

// shownURL is u for messages and logs: without a query, which could
// hold a key.
func shownURL(u *url.URL) string { return u.Scheme + "://" + u.Host + u.EscapedPath() }

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Extensions are SASL OAUTHBEARER extensions, set by a repeatable
// KEY=VALUE[,KEY=VALUE] flag.
type Extensions map[string]string

// String is the flag's value, sorted.
func (e Extensions) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(e)) {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + e[k])
	}
	return b.String()
}

// Set adds KEY=VALUE, or several separated by commas (a variable such as
// RESOLVERD_KAFKA_SASL_OAUTH_EXTENSION sets a flag once), so a value
// cannot hold a comma. RFC 7628 §3.1: a key is letters only and not
// "auth" (the token's own key); a value is printable characters, spaces
// and tabs (no control character, which would end the field).
func (e *Extensions) Set(s string) error {
	for kv := range strings.SplitSeq(s, ",") {
		if err := e.set(kv); err != nil {
			return err
		}
	}
	return nil
}

func (e *Extensions) set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("extension %q: want KEY=VALUE", s)
	}
	for _, r := range k {
		if (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') {
			return fmt.Errorf("extension key %q: letters only (RFC 7628)", k)
		}
	}
	if strings.EqualFold(k, "auth") {
		return errors.New(`extension key "auth" is the token's own`)
	}
	for _, r := range v {
		if r != ' ' && r != '\t' && (r < 0x21 || r > 0x7e) {
			return fmt.Errorf("extension %s: the value has a character other than printable ASCII, space or tab", k)
		}
	}
	if *e == nil {
		*e = Extensions{}
	}
	if _, dup := (*e)[k]; dup {
		return fmt.Errorf("extension %s given twice", k)
	}
	(*e)[k] = v
	return nil
}

// TokenError is a failure to get a token from the OAuth token endpoint.
// Refused tells a refusal (the endpoint answered that the client, its
// secret or the scope is wrong, or it is not a token endpoint) from a
// failure that can heal (unreachable, 5xx, 429).
type TokenError struct {
	// URL is the endpoint (redacted); Status the HTTP status, 0 when no
	// answer came; Code and Description the RFC 6749 §5.2 error, as
	// the endpoint sent them (bounded, control characters dropped).
	URL               string
	Status            int
	Code, Description string
	// Err is the transport's or the decoder's error, if any.
	Err error
}

func (e *TokenError) Error() string {
	var b strings.Builder
	b.WriteString("kafka oauth token endpoint " + e.URL)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": HTTP %d", e.Status)
	}
	if e.Code != "" {
		b.WriteString(": " + e.Code)
	}
	if e.Description != "" {
		b.WriteString(": " + e.Description)
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

func (e *TokenError) Unwrap() error { return e.Err }

// Refused reports whether retrying cannot help: the endpoint answered
// with a client error other than a timeout or a rate limit, a redirect,
// or a success that holds no usable token.
func (e *TokenError) Refused() bool {
	switch {
	case e.Status == http.StatusRequestTimeout, e.Status == http.StatusTooManyRequests:
		return false
	case e.Status >= 200 && e.Status < 500:
		// A client error, a redirect (not followed), or a success
		// that is not a token: the address or the client is wrong.
		return true
	}
	return false
}

// Bounds of the token endpoint's answers: a token (a JWT of a few KiB) and
// its JSON fit well within maxTokenBody.
const (
	maxTokenBody   = 256 << 10
	tokenTimeout   = 10 * time.Second
	maxErrorText   = 200
	defaultLife    = time.Minute // a token whose answer gives no expires_in
	maxLife        = 24 * time.Hour
	refreshAtRatio = 0.8
	// expiryMargin: a token this close to its expiry is not handed out
	// any more, even when a refresh failed (the broker would refuse it
	// on the way).
	expiryMargin = 5 * time.Second
)

// tokenSource gets tokens by the client credentials grant and caches
// each until refreshAtRatio of its lifetime has passed. It fetches on
// demand (franz-go asks at each new connection and at each
// re-authentication, which the broker schedules before the token
// expires): no goroutine of its own. A failed refresh while the cached
// token is still valid logs a warning and hands out the cached token.
type tokenSource struct {
	url      *url.URL
	shown    string // url without its query, for messages
	clientID string
	secret   func() (string, error)
	scope    string
	post     bool
	client   *http.Client
	log      *slog.Logger
	now      func() time.Time

	mu        sync.Mutex
	token     string
	refreshAt time.Time
	expires   time.Time
}

func newTokenSource(o OAuth, secret func() (string, error), log *slog.Logger) (*tokenSource, error) {
	u, err := tokenURL(o.TokenURL)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A token is fetched every few minutes: no idle connection to keep.
	tr.DisableKeepAlives = true
	tr.ResponseHeaderTimeout = tokenTimeout
	tr.MaxResponseHeaderBytes = 64 << 10
	return &tokenSource{
		url: u, shown: shownURL(u), clientID: o.ClientID, secret: secret, scope: o.Scope, post: o.ClientAuth == ClientAuthPost,
		client: &http.Client{
			Transport: tr,
			Timeout:   tokenTimeout,
			// The form holds the client secret: never re-post it to
			// wherever a redirect points.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		log: log,
		now: time.Now,
	}, nil
}

// Token returns a token valid for a while yet, fetching a new one when
// the cached one is due.
func (s *tokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.token != "" && now.Before(s.refreshAt) {
		return s.token, nil
	}
	token, life, err := s.fetch(ctx)
	if err != nil {
		if s.token != "" && now.Before(s.expires.Add(-expiryMargin)) {
			s.log.Warn("kafka oauth: refreshing the token failed; using the current one until it expires",
				"expires_in", s.expires.Sub(now).Round(time.Second), "err", err)
			return s.token, nil
		}
		return "", err
	}
	s.token = token
	s.refreshAt = now.Add(time.Duration(float64(life) * refreshAtRatio))
	s.expires = now.Add(life)
	return token, nil
}

// fetch asks the endpoint for a token once.
func (s *tokenSource) fetch(ctx context.Context) (string, time.Duration, error) {
	fail := func(status int, err error) (string, time.Duration, error) {
		return "", 0, &TokenError{URL: s.shown, Status: status, Err: err}
	}
	secret, err := s.secret()
	if err != nil {
		return fail(0, fmt.Errorf("client secret: %w", err))
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if s.scope != "" {
		form.Set("scope", s.scope)
	}
	if s.post {
		form.Set("client_id", s.clientID)
		form.Set("client_secret", secret)
	}
	ctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return fail(0, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if !s.post {
		// RFC 6749 §2.3.1: both form-encoded, then Basic.
		req.SetBasicAuth(url.QueryEscape(s.clientID), url.QueryEscape(secret))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is already said
		}
		return fail(0, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenBody+1))
	if err != nil {
		return fail(resp.StatusCode, fmt.Errorf("reading the answer: %w", err))
	}
	if len(body) > maxTokenBody {
		return fail(resp.StatusCode, fmt.Errorf("the answer is larger than %d bytes", maxTokenBody))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code        string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e) // not JSON: the status alone says it
		return "", 0, &TokenError{URL: s.shown, Status: resp.StatusCode, Code: clean(e.Code), Description: clean(e.Description)}
	}
	var t struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &t); err != nil {
		return fail(resp.StatusCode, fmt.Errorf("the answer is not a token response: %w", err))
	}
	if t.AccessToken == "" {
		return fail(resp.StatusCode, errors.New("the answer has no access_token"))
	}
	if !b64token(t.AccessToken) {
		return fail(resp.StatusCode, errors.New("the access_token has characters a bearer token cannot have (RFC 6750 b64token)"))
	}
	if t.TokenType != "" && !strings.EqualFold(t.TokenType, "bearer") {
		return fail(resp.StatusCode, fmt.Errorf("token_type %q: want Bearer", clean(t.TokenType)))
	}
	life, err := lifetime(t.ExpiresIn)
	if err != nil {
		return fail(resp.StatusCode, err)
	}
	return t.AccessToken, life, nil
}

// lifetime reads expires_in: seconds, a number or (some endpoints) a
// string of one; absent: defaultLife; clamped to maxLife.
func lifetime(raw json.RawMessage) (time.Duration, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return defaultLife, nil
	}
	s := string(raw)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("expires_in %.20q: want a positive number of seconds", string(raw))
	}
	return min(time.Duration(n*float64(time.Second)), maxLife), nil
}

// b64token is RFC 6750's token syntax: 1*( ALPHA / DIGIT / "-" / "." /
// "_" / "~" / "+" / "/" ) *"=". It keeps the GS2 message's framing
// (fields end at \x01) intact.
func b64token(s string) bool {
	t := strings.TrimRight(s, "=")
	if t == "" {
		return false
	}
	for _, r := range t {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-._~+/", r):
		default:
			return false
		}
	}
	return true
}

// clean makes text from the endpoint fit for a log line: printable
// ASCII, at most maxErrorText bytes.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= maxErrorText {
			b.WriteString("…")
			break
		}
		if r >= 0x20 && r < 0x7f {
			b.WriteRune(r)
		}
	}
	return b.String()
}
