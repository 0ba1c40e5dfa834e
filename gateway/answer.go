package gateway

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// MetaDecision is the _meta member of a rejected call's result: the
// decision as the gateway answers it (callpath.AppendAnswer: the
// decision, source, action and hints), for programs; the text is for
// the model.
const MetaDecision = "io.toolaudit/decision"

// toolError reports whether a rejection of class c is answered as a
// tool execution error (a CallToolResult with isError, whose text the
// client gives the model to correct the call) rather than a protocol
// error: the MCP specification (2025-11-25 and 2026-07-28, Tools / Error
// Handling) makes an unknown tool or a malformed request a JSON-RPC
// error and an input validation error a tool execution error. The tool
// is identified but its arguments fail it (H2, H3, H5, M5), or the
// definition the client holds is not the current one (M4): the model
// can correct either by itself. A name that identifies no one tool
// (H1, M1; M2 and M3, where the name is ambiguous or shadowed and the
// fix is another name) and a MALFORMED event are protocol errors, whose
// message names what to call instead.
func toolError(c schema.Class) bool {
	switch c {
	case schema.H2, schema.H3, schema.H5, schema.M5, schema.M4:
		return true
	}
	return false
}

// rejectionResult is the answer to a rejected call: a CallToolResult
// with isError and a text naming what is wrong, where and what would be
// right, or a JSON-RPC -32602 error naming what to call instead. Both
// carry the answer object (data): in the result's _meta (not
// structuredContent, which clients check against the tool's
// outputSchema), as the error's data.
func rejectionResult(called, qualified string, d *schema.Decision, h *suggest.Hints, k *m4Known, data []byte) (mcp.Result, error) {
	raw := json.RawMessage(bytes.Clone(data))
	if !toolError(d.Class) {
		return nil, &jsonrpc.Error{Code: CodeRejected, Message: nameMessage(called, d, h), Data: raw}
	}
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: argumentText(called, qualified, d, h, k)}},
		Meta:    mcp.Meta{MetaDecision: raw},
	}, nil
}

// nameMessage is the message of a rejected name: the class and reason,
// and the names to call instead.
func nameMessage(called string, d *schema.Decision, h *suggest.Hints) string {
	var b strings.Builder
	b.WriteString("call rejected by toolaudit, not sent to any server: ")
	b.WriteString(string(d.Class))
	b.WriteString(" ")
	b.WriteString(d.Reason)
	if d.Path != "" {
		b.WriteString(" at ")
		b.WriteString(d.Path)
	}
	switch {
	case d.Class == schema.Malformed:
	case len(h.Tools) > 0 && (d.Class == schema.M2 || d.Class == schema.M3):
		b.WriteString(". Call one of: ")
		b.WriteString(strings.Join(h.Tools, ", "))
	case len(h.Tools) > 0:
		b.WriteString(". Nearest tool names: ")
		b.WriteString(strings.Join(h.Tools, ", "))
	default:
		b.WriteString(". No tool name is near ")
		b.WriteString(strconv.Quote(called))
		b.WriteString(": list the tools (tools/list) for the names")
	}
	return b.String()
}

