package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/gateway/upstream"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// Surface is the surface of the gateway's call events.
const Surface = "mcp_gateway"

// Error codes the gateway answers, besides the upstreams' own.
const (
	// CodeRejected: the call does not resolve (the MCP specification's
	// code for invalid parameters, JSON-RPC's -32602).
	CodeRejected = jsonrpc.CodeInvalidParams
	// CodeUnavailable: the gateway could not act on the call (audit
	// trail down, upstream down or slow, too many calls in flight);
	// retrying may succeed. JSON-RPC's internal error, -32603.
	CodeUnavailable = jsonrpc.CodeInternalError
)

// callWork is one call's buffers, pooled.
type callWork struct {
	dec   schema.CallDecoder
	call  schema.Call
	args  bytes.Buffer
	event []byte
	rec   audit.Record
	data  []byte
	held  held // where the call event's seen_digest came from
}

// seenFrom says where a call event's seen_digest came from. The text of
// an M4 says what the gateway knows, and that differs: a digest a
// session was shown, one the client sent, or one inferred from list_ttl
// for a client the gateway showed no catalogue it can name.
type seenFrom uint8

const (
	seenNone    seenFrom = iota
	seenShown            // the catalogue the session was shown
	seenClaimed          // the client's, in the call's _meta (MetaDigest)
	seenWindow           // the definition before a change within ListTTL: the client may hold it (heldDigest)
)

// held is what the gateway knows of the definition a call's client
// holds, for the text of an M4.
type held struct {
	from    seenFrom
	at      time.Time // the call's emitted_at
	changed time.Time // seenWindow: when the definition inferred changed
}

// callTool decides one tools/call, records the decision in the audit
// trail, and answers the rejection or forwards the call.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	if !g.inflight.TryAcquire(1) {
		g.m.refused.WithLabelValues("in_flight").Inc()
		return nil, &jsonrpc.Error{Code: CodeUnavailable, Message: fmt.Sprintf("the gateway has %d calls in flight, its limit: retry", g.cfg.Limits.MaxInFlight)}
	}
	defer g.inflight.Release(1)
	start := time.Now()
	w := g.work.Get().(*callWork)
	defer g.putWork(w)

	p := req.Params
	s := g.sessionOf(req.Session)
	args, err := g.arguments(w, p.Arguments)
	if err != nil {
		return nil, &jsonrpc.Error{Code: CodeRejected, Message: err.Error()}
	}
	if !g.complete.Load() {
		// A bare name (not shown, not qualified) could belong to an
		// upstream not listed yet, whose trust may outrank the one that
		// provides it now: no verdict until every upstream has listed.
		if srv, _, _ := g.target(s, p.Name); srv == "" {
			g.m.refused.WithLabelValues("not_ready").Inc()
			return nil, &jsonrpc.Error{Code: CodeUnavailable, Message: fmt.Sprintf("%q is neither in this session's catalogue nor qualified with an upstream's name, and not every upstream has listed its tools yet (not yet: %s): retry", p.Name, strings.Join(g.notListed(), ", "))}
		}
	}
	vs := g.store.Snapshot()
	rec := g.decide(w, s, principalFrom(ctx), p.Name, claimedDigest(s, p.Meta), args, vs)
	d := &rec.Decision
	hints := g.step.Hint(vs, &w.call, rec)
	if err := g.step.Record(callpath.ContinueMeta(ctx, p.Meta), rec); err != nil {
		g.m.calls.WithLabelValues(string(d.Class), "audit_unavailable").Inc()
		g.log.Warn("call refused: the audit trail did not take its decision", "event_id", d.EventID, "err", err)
		return nil, &jsonrpc.Error{Code: CodeUnavailable, Message: "the decision could not be recorded in the audit trail, so the call was not acted on (fail closed): retry"}
	}
	g.m.decided.Observe(time.Since(start).Seconds())

	server, tool := d.ResolvedServer, d.ResolvedTool
	if d.Verdict == schema.Reject {
		if !g.cfg.Observe || server == "" {
			g.m.calls.WithLabelValues(string(d.Class), "rejected").Inc()
			w.data = callpath.AppendAnswer(w.data[:0], rec, &hints)
			var k *m4Known
			if d.Class == schema.M4 {
				k = g.m4Known(w.held, s, principalFrom(ctx), server, tool)
			}
			return rejectionResult(p.Name, server+g.cfg.Separator+tool, d, &hints, k, w.data)
		}
	}
	up := g.upstreams[server]
	if up == nil { // cannot happen: the registry holds only configured servers
		return nil, &jsonrpc.Error{Code: CodeUnavailable, Message: fmt.Sprintf("no upstream %q", server)}
	}
	res, err := up.Call(ctx, tool, args)
	if err != nil {
		g.m.calls.WithLabelValues(string(d.Class), "upstream_error").Inc()
		return nil, upstreamError(server, err)
	}
	g.m.calls.WithLabelValues(string(d.Class), "forwarded").Inc()
	g.m.forwarded.Observe(time.Since(start).Seconds())
	return res, nil
}

