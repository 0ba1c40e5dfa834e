package suggest

import (
	"encoding/json"
	"sync"

	"github.com/toolaudit/toolaudit/jsontape"
)

// maxEnum is the number of enum values a hint lists.
const maxEnum = 32

// keyForms are the normalised forms of a tool's declared keys, computed
// once per key: the schema's reading is the signature's (Expect), the
// forms are this package's.
type keyForms struct {
	mu sync.Mutex
	m  map[string]name
}

// of returns the normalised forms of keys.
func (f *keyForms) of(keys []string) []name {
	out := make([]name, len(keys))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[string]name, len(keys))
	}
	for i, k := range keys {
		n, ok := f.m[k]
		if !ok {
			n = newName(k)
			f.m[k] = n
		}
		out[i] = n
	}
	return out
}

// expected returns the constraints of the schema nodes that apply at a
// path as one JSON object: the keywords of the one node that has any,
// or, when several nodes or branches constrain the value, "anyOf" with
// each one's.
func expected(vals []jsontape.Value) json.RawMessage {
	var v any
	switch len(vals) {
	case 0:
		return nil
	case 1:
		v = constraints(vals[0])
	default:
		alts := make([]map[string]any, len(vals))
		for i, c := range vals {
			alts[i] = constraints(c)
		}
		v = map[string]any{"anyOf": alts}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// constraints are one node's keywords (an object of
// signature.Expectation.Values); an enum lists at most maxEnum values.
func constraints(c jsontape.Value) map[string]any {
	m := make(map[string]any, c.Len())
	for kw := c.Members(); kw.Next(); {
		name, v := string(kw.Name()), kw.Value()
		if name == "enum" && v.Kind() == jsontape.Array && v.Len() > maxEnum {
			e := make([]any, 0, maxEnum)
			for it := v.Items(); len(e) < maxEnum && it.Next(); {
				e = append(e, plain(it.Value()))
			}
			m[name] = e
			continue
		}
		m[name] = plain(v)
	}
	return m
}

// plain is v as encoding/json decodes it with UseNumber, for
// json.Marshal: numbers keep their spelling, strings are re-escaped,
// object members sorted.
func plain(v jsontape.Value) any {
	switch v.Kind() {
	case jsontape.Object:
		m := make(map[string]any, v.Len())
		for it := v.Members(); it.Next(); {
			m[string(it.Name())] = plain(it.Value())
		}
		return m
	case jsontape.Array:
		a := make([]any, 0, v.Len())
		for it := v.Items(); it.Next(); {
			a = append(a, plain(it.Value()))
		}
		return a
	case jsontape.String:
		return string(v.Str())
	case jsontape.Number:
		return json.Number(v.Raw())
	case jsontape.True:
		return true
	case jsontape.False:
		return false
	}
	return nil
}