// argumentText is the text of a rejected call's result: what is wrong,
// where (the JSON pointer into the arguments) and what would be right.
// k is what the gateway knows of the definition the client of an M4
// holds (nil: nothing but the decision).
func argumentText(called, qualified string, d *schema.Decision, h *suggest.Hints, k *m4Known) string {
	var b strings.Builder
	b.WriteString("toolaudit rejected this call to ")
	b.WriteString(called)
	b.WriteString(" (")
	b.WriteString(string(d.Class))
	b.WriteString("); it was not sent to the server. ")
	at := d.Path
	if at == "" {
		at = "/"
	}
	toks := pointer(d.Path)
	last := ""
	if len(toks) > 0 {
		last = toks[len(toks)-1]
	}
	switch d.Class {
	case schema.M4:
		if notApproved(d) {
			// Relisting would not help: an operator must review it.
			b.WriteString("The current definition of ")
			b.WriteString(qualified)
			b.WriteString(" (")
			b.WriteString(d.CurrentDigest)
			b.WriteString(") is not approved by the operators of this gateway, so it cannot be called until someone reviews and approves it. Do not retry it; tell the user.")
			break
		}
		k.text(&b, qualified, d)
	case schema.H2:
		missing := len(h.Missing) > 0 && slices.Contains(h.Missing, last)
		if missing {
			b.WriteString("Required argument ")
			b.WriteString(strconv.Quote(last))
			b.WriteString(" is missing at ")
			b.WriteString(at)
			b.WriteString(". Add it")
		} else {
			b.WriteString("Argument ")
			b.WriteString(strconv.Quote(last))
			b.WriteString(" at ")
			b.WriteString(at)
			b.WriteString(" is not declared by ")
			b.WriteString(qualified)
			b.WriteString(".")
			if len(h.Keys) > 0 {
				b.WriteString(" The declared key nearest to it is ")
				b.WriteString(strconv.Quote(h.Keys[0]))
				b.WriteString(": send ")
				b.WriteString(strconv.Quote(h.Keys[0]))
				b.WriteString(" instead of ")
				b.WriteString(strconv.Quote(last))
				b.WriteString(".")
				if len(h.Keys) > 1 {
					b.WriteString(" Other declared keys near it: ")
					b.WriteString(quoteAll(h.Keys[1:]))
					b.WriteString(".")
				}
			} else {
				b.WriteString(" Remove it.")
			}
			missing := h.Missing
			if len(h.Keys) > 0 {
				missing = without(missing, h.Keys[0]) // said already
			}
			if len(missing) > 0 {
				b.WriteString(" Required there and missing: ")
				b.WriteString(quoteAll(missing))
				b.WriteString(".")
			}
			return b.String()
		}
		if len(h.Missing) > 1 {
			b.WriteString(", and the other required keys missing there: ")
			b.WriteString(quoteAll(without(h.Missing, last)))
		}
		b.WriteString(".")
	case schema.H3:
		b.WriteString("The value at ")
		b.WriteString(at)
		b.WriteString(" is wrong: ")
		b.WriteString(d.Reason)
		b.WriteString(".")
		if len(h.Expected) > 0 {
			b.WriteString(" Expected there: ")
			b.Write(h.Expected)
			b.WriteString(".")
		}
		if d.Coercible {
			b.WriteString(" The value is right in another JSON type: send it as the type expected (5, not \"5\").")
		}
	case schema.H5, schema.M5:
		b.WriteString("The arguments do not fit ")
		b.WriteString(qualified)
		b.WriteString(" (at ")
		b.WriteString(at)
		b.WriteString(")")
		if len(h.Tools) > 0 {
			b.WriteString(" but fit ")
			b.WriteString(h.Tools[0])
			b.WriteString(": call ")
			b.WriteString(h.Tools[0])
			b.WriteString(" if that is the tool meant, else send the arguments ")
			b.WriteString(qualified)
			b.WriteString(" declares.")
		} else {
			b.WriteString(": ")
			b.WriteString(d.Reason)
			b.WriteString(".")
		}
	}
	return b.String()
}

// m4Known is what the gateway knows of the definition the client of an
// M4 holds, for its text: the text says that, and never that a client
// was shown a digest the gateway did not show it.
type m4Known struct {
	from seenFrom
	// age: since the current definition was listed (<0: unknown).
	age time.Duration
	ttl time.Duration // Config.ListTTL
	// retry (seenWindow, anonymous, no session): until the earlier
	// definition is no longer held, ListTTL after the change; retryAt,
	// that instant.
	retry   time.Duration
	retryAt time.Time
	// session: the client has a session (seenWindow: one that has not
	// listed); principal: the authenticated client ("": anonymous); auth:
	// the gateway authenticates clients.
	session   bool
	principal string
	auth      bool
}

// m4Known gathers what the text of an M4 of server's tool says, from
// where the call's seen_digest came from (h).
func (g *Gateway) m4Known(h held, s *session, principal, server, tool string) *m4Known {
	k := &m4Known{from: h.from, age: -1, ttl: time.Duration(g.cfg.ListTTL), session: s != nil, principal: principal, auth: g.opts.Auth != nil}
	changed := h.changed
	if changed.IsZero() {
		if e := g.cat.Load().lookupTool(server, tool); e != nil {
			changed = e.changed
		}
	}
	if !changed.IsZero() && !h.at.Before(changed) {
		k.age = h.at.Sub(changed)
	}
	if h.from == seenWindow {
		k.retryAt = changed.Add(k.ttl)
		k.retry = k.retryAt.Sub(h.at)
	}
	return k
}

