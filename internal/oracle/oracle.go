// Package oracle compiles a tool's inputSchema with a general JSON Schema
// validator (santhosh-tekuri/jsonschema/v6) after rewriting it to the wire
// contract's closed world. It is the differential oracle of package
// signature and the baseline of its benchmarks; production code does not
// use it.
//
// The rewrite is the whole of the difference between the contract and
// plain JSON Schema:
//
//   - the top level, and every object node that declares properties, gets
//     additionalProperties:false unless it sets additionalProperties;
//   - format is dropped (an annotation in the contract; draft-07
//     validators may assert it);
//   - every schema is read as draft-07, the draft the corpus declares.
package oracle

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// CloseWorld returns a rewritten copy of schema s (as decoded by
// jsonschema.UnmarshalJSON or encoding/json).
func CloseWorld(s any) any { return closeWorld(s, true) }

func closeWorld(s any, root bool) any {
	m, ok := s.(map[string]any)
	if !ok {
		return s
	}
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		switch k {
		case "format", "$schema":
			continue
		case "properties", "$defs", "definitions":
			if pm, ok := v.(map[string]any); ok {
				sub := make(map[string]any, len(pm))
				for name, ps := range pm {
					sub[name] = closeWorld(ps, false)
				}
				out[k] = sub
				continue
			}
		case "items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "prefixItems":
			if arr, ok := v.([]any); ok {
				subs := make([]any, len(arr))
				for i, e := range arr {
					subs[i] = closeWorld(e, false)
				}
				out[k] = subs
				continue
			}
			out[k] = closeWorld(v, false)
			continue
		}
		out[k] = v
	}
	if _, set := m["additionalProperties"]; !set {
		if _, props := m["properties"]; props || root {
			out["additionalProperties"] = false
		}
	}
	return out
}

var seq atomic.Int64

// Compile compiles a raw inputSchema under the closed world. It fails for
// schemas the validator rejects (type names that are not JSON Schema's).
func Compile(raw []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	url := fmt.Sprintf("mem://schema/%d", seq.Add(1))
	if err := c.AddResource(url, CloseWorld(doc)); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// RepeatedKey reports whether an object anywhere in the JSON document b
// repeats a key. Parsers disagree on which value wins (fastjson keeps the
// first, encoding/json the last), so the decoder rejects such calls before
// any checker sees them; differential tests skip them for the same reason.
func RepeatedKey(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return false
				}
				ks, _ := k.(string)
				if seen[ks] {
					return true
				}
				seen[ks] = true
				if walk() {
					return true
				}
			}
			_, _ = d.Token()
		case json.Delim('['):
			for d.More() {
				if walk() {
					return true
				}
			}
			_, _ = d.Token()
		}
		return false
	}
	return walk()
}
