package htb

import (
	"fmt"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// Ref names one tool of one server ("" in a single registry).
type Ref struct{ Server, Tool string }

func (r Ref) String() string {
	if r.Server == "" {
		return r.Tool
	}
	return r.Server + "/" + r.Tool
}

// Honest is the kind of honest trials.
const Honest = "honest"

// Trial is one scripted call. Kind is a hostile class (H1-H5, M1-M5) or
// Honest; Variant says how it was made; Expect is its class under the
// contract's rules in strict mode (an H5 whose arguments also satisfy the
// named tool is OK by those rules: the residue); Intended is the tool an
// honest call means. Line is the call event, exactly as on the wire.
type Trial struct {
	ID       string
	Kind     string
	Variant  string
	Expect   schema.Class
	Intended Ref
	Line     []byte
}

// Track is one benchmark track: its listings, its trials, and how to print
// it.
type Track struct {
	Name     string
	Title    string
	Classes  []string // hostile classes, in column order
	Listings [][]byte
	Trials   []Trial
	// FlatVariant, when set, is the honest variant reported in its own
	// column (the unpinned same-tier calls of the MCP tracks).
	FlatVariant string
	Notes       []string

	w *world
}

// callSpec is what a generator decides about one call.
type callSpec struct {
	registry string
	tool     string
	server   string
	args     obj
	seen     string
	visible  []string
	agent    string
}

// epoch is the synthetic tracks' clock: listings are observed from it,
// calls are emitted a day later, one millisecond apart.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// line renders the call event, emitted at t.
func (c callSpec) line(id string, t time.Time) []byte {
	ev := schema.Call{
		EventID: id, EmittedAt: t, Registry: c.registry, AgentID: c.agent,
		SessionID: fmt.Sprintf("s-%s", id), Model: "htb-scripted", Provider: "htb", Surface: "raw_json",
		Tool: c.tool, Server: c.server, SeenDigest: c.seen, Visible: c.visible, HasVisible: c.visible != nil,
	}
	return schema.AppendCall(nil, &ev, schema.CallArgs{JSON: mustJSON(c.args)})
}

// listingLine renders a listing event.
func listingLine(id, registry, server string, trust int, at time.Time, tools []obj) []byte {
	raw := make([][]byte, len(tools))
	for i, t := range tools {
		raw[i] = mustJSON(t)
	}
	l := schema.Listing{EventID: id, ObservedAt: at, Registry: registry, Server: server, Trust: trust, Op: schema.OpSnapshot}
	return schema.AppendListing(nil, &l, raw)
}

func removeLine(id, registry, server string, at time.Time) []byte {
	l := schema.Listing{EventID: id, ObservedAt: at, Registry: registry, Server: server, Op: schema.OpRemove}
	return schema.AppendListing(nil, &l, nil)
}
