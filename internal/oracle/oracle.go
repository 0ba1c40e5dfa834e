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
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolaudit/toolaudit/jsontape"
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
// schemas the validator rejects (type names that are not JSON Schema's)
// and for text the tape rejects.
func Compile(raw []byte) (*jsonschema.Schema, error) {
	var tp jsontape.Tape
	if err := tp.Parse(raw); err != nil {
		return nil, err
	}
	doc := Instance(tp.Root())
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
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
