package gateway

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/registry"
)

// MetaDigest is the _meta member of every tool the gateway lists: the
// tool's digest (wire contract: sha256 of the JCS of name and
// inputSchema, under the upstream's own name), which calls are checked
// against.
const MetaDigest = "io.toolaudit/digest"

// catalogue is the merged tool list clients see, built from one registry
// version: every tool of every server under its qualified name. It is
// immutable; a session keeps the one it was last shown.
type catalogue struct {
	version *registry.Version // nil before any listing
	at      time.Time         // observed_at of the listing that built it
	tools   []*mcp.Tool       // sorted by qualified name
	byName  map[string]*entry // by qualified name
	// byTool holds every tool of the catalogue by server and tool name,
	// and the tools withdrawn by a listing (digest ""): the history a
	// stateless client's call is checked against (heldDigest).
	byTool map[toolKey]*entry
}

type toolKey struct{ server, tool string }

// entry is one tool of a catalogue.
type entry struct {
	server, tool string // the upstream's names
	digest       string // "" for a tool withdrawn
	// changed is the observed_at of the listing that gave the tool this
	// digest (or withdrew it); prev is its digest before ("" when the
	// tool was new then).
	changed time.Time
	prev    string
}

// newCatalogue builds the catalogue of version v, listed at at. defs
// holds each server's tools as it listed them (the definitions shown),
// by tool name; a tool of v without one is left out. prev is the
// catalogue before: each tool's history carries on from it. A withdrawn
// tool's entry is kept while it changed within keep of at.
func newCatalogue(v *registry.Version, at time.Time, defs map[string]map[string]*mcp.Tool, sep string, prev *catalogue, keep time.Duration) *catalogue {
	c := &catalogue{version: v, at: at, byName: map[string]*entry{}, byTool: map[toolKey]*entry{}}
	if v == nil {
		return c
	}
	for _, s := range v.Servers() {
		for _, t := range s.Tools() {
			def := defs[s.Name][t.Name]
			if def == nil {
				continue
			}
			shown := *def
			shown.Name = s.Name + sep + t.Name
			shown.Meta = maps.Clone(def.Meta)
			if shown.Meta == nil {
				shown.Meta = mcp.Meta{}
			}
			shown.Meta[MetaDigest] = t.Digest
			c.tools = append(c.tools, &shown)
			e := &entry{server: s.Name, tool: t.Name, digest: t.Digest, changed: at}
			if p := prev.lookupTool(s.Name, t.Name); p != nil {
				if p.digest == t.Digest {
					e.changed, e.prev = p.changed, p.prev
				} else if p.digest != "" {
					e.prev = p.digest
				} else {
					e.prev = p.prev // re-added: what a client may still hold is the one withdrawn
				}
			}
			c.byName[shown.Name] = e
			c.byTool[toolKey{s.Name, t.Name}] = e
		}
	}
	if prev != nil {
		for k, p := range prev.byTool {
			if _, ok := c.byTool[k]; ok {
				continue
			}
			switch {
			case p.digest != "": // withdrawn now
				c.byTool[k] = &entry{server: p.server, tool: p.tool, changed: at, prev: p.digest}
			case at.Sub(p.changed) < keep: // withdrawn before, recently
				c.byTool[k] = p
			}
		}
	}
	slices.SortFunc(c.tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return c
}

// lookup returns the entry of a qualified name, or nil.
func (c *catalogue) lookup(name string) *entry {
	if c == nil {
		return nil
	}
	return c.byName[name]
}

// lookupTool returns the entry of a server's tool (a withdrawn one's
// too), or nil.
func (c *catalogue) lookupTool(server, tool string) *entry {
	if c == nil {
		return nil
	}
	return c.byTool[toolKey{server, tool}]
}
