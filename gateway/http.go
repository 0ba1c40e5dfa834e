package gateway

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/internal/bearer"
)

// sessionHeader is the Streamable HTTP transport's session header.
const sessionHeader = "Mcp-Session-Id"

// Handler serves the MCP endpoint (Streamable HTTP) wherever it is
// mounted: authentication first (401 without a valid bearer token when
// Options.Auth is set; a session stays bound to the client that opened
// it, 403 otherwise), then the limits (a new session beyond
// Limits.MaxSessions is answered 503, a body beyond
// Limits.MaxRequestBytes 413), then the SDK's transport: a request of
// protocol 2026-07-28 or later without a session (its
// Mcp-Protocol-Version header) is served statelessly, as that revision
// is (server/discover, the version and capabilities in each request's
// _meta, subscriptions/listen); any other request by the session-based
// transport of the earlier revisions (initialize, Mcp-Session-Id).
func (g *Gateway) Handler() http.Handler {
	server := func(*http.Request) *mcp.Server { return g.server }
	sessions := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		SessionTimeout:      time.Duration(g.cfg.Limits.SessionIdle),
		MaxRequestBodyBytes: g.cfg.Limits.MaxRequestBytes,
		Logger:              g.log.With("component", "mcp-http"),
	})
	stateless := mcp.NewStreamableHTTPHandler(server, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		MaxRequestBodyBytes: g.cfg.Limits.MaxRequestBytes,
		Logger:              g.log.With("component", "mcp-http"),
	})
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get(sessionHeader) == "" && statelessRevision(r.Header.Get(versionHeader)) {
			stateless.ServeHTTP(w, r)
			return
		}
		sessions.ServeHTTP(w, r)
	})
	h = g.limitSessions(g.trackSessions(h))
	if g.opts.Auth != nil {
		// The SDK binds a session to the user that opened it (a token of
		// another client cannot use its id); its user is the principal
		// authenticate found.
		verify := func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
			return &auth.TokenInfo{UserID: principalFrom(ctx)}, nil
		}
		h = auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
		h = g.authenticate(h)
	}
	return h
}

// versionHeader is the Streamable HTTP transport's protocol version
// header (2025-06-18 on); from 2026-07-28 on it repeats the version of
// the request's _meta.
const versionHeader = "Mcp-Protocol-Version"

// firstStateless is the first revision without sessions (SEP-2575).
// Revisions are dates, so they compare as strings.
const firstStateless = "2026-07-28"

// statelessRevision reports whether a request of protocol version v is
// served without a session.
func statelessRevision(v string) bool { return v >= firstStateless }

// authenticate checks the bearer token and records the client's name.
func (g *Gateway) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, err := g.opts.Auth.Authorize(r)
		if err != nil {
			g.m.refused.WithLabelValues("unauthorized").Inc()
			status, challenge := bearer.Refusal(err, "toolaudit-gateway")
			msg := err.Error()
			if challenge != "" {
				w.Header().Set("WWW-Authenticate", challenge)
				msg += ": send Authorization: Bearer <token>"
			}
			writeError(w, status, msg)
			return
		}
		next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), name)))
	})
}

// limitSessions answers 503 at once to a request that would open a
// session beyond the limit (initialize refuses it too, exactly; this
// spares the SDK building a session to refuse).
func (g *Gateway) limitSessions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get(sessionHeader) == "" && !statelessRevision(r.Header.Get(versionHeader)) && g.sessions.full() {
			g.m.refused.WithLabelValues("sessions").Inc()
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("the gateway has %d sessions open, its limit: retry later", g.cfg.Limits.MaxSessions))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// trackSessions follows what of a session's client is connected (its
// GET event streams, its POSTs in progress), so that a client gone
// without DELETE frees its session within Limits.SessionGrace
// (session.inactive).
func (g *Gateway) trackSessions(next http.Handler) http.Handler {
	grace := time.Duration(g.cfg.Limits.SessionGrace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(sessionHeader)
		s := (*session)(nil)
		if id != "" && (r.Method == http.MethodGet || r.Method == http.MethodPost) {
			s = g.sessions.get(id)
		}
		if s == nil {
			next.ServeHTTP(w, r)
			return
		}
		stream := r.Method == http.MethodGet
		s.active(stream)
		defer s.inactive(stream, grace)
		next.ServeHTTP(w, r)
	})
}

// writeError answers a JSON-RPC error without an id, as the SDK does for
// a request it cannot take.
func writeError(w http.ResponseWriter, status int, msg string) {
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{Error: &jsonrpc.Error{Code: CodeUnavailable, Message: msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
