// Package resolveclient is a small client of resolverd's resolve API
// (POST /v1/resolve, api/openapi.yaml), for hosts that put toolaudit in
// their agents' call path: Resolve asks for the verdict on a call, and
// Guard wraps a tool executor so that a call runs only when allowed.
//
// Guard fails closed: when the API cannot answer (unreachable, or 503
// because its audit trail did not take the decision), the call does not
// run and the error says why. A host that prefers to fail open handles
// that error itself with Resolve.
//
// # Its own module
//
// resolveclient is the module github.com/toolaudit/toolaudit/resolveclient
// (as franz-go's kadm and kfake are), which needs only the standard
// library: a host that imports it pulls in none of resolverd's
// dependencies (Kafka, ClickHouse, Kubernetes, compose-go). Its tests
// against the real server live in the main module (package httpapi's
// client_test.go and Example_resolveclientGuard), whose go.mod replaces
// this module by its directory, so that the client and the server of one
// commit are tested together; `make test` vets, checks (staticcheck, go
// mod tidy -diff) and tests this module as well.
package resolveclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Call is a call event of the wire contract (v1): what the model emitted
// and its context.
type Call struct {
	EventID    string          `json:"event_id"`
	EmittedAt  time.Time       `json:"emitted_at"`
	Registry   string          `json:"registry"`
	AgentID    string          `json:"agent_id,omitempty"`
	SessionID  string          `json:"session_id,omitempty"`
	Model      string          `json:"model,omitempty"`
	Provider   string          `json:"provider,omitempty"`
	Surface    string          `json:"surface,omitempty"`
	Tool       string          `json:"tool"`
	Server     string          `json:"server,omitempty"`
	Arguments  json.RawMessage `json:"arguments"`
	SeenDigest string          `json:"seen_digest,omitempty"`
	Visible    []string        `json:"visible,omitempty"`
}

// MarshalJSON writes the event with "type":"call" and emitted_at in
// RFC 3339 UTC with milliseconds, as the contract spells it.
func (c Call) MarshalJSON() ([]byte, error) {
	type plain Call
	return json.Marshal(struct {
		Type      string `json:"type"`
		EmittedAt string `json:"emitted_at"`
		plain
	}{"call", c.EmittedAt.UTC().Format("2006-01-02T15:04:05.000Z"), plain(c)})
}

// Decision is the API's answer for one call.
type Decision struct {
	EventID         string    `json:"event_id"`
	Verdict         string    `json:"verdict"` // allow or reject
	Class           string    `json:"class"`   // OK, H1..H5, M1..M5, MALFORMED
	Reason          string    `json:"reason"`
	Path            string    `json:"path"`
	Coercible       bool      `json:"coercible,omitempty"`
	ResolvedServer  string    `json:"resolved_server"`
	ResolvedTool    string    `json:"resolved_tool"`
	RegistryVersion string    `json:"registry_version"`
	Drift           bool      `json:"drift"`
	SeenDigest      string    `json:"seen_digest,omitempty"`
	CurrentDigest   string    `json:"current_digest,omitempty"`
	Approval        string    `json:"approval,omitempty"`         // under an approvals policy: approved, unapproved, rejected or new
	BaselineVersion string    `json:"baseline_version,omitempty"` // the approved baseline's version that decided it
	SuggestedTool   string    `json:"suggested_tool"`
	ResolverBuild   string    `json:"resolver_build"`
	PolicyVersion   string    `json:"policy_version"`
	DecidedAt       time.Time `json:"decided_at"`
	Source          string    `json:"source"`
	Action          string    `json:"action"`
	Hints           Hints     `json:"hints"`
}

// Allowed reports whether the call may run.
func (d *Decision) Allowed() bool { return d.Verdict == "allow" }

// Hints tell how to correct a rejected call.
type Hints struct {
	Tools    []string        `json:"tools,omitempty"`    // H1, M1: nearest valid names; M2, M3: names to pin
	Keys     []string        `json:"keys,omitempty"`     // H2: declared keys nearest to the undeclared one
	Missing  []string        `json:"missing,omitempty"`  // H2: required keys missing
	Expected json.RawMessage `json:"expected,omitempty"` // H3: what the schema requires at path
}

// Error is an error answer of the API.
type Error struct {
	Status     int
	Code       string // bad_request, unauthorized, ..., audit_unavailable
	Message    string
	RetryAfter time.Duration // from Retry-After, on 503
}

func (e *Error) Error() string {
	return fmt.Sprintf("resolve API: %d %s: %s", e.Status, e.Code, e.Message)
}