// text writes the text of an M4 whose client holds a definition that is
// not the current one.
func (k *m4Known) text(b *strings.Builder, qualified string, d *schema.Decision) {
	if k == nil {
		k = &m4Known{age: -1}
	}
	changed := func() {
		b.WriteString("The definition of ")
		b.WriteString(qualified)
		b.WriteString(" changed")
		if k.age >= 0 {
			b.WriteString(" ")
			b.WriteString(floor(k.age).String())
			b.WriteString(" ago")
		}
	}
	const relist = "List the tools again (tools/list) and call it as its current definition says"
	claim := "send the digest of the definition this client holds, as tools/list gives it in each tool's _meta (" + strconv.Quote(MetaDigest) + "), in the call's _meta under the same name: it is checked at once"
	switch {
	case k.from == seenShown:
		changed()
		b.WriteString(", after this client was shown it (shown ")
		b.WriteString(d.SeenDigest)
		b.WriteString(", now ")
		b.WriteString(d.CurrentDigest)
		b.WriteString("). " + relist + ".")
	case k.from == seenClaimed:
		changed()
		b.WriteString("; the definition this client says it holds (")
		b.WriteString(d.SeenDigest)
		b.WriteString(", sent in the call's _meta) is not the current one. " + relist + ", sending the digest listed with it.")
	case k.from == seenWindow && k.principal != "":
		changed()
		b.WriteString(", and this client (")
		b.WriteString(k.principal)
		b.WriteString(") has not listed the tools since: it may keep a tools/list answer for list_ttl (")
		b.WriteString(k.ttl.String())
		b.WriteString("), so it may hold the earlier definition. " + relist + " (listing again counts at once), or " + claim + ".")
	case k.from == seenWindow && k.session:
		changed()
		b.WriteString(", and this session has not listed the tools: its client may hold the listing of an earlier session, kept for list_ttl (")
		b.WriteString(k.ttl.String())
		b.WriteString("), so it may hold the earlier definition. List the tools in this session (tools/list) and call it as its current definition says: the call is then checked against that listing.")
	case k.from == seenWindow:
		changed()
		b.WriteString(". A client without a session may keep a tools/list answer for list_ttl (")
		b.WriteString(k.ttl.String())
		b.WriteString("), and this one is not authenticated, so the gateway cannot tell whether it listed since the change: it may hold the earlier definition. Either list the tools again (tools/list) and retry after ")
		b.WriteString(ceil(k.retry).String())
		b.WriteString(" (from ")
		b.WriteString(k.retryAt.UTC().Format(schema.TimeLayout))
		b.WriteString(" on, calls are checked against the current definition); or " + claim + "; or authenticate: an authenticated client that lists again is checked at once")
		if !k.auth {
			b.WriteString(" (this gateway authenticates no client unless its operator configures tokens)")
		}
		b.WriteString(".")
	default:
		changed()
		b.WriteString("; this call was checked against another definition (")
		b.WriteString(d.SeenDigest)
		b.WriteString("). " + relist + ".")
	}
}

// floor and ceil round a duration for a text: to the millisecond below a
// second, else to the second. An age is rounded down and a time to wait
// up, so that neither says more than is true.
func floor(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Truncate(time.Millisecond)
	}
	return d.Truncate(time.Second)
}

func ceil(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	if r := d % unit; r != 0 {
		d += unit - r
	}
	return d
}

// fitting is the hint of an H5 or M5 decision, in client names: the
// tool the arguments fit. For M5, the resolver's reason names the tool
// and its server (`arguments fit "T" on server "R", not on "S"`); for
// H5 it names the tool as server/tool. They are read back by the
// registry version's servers and tools: a name that does not read back
// gives no hint.
func (g *Gateway) fitting(v *registry.Version, d *schema.Decision) []string {
	if v == nil {
		return nil
	}
	q := quoted(d.Reason)
	has := func(srv, tool string) bool { s := v.Server(srv); return s != nil && s.Tool(tool) != nil }
	switch d.Class {
	case schema.M5:
		if len(q) >= 2 && has(q[1], q[0]) {
			return []string{q[1] + g.cfg.Separator + q[0]}
		}
	case schema.H5:
		for _, n := range q {
			for _, u := range g.order {
				if t, ok := strings.CutPrefix(n, u.Name()+"/"); ok && has(u.Name(), t) && !(u.Name() == d.ResolvedServer && t == d.ResolvedTool) {
					return []string{u.Name() + g.cfg.Separator + t}
				}
			}
		}
	}
	return nil
}

// quoted returns the Go-quoted strings of s, unquoted, in order.
func quoted(s string) []string {
	var out []string
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			return out
		}
		q, err := strconv.QuotedPrefix(s[i:])
		if err != nil {
			return out
		}
		u, _ := strconv.Unquote(q)
		out = append(out, u)
		s = s[i+len(q):]
	}
}

// pointer splits a JSON pointer into its unescaped tokens.
func pointer(p string) []string {
	if p == "" || p[0] != '/' {
		return nil
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return toks
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func without(ss []string, x string) []string {
	return slices.DeleteFunc(slices.Clone(ss), func(s string) bool { return s == x })
}

// notApproved reports whether an M4 is the approvals policy's (the
// current definition is not approved) rather than a stale seen_digest.
func notApproved(d *schema.Decision) bool {
	a := d.Approval
	return (a == schema.ApprovalUnapproved || a == schema.ApprovalRejected || a == schema.ApprovalNew) &&
		(d.SeenDigest == "" || d.SeenDigest == d.CurrentDigest)
}
