package htb

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// synth draws honest argument values from an inputSchema. It knows the
// keywords of the corpus (type, properties, required, enum, const, items,
// min/max, lengths, anyOf, oneOf, allOf, format) and nothing else; every
// object it returns is checked by the caller with the closed-world
// signature, and a draw that fails is redrawn (see honestArgs).
type synth struct {
	r *rand.Rand
	n int // counter for unique strings
}

// optionalP is the chance that an honest call sets an optional argument
// at the top level (nested: half of it). BFCL ground truth sets few.
const optionalP = 0.35

var words = []string{"alpha", "bravo", "cobalt", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel", "lumen"}

func (g *synth) value(s any, key string, depth int) any {
	m, ok := s.(obj)
	if !ok {
		// true (any value) or a non-schema: a plain string.
		return g.str(obj{}, key)
	}
	if c, ok := m["const"]; ok {
		return deepCopy(c)
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		var cands []any
		for _, v := range e {
			if v != nil {
				cands = append(cands, v)
			}
		}
		if len(cands) == 0 {
			return nil
		}
		return deepCopy(cands[g.r.IntN(len(cands))])
	}
	if merged, ok := g.combine(m); ok {
		return g.value(merged, key, depth)
	}
	types := schemaTypes(m)
	var nonNull []string
	for _, t := range types {
		if t != "null" {
			nonNull = append(nonNull, t)
		}
	}
	t := ""
	switch {
	case len(nonNull) > 0:
		t = nonNull[g.r.IntN(len(nonNull))]
	case len(types) > 0:
		return nil // only null
	case m["properties"] != nil || m["additionalProperties"] != nil:
		t = "object"
	case m["items"] != nil:
		t = "array"
	default:
		t = "string"
	}
	switch t {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, key, depth)
	case "integer":
		return g.number(m, true)
	case "number":
		return g.number(m, false)
	case "boolean":
		return g.r.IntN(2) == 0
	default:
		return g.str(m, key)
	}
}

// combine folds anyOf/oneOf (one branch, non-null preferred) and allOf
// (every branch) into the node, so that properties living only inside
// branches are generated with the parent's type.
func (g *synth) combine(m obj) (obj, bool) {
	var branches []any
	for _, k := range []string{"anyOf", "oneOf"} {
		if arr, ok := m[k].([]any); ok && len(arr) > 0 {
			var cands []any
			for _, b := range arr {
				if bm, ok := b.(obj); ok && len(schemaTypes(bm)) == 1 && schemaTypes(bm)[0] == "null" {
					continue
				}
				cands = append(cands, b)
			}
			if len(cands) == 0 {
				cands = arr
			}
			branches = append(branches, cands[g.r.IntN(len(cands))])
		}
	}
	if arr, ok := m["allOf"].([]any); ok {
		branches = append(branches, arr...)
	}
	if len(branches) == 0 {
		return nil, false
	}
	out := obj{}
	for k, v := range m {
		if k != "anyOf" && k != "oneOf" && k != "allOf" {
			out[k] = v
		}
	}
	for _, b := range branches {
		bm, ok := b.(obj)
		if !ok {
			continue
		}
		for k, v := range bm {
			switch k {
			case "properties":
				p, _ := out["properties"].(obj)
				np := obj{}
				for pk, pv := range p {
					np[pk] = pv
				}
				if vp, ok := v.(obj); ok {
					for pk, pv := range vp {
						np[pk] = pv
					}
				}
				out["properties"] = np
			case "required":
				r, _ := out["required"].([]any)
				nr := slices.Clone(r)
				if vr, ok := v.([]any); ok {
					nr = append(nr, vr...)
				}
				out["required"] = nr
			default:
				out[k] = v
			}
		}
	}
	return out, true
}

func (g *synth) object(m obj, depth int) any {
	o := obj{}
	props := schemaProps(m)
	if props == nil || depth > 4 {
		return o // free-form: honest calls put nothing there
	}
	req := schemaRequired(m)
	p := optionalP
	if depth > 0 {
		p /= 2
	}
	for _, k := range sortedKeys(props) {
		if slices.Contains(req, k) || g.r.Float64() < p {
			o[k] = g.value(props[k], k, depth+1)
		}
	}
	return o
}

