// Package oracle compiles a tool's inputSchema with a general JSON Schema
// 2020-12 validator (santhosh-tekuri/jsonschema/v6) after rewriting it to
// the wire contract's closed world. It is the differential oracle of
// package signature and the baseline of its benchmarks; production code
// does not use it.
//
// The rewrite is the whole of the difference between the contract and
// plain JSON Schema 2020-12 (package signature's doc states the rule):
//
//   - a schema that declares keys by name (properties, or properties of
//     its if, then, else and dependentSchemas branches), and the top
//     level, gets additionalProperties:false unless it sets
//     additionalProperties or unevaluatedProperties, is itself such a
//     branch, is an allOf/anyOf/oneOf branch of a schema with
//     unevaluatedProperties, or is under an odd number of nots; the keys
//     its branches declare are added to its properties (and
//     patternProperties) as true, so that they are declared;
//   - format is dropped (an annotation in the contract by default);
//   - older drafts' spellings are read as package signature reads them:
//     an items array is prefixItems (additionalItems then being items),
//     dependencies is dependentRequired and dependentSchemas, an $id that
//     is a fragment alone is an $anchor; $schema is dropped and every
//     schema is read as 2020-12, MCP's default dialect.
package oracle

import (
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolaudit/toolaudit/jsontape"
)

// CloseWorld returns a rewritten copy of schema s (as decoded by
// jsonschema.UnmarshalJSON or encoding/json).
func CloseWorld(s any) any {
	out, _, _ := closeWorld(s, kindRoot, false)
	return out
}

type kind uint8

const (
	kindPlain kind = iota
	kindRoot
	kindBranch
	kindOpen // an allOf/anyOf/oneOf branch of a schema with unevaluatedProperties
)

// closeWorld rewrites s and returns, for a branch, the names and patterns
// it declares for its parent. negated: s is under an odd number of nots,
// where nothing is closed (closing would make not pass more). A $ref
// under not is not rewritten apart as package signature compiles it:
// the differential tests keep $ref out of not.
func closeWorld(s any, k kind, negated bool) (any, []string, []string) {
	m, ok := s.(map[string]any)
	if !ok {
		return s, nil, nil
	}
	out := make(map[string]any, len(m)+1)
	sub := func(v any) any { r, _, _ := closeWorld(v, kindPlain, negated); return r }
	subsOf := func(v any, k kind) any {
		arr, ok := v.([]any)
		if !ok {
			r, _, _ := closeWorld(v, k, negated)
			return r
		}
		rs := make([]any, len(arr))
		for i, e := range arr {
			rs[i], _, _ = closeWorld(e, k, negated)
		}
		return rs
	}
	subs := func(v any) any { return subsOf(v, kindPlain) }
	_, uneval := m["unevaluatedProperties"]
	var names, pats []string // declared by branches
	branch := func(v any) any {
		r, n, p := closeWorld(v, kindBranch, negated)
		names, pats = append(names, n...), append(pats, p...)
		return r
	}
	schemas := func(v any, f func(any) any) any {
		pm, ok := v.(map[string]any)
		if !ok {
			return v
		}
		o := make(map[string]any, len(pm))
		for name, ps := range pm {
			o[name] = f(ps)
		}
		return o
	}
	_, itemsArray := m["items"].([]any)
	for key, v := range m {
		switch key {
		case "format", "$schema":
		case "properties", "patternProperties", "$defs", "definitions":
			out[key] = schemas(v, sub)
		case "dependentSchemas":
			out[key] = schemas(v, branch)
		case "dependencies":
			dm, ok := v.(map[string]any)
			if !ok {
				out[key] = v
				continue
			}
			req, ds := map[string]any{}, map[string]any{}
			for name, d := range dm {
				if _, isArr := d.([]any); isArr {
					req[name] = d
				} else {
					ds[name] = branch(d)
				}
			}
			if len(req) > 0 {
				out["dependentRequired"] = req
			}
			if len(ds) > 0 {
				out["dependentSchemas"] = ds
			}
		case "if", "then", "else":
			if _, ok := m["if"]; ok { // then and else without if do nothing
				out[key] = branch(v)
			}
		case "items":
			if itemsArray {
				out["prefixItems"] = subs(v)
				continue
			}
			out[key] = sub(v)
		case "additionalItems":
			if itemsArray {
				out["items"] = sub(v)
			}
		case "prefixItems":
			out[key] = subs(v)
		case "allOf", "anyOf", "oneOf":
			if uneval {
				out[key] = subsOf(v, kindOpen)
			} else {
				out[key] = subs(v)
			}
		case "not":
			out[key], _, _ = closeWorld(v, kindPlain, !negated)
		case "additionalProperties", "unevaluatedProperties", "propertyNames",
			"unevaluatedItems", "contains":
			out[key] = sub(v)
		case "$id":
			if id, ok := v.(string); ok && len(id) > 0 && id[0] == '#' {
				out["$anchor"] = id[1:]
				continue
			}
			out[key] = v
		default:
			out[key] = v
		}
	}
	props, _ := out["properties"].(map[string]any)
	patProps, _ := out["patternProperties"].(map[string]any)
	if k == kindBranch {
		for name := range props {
			names = append(names, name)
		}
		for p := range patProps {
			pats = append(pats, p)
		}
		return out, names, pats
	}
	_, addl := m["additionalProperties"]
	// patternProperties alone closes nothing (rule 3: a node without
	// properties is open); where the node is closed, its patterns declare.
	declares := props != nil || len(names) > 0
	if !addl && !uneval && k != kindOpen && !negated && (k == kindRoot || declares) {
		declare(out, "properties", props, names)
		declare(out, "patternProperties", patProps, pats)
		out["additionalProperties"] = false
	}
	return out, nil, nil
}

var seq atomic.Int64

// Compile compiles a raw inputSchema under the closed world. It fails for
// schemas the validator rejects (type names that are not JSON Schema's)
// and for text the tape rejects.
func Compile(raw []byte) (*jsonschema.Schema, error) {
	var tp jsontape.Tape
	if err := tp.Parse(raw); err != nil {
		return nil, err
	}
	doc := Instance(tp.Root())
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	url := fmt.Sprintf("mem://schema/%d", seq.Add(1))
	if err := c.AddResource(url, CloseWorld(doc)); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// Instance converts a parsed value to the form the validator reads
// (encoding/json's, numbers as json.Number): the tape is the only parser
// of arguments and schemas, the validator sees exactly what it read.
func Instance(v jsontape.Value) any {
	switch v.Kind() {
	case jsontape.True:
		return true
	case jsontape.False:
		return false
	case jsontape.Number:
		return json.Number(v.Raw())
	case jsontape.String:
		return string(v.Str())
	case jsontape.Array:
		out := make([]any, 0, v.Len())
		for it := v.Items(); it.Next(); {
			out = append(out, Instance(it.Value()))
		}
		return out
	case jsontape.Object:
		out := make(map[string]any, v.Len())
		for m := v.Members(); m.Next(); {
			out[string(m.Name())] = Instance(m.Value())
		}
		return out
	}
	return nil
}

// declare adds names to the schemas of keyword kw (properties or
// patternProperties) of out as true, keeping those already there.
func declare(out map[string]any, kw string, have map[string]any, names []string) {
	if len(names) == 0 {
		return
	}
	m := make(map[string]any, len(have)+len(names))
	for n, v := range have {
		m[n] = v
	}
	for _, n := range names {
		if _, ok := m[n]; !ok {
			m[n] = true
		}
	}
	out[kw] = m
}
