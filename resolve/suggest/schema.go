package suggest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Bounds of a walk through a schema: combinators and $refs can multiply
// the nodes a path reaches, and a schema is the tool server's to write.
const (
	maxNodes = 16 // schema nodes followed at once
	maxRefs  = 32 // $ref hops in one walk
	maxEnum  = 32 // enum values a hint lists
)

// doc is one parsed inputSchema, shared by every call to its tool.
type doc struct {
	root any

	mu    sync.Mutex
	names map[unsafe.Pointer]propList // property names, sorted and normalised, by properties object
}

func parseDoc(raw []byte) *doc {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var root any
	if d.Decode(&root) != nil {
		return &doc{}
	}
	return &doc{root: root}
}

// resolveRef follows a local $ref ("#/$defs/x", "#/definitions/x", "#").
func (d *doc) resolveRef(ref string) (any, bool) {
	if ref == "#" {
		return d.root, true
	}
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	cur := d.root
	for _, tok := range strings.Split(p, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			if cur, ok = v[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// walker expands schema nodes: their $refs and combinators, within the
// bounds.
type walker struct {
	d    *doc
	refs int
}

// expand returns the object nodes that s stands for: s itself, the
// targets of its $ref, and the branches of allOf, anyOf and oneOf,
// recursively, at most maxNodes.
func (w *walker) expand(s any, out []map[string]any) []map[string]any {
	m, ok := s.(map[string]any)
	if !ok || len(out) >= maxNodes {
		return out
	}
	for _, seen := range out {
		if sameMap(seen, m) {
			return out
		}
	}
	out = append(out, m)
	if ref, ok := m["$ref"].(string); ok && w.refs < maxRefs {
		w.refs++
		if t, ok := w.d.resolveRef(ref); ok {
			out = w.expand(t, out)
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		if subs, ok := m[kw].([]any); ok {
			for _, sub := range subs {
				out = w.expand(sub, out)
			}
		}
	}
	return out
}

// sameMap reports whether a and b are the same map (not equal ones).
func sameMap(a, b map[string]any) bool { return mapID(a) == mapID(b) }

// mapID is the identity of a map, for the walk's visited set and the
// memo of property names.
func mapID(m map[string]any) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// at returns the schema nodes that the value at path (JSON pointer
// tokens into the arguments) is checked against.
func (w *walker) at(path []string) []map[string]any {
	nodes := w.expand(w.d.root, nil)
	for _, tok := range path {
		var next []map[string]any
		for _, n := range nodes {
			for _, child := range children(n, tok) {
				next = w.expand(child, next)
			}
		}
		if len(next) == 0 {
			return nil
		}
		nodes = next
	}
	return nodes
}

// children are the subschemas of object node n that apply to member or
// item tok.
func children(n map[string]any, tok string) []any {
	var out []any
	if props, ok := n["properties"].(map[string]any); ok {
		if p, ok := props[tok]; ok {
			return append(out, p)
		}
	}
	if i, err := strconv.Atoi(tok); err == nil && i >= 0 {
		if items, ok := n["prefixItems"].([]any); ok && i < len(items) {
			return append(out, items[i])
		}
		switch items := n["items"].(type) {
		case []any: // draft 4 tuples
			if i < len(items) {
				return append(out, items[i])
			}
		case map[string]any:
			return append(out, items)
		}
	}
	if ap, ok := n["additionalProperties"].(map[string]any); ok {
		out = append(out, ap)
	}
	return out
}

// declared returns the property names the nodes declare, with their
// normalised forms.
func (d *doc) declared(nodes []map[string]any) ([]string, []name) {
	var keys []string
	var names []name
	var seen map[string]bool
	for _, n := range nodes {
		props, ok := n["properties"].(map[string]any)
		if !ok {
			continue
		}
		ks, ns := d.propNames(props)
		if keys == nil {
			keys, names = ks, ns // shared: not appended to in place below
			continue
		}
		if seen == nil {
			seen = make(map[string]bool, len(keys))
			for _, k := range keys {
				seen[k] = true
			}
			keys, names = slices.Clip(keys), slices.Clip(names)
		}
		for i, k := range ks {
			if !seen[k] {
				seen[k] = true
				keys, names = append(keys, k), append(names, ns[i])
			}
		}
	}
	return keys, names
}

// propNames returns the keys of one properties object, sorted, and their
// normalised forms, computed once per schema.
func (d *doc) propNames(props map[string]any) ([]string, []name) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.names == nil {
		d.names = map[unsafe.Pointer]propList{}
	}
	id := mapID(props)
	l, ok := d.names[id]
	if !ok {
		l.keys = make([]string, 0, len(props))
		for k := range props {
			l.keys = append(l.keys, k)
		}
		slices.Sort(l.keys)
		l.names = make([]name, len(l.keys))
		for i, k := range l.keys {
			l.names[i] = newName(k)
		}
		d.names[id] = l
	}
	return l.keys, l.names
}

type propList struct {
	keys  []string
	names []name
}

// required returns the required keys of the nodes, in order of first
// mention.
func required(nodes []map[string]any) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range nodes {
		req, _ := n["required"].([]any)
		for _, r := range req {
			if s, ok := r.(string); ok && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

// constraintKeywords are what a hint for H3 repeats of the schema.
var constraintKeywords = []string{
	"type", "enum", "const", "format", "pattern", "minLength", "maxLength",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
}

// expected returns the constraints of the nodes as one JSON object: the
// constraint keywords of the first node that has any, and, when several
// nodes or branches constrain the value, "anyOf" with each one's.
func expected(nodes []map[string]any) json.RawMessage {
	var alts []map[string]any
	for _, n := range nodes {
		if c := constraints(n); len(c) > 0 {
			alts = append(alts, c)
		}
	}
	var v any
	switch len(alts) {
	case 0:
		return nil
	case 1:
		v = alts[0]
	default:
		v = map[string]any{"anyOf": alts}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

func constraints(n map[string]any) map[string]any {
	var c map[string]any
	for _, kw := range constraintKeywords {
		v, ok := n[kw]
		if !ok {
			continue
		}
		if kw == "enum" {
			if e, ok := v.([]any); ok && len(e) > maxEnum {
				v = e[:maxEnum]
			}
		}
		if c == nil {
			c = map[string]any{}
		}
		c[kw] = v
	}
	return c
}

// pointer splits a JSON pointer into its unescaped tokens.
func pointer(p string) []string {
	if p == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
	}
	return toks
}
