package diff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/toolaudit/toolaudit/signature"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
)

// SchemaDiff is what changed between two inputSchemas of a tool, each
// entry naming the place in the arguments as a JSON pointer ("/owner",
// "/filter/state", "/items/*/id" for the items of an array; "(root)" for
// the arguments object itself). Its JSON (the members of `resolverd
// registry diff --json` and `registry pending --json`, named as the
// columns of table registry_changes; empty ones left out) is what
// encoding/json makes of it, embedded in the row printed.
type SchemaDiff struct {
	// PropsAdded and PropsRemoved are declared properties.
	PropsAdded   []string `json:"props_added,omitempty"`
	PropsRemoved []string `json:"props_removed,omitempty"`
	// PropsRetyped are properties whose type changed: "/limit: string -> integer".
	PropsRetyped []string `json:"props_retyped,omitempty"`
	// RequiredAdded and RequiredRemoved are properties that became
	// required or optional.
	RequiredAdded   []string `json:"required_added,omitempty"`
	RequiredRemoved []string `json:"required_removed,omitempty"`
	// EnumAdded and EnumRemoved are allowed values: `/state: "closed"`.
	EnumAdded   []string `json:"enum_added,omitempty"`
	EnumRemoved []string `json:"enum_removed,omitempty"`
	// Other are the other keywords that changed: "/limit: maximum 10 -> 5",
	// "/query: description changed", "/x: anyOf changed".
	Other []string `json:"other,omitempty"`
}

// Empty reports whether nothing changed.
func (d *SchemaDiff) Empty() bool {
	return len(d.PropsAdded)+len(d.PropsRemoved)+len(d.PropsRetyped)+len(d.RequiredAdded)+
		len(d.RequiredRemoved)+len(d.EnumAdded)+len(d.EnumRemoved)+len(d.Other) == 0
}

// Summary is the diff in one line of at most about 300 bytes: "+/dry_run
// -/force required+/owner /limit: string -> integer".
func (d *SchemaDiff) Summary() string {
	var b strings.Builder
	add := func(prefix string, items []string) {
		for _, it := range items {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(prefix)
			b.WriteString(it)
		}
	}
	add("+", d.PropsAdded)
	add("-", d.PropsRemoved)
	add("", d.PropsRetyped)
	add("required+", d.RequiredAdded)
	add("required-", d.RequiredRemoved)
	add("enum+", d.EnumAdded)
	add("enum-", d.EnumRemoved)
	add("", d.Other)
	return truncate(b.String(), 300)
}

// maxDepth bounds the recursion into nested schemas; a deeper difference
// is reported as one Other entry at that depth.
const maxDepth = 32

// ErrNotObject is returned when an inputSchema is not a JSON object.
var ErrNotObject = errors.New("schema diff: inputSchema is not a JSON object")

// DiffSchemas returns what changed from the inputSchema old to new (raw
// JSON objects, as listings carry them; nil or empty is the empty schema,
// for a tool that did not exist). Its cost is linear in the two
// documents' sizes. Numbers compare by value (2.0 equals 2), keys
// regardless of their order, as the tool digest does.
func DiffSchemas(old, new []byte) (SchemaDiff, error) {
	a, err := decodeObject(old)
	if err != nil {
		return SchemaDiff{}, fmt.Errorf("old: %w", err)
	}
	b, err := decodeObject(new)
	if err != nil {
		return SchemaDiff{}, fmt.Errorf("new: %w", err)
	}
	var d SchemaDiff
	d.node("", a, b, 0)
	d.enforcement(old, new)
	for _, l := range []*[]string{&d.PropsAdded, &d.PropsRemoved, &d.PropsRetyped, &d.RequiredAdded,
		&d.RequiredRemoved, &d.EnumAdded, &d.EnumRemoved, &d.Other} {
		slices.Sort(*l)
	}
	return d, nil
}

// enforcement adds to Other the parts of the schema that the checker no
// longer enforces, or now enforces: a definition that becomes
// unenforceable (a reference out of the document, a lookahead pattern) is
// a change worth seeing, as every call that reaches it is refused.
func (d *SchemaDiff) enforcement(old, new []byte) {
	unchecked := func(raw []byte) map[string]string {
		if len(bytes.TrimSpace(raw)) == 0 {
			return nil
		}
		sig, err := signature.Compile(raw)
		if err != nil {
			return nil // decodeObject read it: it is an object
		}
		m := map[string]string{}
		for _, u := range sig.Unsupported() {
			if u.Unchecked && u.Path+u.Keyword != "…" {
				m[pathOf(u.Path)+": "+u.Keyword] = u.Why
			}
		}
		return m
	}
	a, b := unchecked(old), unchecked(new)
	for k, why := range b {
		if _, was := a[k]; !was {
			d.Other = append(d.Other, k+" not enforced ("+truncate(why, 120)+"): calls that reach it are refused")
		}
	}
	for k := range a {
		if _, is := b[k]; !is {
			d.Other = append(d.Other, k+" now enforced")
		}
	}
}

// pathOf spells a JSON pointer into the schema as the diff's paths are
// spelled: "(root)" for the top level.
func pathOf(p string) string {
	if p == "" {
		return "(root)"
	}
	return "#" + p
}

func decodeObject(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return map[string]any{}, nil
	}
	// The strict parser first: a repeated member name or a nesting
	// beyond its bound is refused as every listing's schema is, and the
	// decoder below then reads the one reading there is.
	var t jsontape.Tape
	if err := t.Parse(raw); err != nil {
		return nil, fmt.Errorf("schema diff: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("schema diff: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("schema diff: data after the inputSchema")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, ErrNotObject
	}
	return m, nil
}