func (g *Gateway) putWork(w *callWork) {
	if w.args.Cap() > 64<<10 {
		w.args = bytes.Buffer{}
	}
	if cap(w.event) > 64<<10 {
		w.event = nil
	}
	w.call = schema.Call{}
	w.rec = audit.Record{}
	g.work.Put(w)
}

// arguments returns the call's arguments as compact JSON: absent or null
// arguments are {} (MCP lets a client leave them out), anything else is
// passed on for the resolver to judge (a non-object is MALFORMED, a
// repeated key too: compacting keeps every member).
func (g *Gateway) arguments(w *callWork, raw json.RawMessage) ([]byte, error) {
	w.args.Reset()
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || string(t) == "null" {
		return []byte("{}"), nil
	}
	if err := json.Compact(&w.args, t); err != nil {
		return nil, fmt.Errorf("arguments are not JSON: %w", err)
	}
	return w.args.Bytes(), nil
}

// decide builds the call event and decides it. Its seen_digest is the
// definition the client holds of the tool the name resolves to, however
// the name is spelled (the session's catalogue name, bare, server__tool,
// server/tool, mcp__server__tool): a definition changed since is M4
// whichever spelling reaches it. A name of the session's catalogue
// carries its digest from the start, as does a call whose client names
// the digest it holds (claimed, claimedDigest); any other is decided
// once to learn
// which tool it resolves to, and if the client holds a definition of
// that tool (heldDigest) the event carries it: when it differs from the
// current one the event is decided again (M4, or in pin-assisted mode
// the provider whose definition the client holds); when it is the
// current one the decision stands, since a seen_digest equal to the
// resolved tool's digest changes no check (TestRugPullSpellings decides
// the recorded events again).
func (g *Gateway) decide(w *callWork, s *session, principal, name, claimed string, args []byte, vs *registry.Snapshot) *audit.Record {
	c := schema.Call{
		EventID:   g.ids.next('c'),
		EmittedAt: g.clock.call(),
		Registry:  g.cfg.Registry,
		Surface:   Surface,
		AgentID:   principal,
	}
	if s != nil {
		c.SessionID = s.id
	}
	w.held = held{at: c.EmittedAt}
	c.Server, c.Tool, c.SeenDigest = g.target(s, name)
	switch {
	case c.SeenDigest != "":
		w.held.from = seenShown
	case claimed != "":
		c.SeenDigest, w.held.from = claimed, seenClaimed
	}
	rec := g.decideEvent(w, &c, args, vs)
	d := &rec.Decision
	if c.SeenDigest != "" || d.ResolvedServer == "" {
		return rec
	}
	held, from, changed := g.heldDigest(s, principal, d.ResolvedServer, d.ResolvedTool, c.EmittedAt)
	if held == "" {
		return rec
	}
	w.held.from, w.held.changed = from, changed
	c.SeenDigest = held
	if held != d.CurrentDigest {
		return g.decideEvent(w, &c, args, vs)
	}
	w.event = schema.AppendCall(w.event[:0], &c, schema.CallArgs{JSON: args})
	rec.Call, rec.Key = w.event, c.Key()
	d.SeenDigest, w.call.SeenDigest = held, held
	return rec
}

