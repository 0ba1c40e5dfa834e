package gateway

import (
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/registryversions"
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
	version *registryversions.Version // nil before any listing
	tools   []*mcp.Tool               // sorted by qualified name
	byName  map[string]*entry
}

// entry is one tool of a catalogue.
type entry struct {
	server, tool string // the upstream's names
	digest       string
}

// newCatalogue builds the catalogue of version v. defs holds each
// server's tools as it listed them (the definitions shown), by tool
// name; a tool of v without one is left out.
func newCatalogue(v *registryversions.Version, defs map[string]map[string]*mcp.Tool, sep string) *catalogue {
	c := &catalogue{version: v, byName: map[string]*entry{}}
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
			c.byName[shown.Name] = &entry{server: s.Name, tool: t.Name, digest: t.Digest}
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