// keywords handled by node itself; the others are compared as values.
var structural = map[string]bool{"type": true, "enum": true, "required": true, "properties": true, "items": true}

// quiet keywords: their change is named, not shown (free text).
var quiet = map[string]bool{"description": true, "title": true, "$comment": true, "examples": true}

func (d *SchemaDiff) node(path string, a, b map[string]any, depth int) {
	p := path
	if p == "" {
		p = "(root)"
	}
	if depth >= maxDepth {
		if canonical(a) != canonical(b) {
			d.Other = append(d.Other, p+": changed (nested deeper than "+strconv.Itoa(maxDepth)+")")
		}
		return
	}
	if ta, tb := typeOf(a), typeOf(b); ta != tb {
		d.PropsRetyped = append(d.PropsRetyped, p+": "+ta+" -> "+tb)
	}
	added, removed := setDiff(values(a["enum"]), values(b["enum"]))
	for _, v := range added {
		d.EnumAdded = append(d.EnumAdded, p+": "+truncate(v, 80))
	}
	for _, v := range removed {
		d.EnumRemoved = append(d.EnumRemoved, p+": "+truncate(v, 80))
	}
	added, removed = setDiff(names(a["required"]), names(b["required"]))
	for _, n := range added {
		d.RequiredAdded = append(d.RequiredAdded, path+"/"+escape(n))
	}
	for _, n := range removed {
		d.RequiredRemoved = append(d.RequiredRemoved, path+"/"+escape(n))
	}
	pa, pb := object(a["properties"]), object(b["properties"])
	for _, k := range sortedKeys(pa, pb) {
		va, inA := pa[k]
		vb, inB := pb[k]
		child := path + "/" + escape(k)
		switch {
		case !inA:
			d.PropsAdded = append(d.PropsAdded, child)
		case !inB:
			d.PropsRemoved = append(d.PropsRemoved, child)
		default:
			d.sub(child, va, vb, depth)
		}
	}
	ia, oka := a["items"].(map[string]any)
	ib, okb := b["items"].(map[string]any)
	switch {
	case oka && okb:
		d.node(path+"/*", ia, ib, depth+1)
	case canonical(a["items"]) != canonical(b["items"]):
		d.Other = append(d.Other, p+": items changed")
	}
	for _, k := range sortedKeys(a, b) {
		if structural[k] {
			continue
		}
		ca, cb := canonical(a[k]), canonical(b[k])
		if ca == cb {
			continue
		}
		_, inA := a[k]
		_, inB := b[k]
		switch {
		case quiet[k]:
			d.Other = append(d.Other, p+": "+k+" changed")
		case !inA:
			d.Other = append(d.Other, p+": "+k+" "+truncate(cb, 60)+" added")
		case !inB:
			d.Other = append(d.Other, p+": "+k+" "+truncate(ca, 60)+" removed")
		default:
			d.Other = append(d.Other, p+": "+k+" "+truncate(ca, 60)+" -> "+truncate(cb, 60))
		}
	}
}

// sub compares a property's two schemas: objects recurse, anything else
// (true, false) compares as a value.
func (d *SchemaDiff) sub(path string, a, b any, depth int) {
	ma, oka := a.(map[string]any)
	mb, okb := b.(map[string]any)
	if oka && okb {
		d.node(path, ma, mb, depth+1)
		return
	}
	if ca, cb := canonical(a), canonical(b); ca != cb {
		d.Other = append(d.Other, path+": "+truncate(ca, 60)+" -> "+truncate(cb, 60))
	}
}

// typeOf is a schema's type keyword as text: "string", "integer|null"
// (sorted), or "any" when absent.
func typeOf(s map[string]any) string {
	switch t := s["type"].(type) {
	case nil:
		return "any"
	case string:
		return t
	case []any:
		var ts []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				ts = append(ts, s)
			} else {
				ts = append(ts, canonical(x))
			}
		}
		slices.Sort(ts)
		return strings.Join(slices.Compact(ts), "|")
	default:
		return canonical(t)
	}
}

func object(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// values are the members of a JSON array as canonical JSON.
func values(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		out = append(out, canonical(x))
	}
	return out
}

// names are the strings of a JSON array (required).
func names(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, 0, len(arr))
	for _, x := range arr {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// setDiff returns the members of b not in a and of a not in b, sorted
// and without repeats.
func setDiff(a, b []string) (added, removed []string) {
	ina := make(map[string]bool, len(a))
	for _, x := range a {
		ina[x] = true
	}
	inb := make(map[string]bool, len(b))
	for _, x := range b {
		inb[x] = true
	}
	for x := range inb {
		if !ina[x] {
			added = append(added, x)
		}
	}
	for x := range ina {
		if !inb[x] {
			removed = append(removed, x)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	return added, removed
}

func sortedKeys(a, b map[string]any) []string {
	keys := slices.Collect(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}

// escape is a JSON pointer reference token (RFC 6901).
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// canonical is v as JSON with sorted keys and numbers by value, so that
// equal values have equal text; "" for a missing value.
func canonical(v any) string {
	if v == nil {
		return ""
	}
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case json.Number:
		if f, err := x.Float64(); err == nil && !math.IsInf(f, 0) {
			b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
		} else {
			b.WriteString(x.String())
		}
	case string:
		s, _ := json.Marshal(x)
		b.Write(s)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		for i, k := range slices.Sorted(maps.Keys(x)) {
			if i > 0 {
				b.WriteByte(',')
			}
			s, _ := json.Marshal(k)
			b.Write(s)
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	}
}

// truncate cuts s to at most n bytes at a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && (s[i]&0xC0) == 0x80 {
		i--
	}
	return s[:i] + "…"
}
