package signature

import (
	"net/url"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
)

// A schema document holds one or more schema resources: the root, and every
// subschema with an "$id" (JSON Schema 2020-12 §9.2). A reference is a URI
// resolved against the base URI of the resource it appears in; its fragment
// is a JSON pointer ("#/$defs/a", percent-decoded first, RFC 6901 §6) or a
// plain name declared by "$anchor" or "$dynamicAnchor" in the target
// resource. Only resources of the one document are known: a reference to
// anything else is unresolved, and the node holding it is unchecked (a call
// reaching it fails closed).

// defaultBase is the base URI of a root without "$id": absolute, so that
// relative "$id"s and references resolve against something, and in a
// reserved domain, so that it names nothing real.
const defaultBase = "https://toolaudit.invalid/schema.json"

// resource is one schema resource of the document.
type resource struct {
	uri     *url.URL // without fragment
	root    jsontape.Value
	anchors map[string]jsontape.Value // $anchor and $dynamicAnchor names
	dynamic map[string]jsontape.Value // $dynamicAnchor names
	// dynNodes are the compiled targets of the dynamic anchors that a
	// $dynamicRef names, looked up along the dynamic scope when checking.
	dynNodes map[string]*node
}

// subschemaKeywords are the keywords whose value is a schema, an array of
// schemas, or an object of schemas: where the scan looks for resources.
var subschemaKeywords = map[string]uint8{
	"additionalProperties": 's', "unevaluatedProperties": 's', "propertyNames": 's',
	"items": 'a', "prefixItems": 'a', "additionalItems": 's', "unevaluatedItems": 's', "contains": 's',
	"not": 's', "if": 's', "then": 's', "else": 's',
	"allOf": 'a', "anyOf": 'a', "oneOf": 'a',
	"properties": 'o', "patternProperties": 'o', "$defs": 'o', "definitions": 'o',
	"dependentSchemas": 'o', "dependencies": 'o',
}

// scan finds the resources and anchors of the document rooted at doc, and
// records for every schema object the resource it belongs to. It visits
// each schema once: linear in the document.
func (c *compiler) scan(doc jsontape.Value) {
	base, _ := url.Parse(defaultBase)
	c.resources = map[string]*resource{}
	c.resOf = map[jsontape.Value]*resource{}
	c.rootRes = c.scanSchema(doc, c.newResource(base, doc))
}

func (c *compiler) newResource(u *url.URL, root jsontape.Value) *resource {
	u.Fragment, u.RawFragment = "", ""
	r := &resource{uri: u, root: root}
	key := u.String()
	if _, dup := c.resources[key]; !dup { // the first of two equal $ids wins, in document order
		c.resources[key] = r
	}
	return r
}

// scanSchema scans schema s found in resource r and returns the resource s
// belongs to (a new one when s has an "$id").
func (c *compiler) scanSchema(s jsontape.Value, r *resource) *resource {
	if s.Kind() != jsontape.Object {
		return r
	}
	if id := s.Get("$id"); id.Kind() == jsontape.String {
		ref := string(id.Str())
		if strings.HasPrefix(ref, "#") { // draft 7: an $id of a fragment alone is an anchor
			r.anchor(ref[1:], s, false)
		} else if u, err := url.Parse(ref); err == nil {
			u = r.uri.ResolveReference(u)
			if s != r.root {
				r = c.newResource(u, s)
			} else { // the root's own $id
				delete(c.resources, r.uri.String())
				r.uri = u
				r.uri.Fragment, r.uri.RawFragment = "", ""
				c.resources[r.uri.String()] = r
			}
		}
	}
	if a := s.Get("$anchor"); a.Kind() == jsontape.String {
		r.anchor(string(a.Str()), s, false)
	}
	if a := s.Get("$dynamicAnchor"); a.Kind() == jsontape.String {
		r.anchor(string(a.Str()), s, true)
	}
	c.resOf[s] = r
	for m := s.Members(); m.Next(); {
		switch subschemaKeywords[string(m.Name())] {
		case 's':
			c.scanSchema(m.Value(), r)
		case 'a':
			v := m.Value()
			if v.Kind() != jsontape.Array {
				c.scanSchema(v, r)
				continue
			}
			for it := v.Items(); it.Next(); {
				c.scanSchema(it.Value(), r)
			}
		case 'o':
			for sm := m.Value().Members(); sm.Next(); {
				c.scanSchema(sm.Value(), r)
			}
		}
	}
	return r
}

func (r *resource) anchor(name string, s jsontape.Value, dynamic bool) {
	if r.anchors == nil {
		r.anchors = map[string]jsontape.Value{}
	}
	if _, dup := r.anchors[name]; !dup {
		r.anchors[name] = s
	}
	if dynamic {
		if r.dynamic == nil {
			r.dynamic = map[string]jsontape.Value{}
		}
		if _, dup := r.dynamic[name]; !dup {
			r.dynamic[name] = s
		}
	}
}

// target is where a reference leads.
type target struct {
	res    *resource
	v      jsontape.Value
	key    string // the canonical URI of the target: one node per target
	anchor string // the plain-name fragment, if the reference used one
}

// resolve resolves reference ref appearing in resource r. It returns the
// reason when the reference leads nowhere in the document.
func (c *compiler) resolve(ref string, r *resource) (target, string) {
	u, err := url.Parse(ref)
	if err != nil {
		return target{}, "reference " + quoteReport(ref) + " is not a URI reference"
	}
	abs := r.uri.ResolveReference(u)
	frag := abs.Fragment // percent-decoded by url.Parse (RFC 6901 §6)
	abs.Fragment, abs.RawFragment = "", ""
	res := c.resources[abs.String()]
	if res == nil {
		return target{}, "reference " + quoteReport(ref) + " leads outside the schema (" + abs.String() + "): only references within the inputSchema are resolved"
	}
	t := target{res: res, key: abs.String() + "#" + frag}
	switch {
	case frag == "":
		t.v = res.root
	case frag[0] == '/':
		v := res.root
		for _, tok := range strings.Split(frag, "/")[1:] {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			if v = c.lookup(v, tok); !v.Exists() {
				break
			}
		}
		t.v = v
		if r2 := c.resOf[v]; r2 != nil {
			t.res = r2
		}
	default:
		t.v, t.anchor = res.anchors[frag], frag
	}
	if !t.v.Exists() {
		return target{}, "reference " + quoteReport(ref) + " not found"
	}
	return t, ""
}

func quoteReport(s string) string {
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return `"` + s + `"`
}