// Temporary reports whether retrying later may succeed (503).
func (e *Error) Temporary() bool { return e.Status == http.StatusServiceUnavailable }

// Client calls one resolverd. It is safe for concurrent use.
type Client struct {
	base   string
	hc     *http.Client
	token  string
	mode   string
	action string
}

// Option configures New.
type Option func(*Client)

// WithToken sends "Authorization: Bearer token".
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc (TLS settings, timeouts); default: a client with
// a 10s timeout.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithMode asks for "strict" or "pin-assisted" resolution (?mode=).
func WithMode(mode string) Option { return func(c *Client) { c.mode = mode } }

// WithAction reports what the host does with the verdicts: "enforced" or
// "observed" (?action=). Guard always reports "enforced".
func WithAction(action string) Option { return func(c *Client) { c.action = action } }

// New returns a client of the API at baseURL ("http://127.0.0.1:8080").
func New(baseURL string, opts ...Option) *Client {
	c := &Client{base: strings.TrimSuffix(baseURL, "/"), hc: &http.Client{Timeout: 10 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Resolve asks for the decision on one call.
func (c *Client) Resolve(ctx context.Context, call Call) (Decision, error) {
	var d Decision
	err := c.post(ctx, c.action, call, &d)
	return d, err
}

// ResolveBatch asks for the decisions on several calls (at most the
// server's --http-max-batch, default 100), in the same order.
func (c *Client) ResolveBatch(ctx context.Context, calls []Call) ([]Decision, error) {
	var ds []Decision
	if err := c.post(ctx, c.action, calls, &ds); err != nil {
		return nil, err
	}
	if len(ds) != len(calls) {
		return nil, fmt.Errorf("resolve API: %d decisions for %d calls", len(ds), len(calls))
	}
	return ds, nil
}

func (c *Client) post(ctx context.Context, action string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	q := url.Values{}
	if c.mode != "" {
		q.Set("mode", c.mode)
	}
	if action != "" {
		q.Set("action", action)
	}
	u := c.base + "/v1/resolve"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("resolve API: %w", err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("resolve API: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		e := &Error{Status: resp.StatusCode}
		var m struct{ Error, Message string }
		if json.Unmarshal(rb, &m) == nil {
			e.Code, e.Message = m.Error, m.Message
		} else {
			e.Message = strings.TrimSpace(string(rb))
		}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		return e
	}
	if err := json.Unmarshal(rb, out); err != nil {
		return fmt.Errorf("resolve API: answer: %w", err)
	}
	return nil
}

// Executor runs a tool call and returns its result.
type Executor func(ctx context.Context, call Call) (json.RawMessage, error)

// RejectedError is Guard's error for a call the resolver rejected: the
// call did not run. Its message (class, reason, path, hints) is meant to
// be given back to the model so that it can correct the call.
type RejectedError struct{ Decision Decision }

func (e *RejectedError) Error() string {
	d := &e.Decision
	var b strings.Builder
	fmt.Fprintf(&b, "tool call rejected (%s): %s", d.Class, d.Reason)
	if d.Path != "" {
		fmt.Fprintf(&b, " at %s", d.Path)
	}
	h := &d.Hints
	if len(h.Tools) > 0 {
		fmt.Fprintf(&b, "; valid tools: %s", strings.Join(h.Tools, ", "))
	}
	if len(h.Keys) > 0 {
		fmt.Fprintf(&b, "; did you mean: %s", strings.Join(h.Keys, ", "))
	}
	if len(h.Missing) > 0 {
		fmt.Fprintf(&b, "; missing: %s", strings.Join(h.Missing, ", "))
	}
	if len(h.Expected) > 0 {
		fmt.Fprintf(&b, "; expected: %s", h.Expected)
	}
	return b.String()
}

// Guard returns an executor that asks the API first and runs exec only
// for an allowed call, reporting the verdicts as enforced. A rejection is
// a *RejectedError; an API that cannot answer is its error (*Error, or a
// transport error), and the call does not run either (fail closed).
func (c *Client) Guard(exec Executor) Executor {
	return func(ctx context.Context, call Call) (json.RawMessage, error) {
		var d Decision
		if err := c.post(ctx, "enforced", call, &d); err != nil {
			return nil, err
		}
		if !d.Allowed() {
			return nil, &RejectedError{Decision: d}
		}
		return exec(ctx, call)
	}
}

// IsRejected reports whether err is a rejection by the resolver (as
// opposed to the API failing).
func IsRejected(err error) bool {
	var r *RejectedError
	return errors.As(err, &r)
}
