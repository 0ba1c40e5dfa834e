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
	ev := obj{
		"type":       "call",
		"event_id":   id,
		"emitted_at": string(schema.AppendTime(nil, t)),
		"registry":   c.registry,
		"agent_id":   c.agent,
		"session_id": fmt.Sprintf("s-%s", id),
		"model":      "htb-scripted",
		"provider":   "htb",
		"surface":    "raw_json",
		"tool":       c.tool,
		"arguments":  c.args,
	}
	if c.server != "" {
		ev["server"] = c.server
	}
	if c.seen != "" {
		ev["seen_digest"] = c.seen
	}
	if c.visible != nil {
		vis := make([]any, len(c.visible))
		for i, v := range c.visible {
			vis[i] = v
		}
		ev["visible"] = vis
	}
	return mustJSON(ev)
}

// listingLine renders a listing event.
func listingLine(id, registry, server string, trust int, at time.Time, tools []obj) []byte {
	ts := make([]any, len(tools))
	for i, t := range tools {
		ts[i] = t
	}
	return mustJSON(obj{
		"type": "listing", "event_id": id, "observed_at": string(schema.AppendTime(nil, at)),
		"registry": registry, "server": server, "trust": trust, "op": "snapshot", "tools": ts,
	})
}

func removeLine(id, registry, server string, at time.Time) []byte {
	return mustJSON(obj{
		"type": "listing", "event_id": id, "observed_at": string(schema.AppendTime(nil, at)),
		"registry": registry, "server": server, "op": "remove",
	})
}