func (g *synth) array(m obj, key string, depth int) any {
	lo, hi := 1, 2
	if v, ok := num(m, "minItems"); ok {
		lo = max(lo, int(v))
		hi = max(hi, lo)
	}
	if v, ok := num(m, "maxItems"); ok {
		hi = min(hi, int(v))
		lo = min(lo, hi)
	}
	n := lo
	if hi > lo {
		n += g.r.IntN(hi - lo + 1)
	}
	items := m["items"]
	if items == nil {
		items = obj{"type": "string"}
	}
	out := make([]any, 0, n)
	for range n {
		out = append(out, g.value(items, singular(key), depth+1))
	}
	if u, _ := m["uniqueItems"].(bool); u && len(out) == 2 && string(mustJSON(out[0])) == string(mustJSON(out[1])) {
		out = out[:1]
	}
	return out
}

func singular(k string) string { return strings.TrimSuffix(k, "s") }

func (g *synth) number(m obj, integer bool) json.Number {
	lo, hi := 1.0, 100.0
	minV, hasMin := num(m, "minimum")
	maxV, hasMax := num(m, "maximum")
	if v, ok := num(m, "exclusiveMinimum"); ok {
		minV, hasMin = v+1e-6, true
		if integer {
			minV = math.Floor(v) + 1
		}
	}
	if v, ok := num(m, "exclusiveMaximum"); ok {
		maxV, hasMax = v-1e-6, true
		if integer {
			maxV = math.Ceil(v) - 1
		}
	}
	switch {
	case hasMin && hasMax:
		lo, hi = minV, maxV
	case hasMin:
		lo, hi = minV, minV+100
	case hasMax:
		lo, hi = math.Min(1, maxV), maxV
	}
	if hi > lo+1000 {
		hi = lo + 1000
	}
	if integer {
		l, h := int64(math.Ceil(lo)), int64(math.Floor(hi))
		if h < l {
			h = l
		}
		return jint(l + g.r.Int64N(h-l+1))
	}
	// Mostly whole numbers, as models send them; a quarter are halves
	// (exact in decimal, so the JSON text is the value).
	x := lo + math.Round(g.r.Float64()*(hi-lo))
	if g.r.IntN(4) == 0 {
		x = lo + math.Round(g.r.Float64()*(hi-lo)*2)/2
	}
	if x > hi {
		x = hi
	}
	return jnum(x)
}

func (g *synth) str(m obj, key string) string {
	g.n++
	lk := strings.ToLower(key)
	var s string
	switch f, _ := m["format"].(string); {
	case f == "date":
		s = fmt.Sprintf("2026-%02d-%02d", 1+g.r.IntN(12), 1+g.r.IntN(28))
	case f == "date-time":
		s = fmt.Sprintf("2026-%02d-%02dT%02d:00:00Z", 1+g.r.IntN(12), 1+g.r.IntN(28), g.r.IntN(24))
	case f == "uri" || f == "url" || strings.HasSuffix(lk, "url") || strings.HasSuffix(lk, "uri"):
		s = fmt.Sprintf("https://example.com/%s/%d", words[g.r.IntN(len(words))], g.n)
	case f == "email" || strings.Contains(lk, "email"):
		s = fmt.Sprintf("%s%d@example.com", words[g.r.IntN(len(words))], g.n)
	case lk == "id" || strings.HasSuffix(lk, "_id") || strings.HasSuffix(key, "Id") || strings.HasSuffix(key, "ID"):
		s = fmt.Sprintf("t1-%04d", g.r.IntN(10000))
	case strings.Contains(lk, "path"):
		s = fmt.Sprintf("/workspace/%s/%s-%d.txt", words[g.r.IntN(len(words))], words[g.r.IntN(len(words))], g.n)
	default:
		s = words[g.r.IntN(len(words))] + " " + words[g.r.IntN(len(words))]
	}
	if v, ok := num(m, "maxLength"); ok && len([]rune(s)) > int(v) {
		s = string([]rune(s)[:int(v)])
	}
	if v, ok := num(m, "minLength"); ok {
		for len([]rune(s)) < int(v) {
			s += "x"
		}
	}
	return s
}
