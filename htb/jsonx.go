package htb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// obj is a decoded JSON object (schemas, arguments). Numbers are
// json.Number so that 2.0 and 2 stay distinct where it matters.
type obj = map[string]any

// decodeJSON decodes b with UseNumber.
func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeObj decodes a JSON object.
func decodeObj(b []byte) (obj, error) {
	v, err := decodeJSON(b)
	if err != nil {
		return nil, err
	}
	o, ok := v.(obj)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return o, nil
}

// mustJSON encodes v; encoding/json sorts map keys, so the bytes are
// deterministic.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimRight(b.Bytes(), "\n")
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch x := v.(type) {
	case obj:
		c := make(obj, len(x))
		for k, e := range x {
			c[k] = deepCopy(e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = deepCopy(e)
		}
		return c
	}
	return v
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// schemaProps returns the properties of an object schema (nil if none).
func schemaProps(s obj) obj {
	p, _ := s["properties"].(obj)
	return p
}

// schemaRequired returns the required keys of an object schema, sorted.
func schemaRequired(s obj) []string {
	arr, _ := s["required"].([]any)
	var out []string
	for _, e := range arr {
		if k, ok := e.(string); ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// schemaTypes returns the type names of a schema node ("type" as a string
// or a list), in schema order.
func schemaTypes(s obj) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if n, ok := e.(string); ok {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// num reads a JSON number of a schema keyword.
func num(s obj, k string) (float64, bool) {
	switch n := s[k].(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	}
	return 0, false
}

func jnum(f float64) json.Number {
	return json.Number(strconv.FormatFloat(f, 'f', -1, 64))
}

func jint(i int64) json.Number { return json.Number(strconv.FormatInt(i, 10)) }
