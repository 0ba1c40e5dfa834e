package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifyTool is never listed nor called: re-adding it is how the SDK is
// made to send notifications/tools/list_changed to every session (it
// has no other way to send one), debounced by 10ms. tools/list and
// tools/call are answered by the gateway's middleware, never by the
// SDK's own tool table, which holds only this tool.
var notifyTool = &mcp.Tool{
	Name:        "toolaudit-gateway-list-changed",
	InputSchema: map[string]any{"type": "object"},
}

func refuseNotifyTool(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, fmt.Errorf("not a tool")
}

// newServer is the MCP server clients speak to.
func (g *Gateway) newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "toolaudit-gateway", Version: "1"}, &mcp.ServerOptions{
		Logger:       g.log.With("component", "mcp"),
		Instructions: "Tools of several MCP servers, named server" + g.cfg.Separator + "tool. Every call is checked against the definition listed; a call to no such tool is answered error -32602 naming the nearest tools; a call whose arguments fail the tool, or whose tool changed since it was listed, is answered a result with isError saying what is wrong, where, and what would be right.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	s.AddTool(notifyTool, refuseNotifyTool)
	s.AddReceivingMiddleware(g.middleware)
	return s
}

// notifyToolsChanged tells every client session that the tool list
// changed.
func (g *Gateway) notifyToolsChanged() {
	g.server.AddTool(notifyTool, refuseNotifyTool)
}

// middleware answers initialize (the session table), tools/list (the
// catalogue) and tools/call (decide, audit, forward) and bounds
// subscriptions/listen; the SDK answers the rest.
func (g *Gateway) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			return g.initialize(ctx, next, method, req)
		case "tools/list":
			return g.listTools(ctx, req.(*mcp.ListToolsRequest))
		case "tools/call":
			return g.callTool(ctx, req.(*mcp.CallToolRequest))
		case "subscriptions/listen":
			// A stream held open until the client ends it: bounded as
			// sessions are.
			if !g.listens.TryAcquire(1) {
				g.m.refused.WithLabelValues("sessions").Inc()
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the gateway has %d subscriptions/listen streams open, its limit: retry later", g.cfg.Limits.MaxSessions)}
			}
			defer g.listens.Release(1)
		}
		return next(ctx, method, req)
	}
}

// initialize registers the session, or refuses it when the table is
// full (the SDK then closes it).
func (g *Gateway) initialize(ctx context.Context, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || ss.ID() == "" {
		return next(ctx, method, req)
	}
	s := &session{id: ss.ID(), close: func() {
		g.log.Info("session closed: its client's event stream closed and it sent nothing since", "session_id", ss.ID(), "grace", time.Duration(g.cfg.Limits.SessionGrace))
		g.m.gone.Inc()
		ss.Close()
	}}
	if !g.sessions.add(s) {
		g.m.refused.WithLabelValues("sessions").Inc()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("the gateway has %d sessions open, its limit: retry later", g.cfg.Limits.MaxSessions)}
	}
	res, err := next(ctx, method, req)
	if err != nil {
		g.sessions.remove(s.id)
		return nil, err
	}
	go func() {
		ss.Wait()
		g.sessions.remove(s.id)
	}()
	return res, nil
}

// listTools answers the whole catalogue in one page and remembers it as
// what the session was shown.
func (g *Gateway) listTools(ctx context.Context, req *mcp.ListToolsRequest) (mcp.Result, error) {
	if req.Params != nil && req.Params.Cursor != "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor: the gateway lists every tool in one page"}
	}
	cat := g.cat.Load()
	if s := g.sessionOf(req.Session); s != nil {
		s.shown.Store(cat)
	}
	if p := principalFrom(ctx); p != "" {
		g.relisted.Store(p, cat.at)
	}
	tools := cat.tools
	if tools == nil {
		tools = []*mcp.Tool{}
	}
	// ttlMs bounds how long the client may keep this answer: the window
	// of heldDigest for a client without a session. private: whether a
	// client relisted is told by its principal.
	return &mcp.ListToolsResult{Tools: tools, Cacheable: mcp.Cacheable{TTLMs: int(time.Duration(g.cfg.ListTTL).Milliseconds()), CacheScope: "private"}}, nil
}

// listedBy returns the listing time of the catalogue the client
// authenticated as principal was last answered (in a session or not).
func (g *Gateway) listedBy(principal string) (time.Time, bool) {
	if principal == "" {
		return time.Time{}, false
	}
	v, ok := g.relisted.Load(principal)
	if !ok {
		return time.Time{}, false
	}
	return v.(time.Time), true
}

// sessionOf returns the gateway's state of an SDK session, or nil.
func (g *Gateway) sessionOf(ss *mcp.ServerSession) *session {
	if ss == nil {
		return nil
	}
	return g.sessions.get(ss.ID())
}

type principalKey struct{}

// withPrincipal records the authenticated client's name in ctx.
func withPrincipal(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, principalKey{}, name)
}

func principalFrom(ctx context.Context) string {
	s, _ := ctx.Value(principalKey{}).(string)
	return s
}
