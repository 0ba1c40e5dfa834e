package htb

import (
	"cmp"
	"slices"
	"strings"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// Routing as hosts do it, for the pipelines that do not use the resolver.
// A host that flattens its namespace knows its own naming, so
// server__tool, server/tool and mcp__server__tool are understood where
// the prefix is a connected server; what differs between pipelines is what
// they do with a name they cannot place.

// splitFlat parses a flattened name whose prefix is a connected server.
func splitFlat(v *registry.Version, name string) (*registry.ServerState, string, bool) {
	if v.Single() {
		return nil, "", false
	}
	try := func(n, sep string) (*registry.ServerState, string, bool) {
		for i := 0; ; {
			j := strings.Index(n[i:], sep)
			if j < 0 {
				return nil, "", false
			}
			i += j
			if i > 0 && i+len(sep) < len(n) {
				if s := v.Server(n[:i]); s != nil {
					return s, n[i+len(sep):], true
				}
			}
			i += len(sep)
		}
	}
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if s, t, ok := try(rest, "__"); ok {
			return s, t, true
		}
	}
	if s, t, ok := try(name, "__"); ok {
		return s, t, true
	}
	return try(name, "/")
}

// policy picks one provider of a name.
type policy uint8

const (
	firstProvider policy = iota // first server in connection order
	highestTrust                // highest trust, then connection order
)

func (e *Env) pick(p policy, reg string, provs []*registry.Tool) *registry.Tool {
	if len(provs) == 0 {
		return nil
	}
	ps := slices.Clone(provs)
	slices.SortStableFunc(ps, func(a, b *registry.Tool) int {
		if p == highestTrust && a.Trust != b.Trust {
			return cmp.Compare(b.Trust, a.Trust)
		}
		return cmp.Compare(e.w.rank(reg, a.Server), e.w.rank(reg, b.Server))
	})
	return ps[0]
}

// flatLookup is the strict flattened namespace of the allowlist, the
// fuzzy router (before it corrects) and the schema validator: a pin or a
// prefix names a connected server's tool, a bare name its first provider
// in connection order; anything else is not in the namespace.
func (e *Env) flatLookup(v *registry.Version, c *schema.Call) *registry.Tool {
	if c.Server != "" {
		s := v.Server(c.Server)
		if s == nil {
			return nil
		}
		if t := s.Tool(c.Tool); t != nil {
			return t
		}
		if srv, name, ok := splitFlat(v, c.Tool); ok && srv.Name == c.Server {
			return srv.Tool(name)
		}
		return nil
	}
	if t := e.pick(firstProvider, c.Registry, v.Providers(c.Tool)); t != nil {
		return t
	}
	if srv, name, ok := splitFlat(v, c.Tool); ok {
		return srv.Tool(name)
	}
	return nil
}

// hostRoute is how a naive MCP host routes: it honours a pin or prefix
// when that server is connected and has the tool; otherwise it treats the
// pin as a hint, strips any prefix, and routes the bare name to one of its
// providers under the host's policy.
func (e *Env) hostRoute(p policy, v *registry.Version, c *schema.Call) *registry.Tool {
	if c.Server != "" {
		if s := v.Server(c.Server); s != nil {
			if t := s.Tool(c.Tool); t != nil {
				return t
			}
		}
	}
	if t := e.pick(p, c.Registry, v.Providers(c.Tool)); t != nil {
		return t
	}
	if srv, name, ok := splitFlat(v, c.Tool); ok {
		if t := srv.Tool(name); t != nil {
			return t
		}
	}
	bare := c.Tool
	if i := strings.LastIndex(bare, "__"); i >= 0 {
		bare = bare[i+2:]
	} else if i := strings.LastIndex(bare, "/"); i >= 0 {
		bare = bare[i+1:]
	}
	if bare != c.Tool {
		return e.pick(p, c.Registry, v.Providers(bare))
	}
	return nil
}

// fuzzyKey is one name of the flattened namespace the fuzzy router
// corrects to.
type fuzzyKey struct {
	norm string
	tool *registry.Tool
}

func normName(s string) string {
	s = strings.ToLower(s)
	s = strings.ReplaceAll(s, "/", "__")
	s = strings.TrimPrefix(s, "mcp__")
	if i := strings.LastIndex(s, "."); i >= 0 && i+1 < len(s) {
		s = s[i+1:]
	}
	return s
}

func (e *Env) fuzzyKeys(v *registry.Version) []fuzzyKey {
	if ks, ok := e.fuzzy[v.ID]; ok {
		return ks
	}
	var ks []fuzzyKey
	seen := map[string]bool{}
	for _, t := range v.Tools() {
		keys := []string{t.Name}
		if t.Server != "" {
			keys = append(keys, t.Server+"__"+t.Name)
		}
		for _, k := range keys {
			n := normName(k)
			if seen[n] {
				continue
			}
			seen[n] = true
			tool := t
			if k == t.Name {
				tool = e.pick(firstProvider, v.Registry, v.Providers(t.Name))
			}
			ks = append(ks, fuzzyKey{n, tool})
		}
	}
	slices.SortFunc(ks, func(a, b fuzzyKey) int { return cmp.Compare(a.norm, b.norm) })
	e.fuzzy[v.ID] = ks
	return ks
}

// nearest returns the closest namespace entry to the emitted name and its
// similarity, 1 - edit distance / longer length.
func (e *Env) nearest(v *registry.Version, c *schema.Call) (*registry.Tool, float64) {
	q := c.Tool
	if c.Server != "" {
		q = c.Server + "__" + c.Tool
	}
	q = normName(q)
	var best *registry.Tool
	bestSim := -1.0
	for _, k := range e.fuzzyKeys(v) {
		d := levenshtein(q, k.norm)
		sim := 1 - float64(d)/float64(max(len([]rune(q)), len([]rune(k.norm)), 1))
		if sim > bestSim {
			best, bestSim = k.tool, sim
		}
	}
	return best, bestSim
}