// claimedDigest is the digest a client says it holds of the tool it
// calls, in the call's _meta under MetaDigest (the member the gateway
// lists it in), when the gateway has no catalogue it showed the client
// (no session, or one that has not listed): it is checked exactly, with
// no list_ttl window. A session's catalogue is the gateway's own record
// and prevails. Anything but a digest ("sha256:" and 64 hex digits) is
// no claim: the list_ttl rule applies.
func claimedDigest(s *session, meta mcp.Meta) string {
	if sessionShown(s) != nil {
		return ""
	}
	d, _ := meta[MetaDigest].(string)
	hex, ok := strings.CutPrefix(d, "sha256:")
	if !ok || len(hex) != 64 || strings.IndexFunc(hex, func(r rune) bool { return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') }) >= 0 {
		return ""
	}
	return d
}

// sessionShown is the catalogue session s was last shown, or nil (no
// session, or not listed yet).
func sessionShown(s *session) *catalogue {
	if s == nil {
		return nil
	}
	return s.shown.Load()
}

// decideEvent encodes call c with args and decides it into w.rec.
func (g *Gateway) decideEvent(w *callWork, c *schema.Call, args []byte, vs *registry.Snapshot) *audit.Record {
	w.event = schema.AppendCall(w.event[:0], c, schema.CallArgs{JSON: args})
	g.step.Decide(vs, &w.dec, w.event, &w.call, &w.rec)
	// The gateway made the event: its key is c's even when the event
	// does not decode (arguments that repeat a key are MALFORMED, and
	// the decoder then reads no session).
	w.rec.Key = c.Key()
	return &w.rec
}

// target reads the name a client called: a name of the catalogue the
// session was shown is that server's tool, with the digest shown; a name
// the session was not shown is pinned to an upstream when it is
// qualified with one's name and the gateway's separator; otherwise it is
// passed on as it is, for the resolver to read (a bare name, resolved by
// the policy; another spelling of a qualified name; a fabricated one).
func (g *Gateway) target(s *session, name string) (server, tool, seen string) {
	if s != nil {
		if e := s.shown.Load().lookup(name); e != nil {
			return e.server, e.tool, e.digest
		}
	}
	if srv, t, ok := strings.Cut(name, g.cfg.Separator); ok && g.upstreams[srv] != nil && t != "" {
		return srv, t, ""
	}
	return "", name, ""
}

// heldDigest is the digest of the definition of server's tool that the
// client may hold at t, or "" when it holds none, and where it comes
// from: the session's catalogue (seenShown), or the definition before a
// change at changed within ListTTL (seenWindow; otherwise the current
// one, seenNone).
//
// A session holds the catalogue it was last shown. A client without a
// session (protocol 2026-07-28), or whose session has not listed yet
// (it may hold the listing of an earlier session: one closed under it,
// session_grace), may hold any tools/list answer it got
// within ListTTL (the answers' ttlMs) before t: when the tool's
// definition changed after t-ListTTL it may hold the one before, and
// that is its digest (the call is M4), unless it listed the catalogue
// of that change or a later one since (the relisting of an
// authenticated client; an anonymous client cannot be told from
// another, so it waits out ListTTL).
func (g *Gateway) heldDigest(s *session, principal, server, tool string, t time.Time) (digest string, from seenFrom, changed time.Time) {
	if shown := sessionShown(s); shown != nil {
		if e := shown.lookupTool(server, tool); e != nil {
			return e.digest, seenShown, time.Time{} // "" when the catalogue shown had it withdrawn
		}
		return "", seenNone, time.Time{}
	}
	e := g.cat.Load().lookupTool(server, tool)
	if e == nil || e.digest == "" {
		return "", seenNone, time.Time{}
	}
	since := t.Add(-time.Duration(g.cfg.ListTTL))
	if r, ok := g.listedBy(principal); ok && r.After(since) {
		since = r
	}
	if e.changed.After(since) && e.prev != "" {
		return e.prev, seenWindow, e.changed
	}
	return e.digest, seenNone, time.Time{}
}

// clientHints are the hints of the gateway's rejections (the step's
// Hinter): Gateway.hints.
type clientHints struct{ g *Gateway }

func (h clientHints) Hints(vs resolve.Versions, c *schema.Call, d *schema.Decision) suggest.Hints {
	return h.g.hints(vs, c, d)
}

// hints are the hints of rejected decision d of call c, in the names
// clients call: Options.Hints' (H1, M1: the nearest names; M2, M3: the
// names to pin; H2, H3: keys and expectations) and, for H5 and M5, the
// tool the arguments fit.
func (g *Gateway) hints(vs resolve.Versions, c *schema.Call, d *schema.Decision) suggest.Hints {
	var h suggest.Hints
	if g.opts.Hints != nil {
		h = g.opts.Hints.Hints(vs, c, d)
	}
	v := vs.At(g.cfg.Registry, c.EmittedAt)
	switch d.Class {
	case schema.H5, schema.M5:
		h.Tools = g.fitting(v, d)
	default:
		h.Tools = g.clientNames(v, c.Server, h.Tools)
	}
	return h
}

// clientNames turns the names hints give (tool, or server__tool) into
// the names clients call: qualified with the gateway's separator. A bare
// name is the pinned server's tool when the call had a pin, else its one
// provider's.
func (g *Gateway) clientNames(v *registry.Version, pin string, names []string) []string {
	if v == nil || len(names) == 0 {
		return names
	}
	has := func(srv, tool string) bool { s := v.Server(srv); return s != nil && s.Tool(tool) != nil }
	// suggest writes server__tool; it is read back by this gateway's
	// server names, since one may contain "__" itself (with another
	// separator) and a tool name may too.
	split := func(n string) (srv, tool string, ok bool) {
		for _, u := range g.order {
			if t, ok := strings.CutPrefix(n, u.Name()+"__"); ok && has(u.Name(), t) {
				return u.Name(), t, true
			}
		}
		return "", "", false
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		if srv, t, ok := split(n); ok {
			n = srv + g.cfg.Separator + t
		} else if pin != "" && has(pin, n) {
			n = pin + g.cfg.Separator + n
		} else if ps := v.Providers(n); len(ps) == 1 {
			n = ps[0].Server + g.cfg.Separator + n
		}
		out = append(out, n)
	}
	return out
}

// upstreamError is the error answered when a forwarded call failed: the
// upstream's own JSON-RPC error as it is, else -32603 naming the server.
func upstreamError(server string, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je
	}
	msg := fmt.Sprintf("upstream %s: %v", server, err)
	switch {
	case errors.Is(err, upstream.ErrTimeout):
		msg = fmt.Sprintf("upstream %s did not answer in time", server)
	case errors.Is(err, upstream.ErrUnavailable):
		msg = fmt.Sprintf("upstream %s is unavailable (restarting or not connected): retry", server)
	}
	return &jsonrpc.Error{Code: CodeUnavailable, Message: msg}
}
