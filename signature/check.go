package signature

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// Kind is the outcome of a check.
type Kind uint8

// Outcomes, in increasing priority: a key failure outranks a value failure.
const (
	Pass      Kind = iota
	ValueFail      // H3: type, enum, const, range, length, pattern, items count
	KeyFail        // H2: undeclared key or missing required key
)

// Result of a check. Path is a JSON pointer into the arguments.
type Result struct {
	Kind      Kind
	Path      string
	Reason    string
	Coercible bool
}

// fail carries a failure up the recursion; it is allocated only on failure.
type fail struct {
	kind      Kind
	reason    string
	coercible bool
	segs      []string // path segments, innermost first
}

// Accepts needs only pass or fail and which kind: in quiet mode failures
// are these shared values, so a scan over many tools does not allocate.
var (
	quietKey = &fail{kind: KeyFail}
	quietVal = &fail{kind: ValueFail}
)

// mode is the checking mode: loud failures carry a reason and a path.
type mode bool

const (
	loud  mode = false
	quiet mode = true
)

func (m mode) fail(k Kind, reason string) *fail {
	if m == quiet {
		if k == KeyFail {
			return quietKey
		}
		return quietVal
	}
	return &fail{kind: k, reason: reason}
}

func (f *fail) quiet() bool { return f == quietKey || f == quietVal }

func (f *fail) at(seg string) *fail {
	if !f.quiet() {
		f.segs = append(f.segs, seg)
	}
	return f
}

func (f *fail) atKey(k []byte) *fail {
	if !f.quiet() {
		f.segs = append(f.segs, string(k))
	}
	return f
}

func (f *fail) atIndex(i int) *fail {
	if !f.quiet() {
		f.segs = append(f.segs, strconv.Itoa(i))
	}
	return f
}

// Check checks the arguments of a call. It does not allocate when they pass.
func (s *Signature) Check(args *fastjson.Value) Result {
	f := check(s.root, args, loud)
	if f == nil {
		return Result{}
	}
	var b strings.Builder
	for i := len(f.segs) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(escape(f.segs[i]))
	}
	return Result{Kind: f.kind, Path: b.String(), Reason: f.reason, Coercible: f.coercible}
}

// Accepts reports whether the arguments pass.
func (s *Signature) Accepts(args *fastjson.Value) bool { return check(s.root, args, quiet) == nil }

func check(n *node, v *fastjson.Value, m mode) *fail {
	if n.has&(cNever|cRef) != 0 {
		if n.never {
			return m.fail(ValueFail, "no value is allowed here")
		}
		if f := check(n.ref, v, m); f != nil {
			return f
		}
	}
	t := v.Type()
	if n.types != 0 && !n.types.has(v, t) {
		if m == quiet {
			return quietVal
		}
		f := m.fail(ValueFail, "wrong type: want "+n.types.String()+", got "+typeOf(v, t))
		f.coercible = coercible(n.types, v, t)
		return f
	}
	if n.has&cEnum != 0 && !n.inEnum(v, t) {
		return m.fail(ValueFail, "value not in enum")
	}
	if n.has&cConst != 0 && !equal(v, n.constVal) {
		return m.fail(ValueFail, "value is not the const")
	}
	var f *fail
	switch {
	case t == fastjson.TypeObject && n.has&cObject != 0:
		f = n.object(v, m)
	case t == fastjson.TypeArray && n.has&cArray != 0:
		f = n.array(v, m)
	case t == fastjson.TypeString && n.has&cString != 0:
		f = n.string(v, m)
	case t == fastjson.TypeNumber && n.has&cNumber != 0:
		f = n.number(v, m)
	}
	if f != nil && f.kind == KeyFail || n.has&cComb == 0 {
		return f
	}
	// Combinators: a key failure found in them still outranks a value
	// failure found above.
	if g := n.combinators(v, m); g != nil && (f == nil || g.kind > f.kind) {
		return g
	}
	return f
}

func (n *node) combinators(v *fastjson.Value, m mode) *fail {
	var worst *fail
	for _, s := range n.allOf {
		if f := check(s, v, m); f != nil {
			if f.kind == KeyFail {
				return f
			}
			if worst == nil {
				worst = f
			}
		}
	}
	if worst != nil {
		return worst
	}
	if n.anyOf != nil {
		if f := anyOf(n.anyOf, v, "anyOf", m); f != nil {
			return f
		}
	}
	if n.oneOf != nil {
		passed := 0
		for _, s := range n.oneOf {
			if check(s, v, m) == nil {
				passed++
			}
		}
		switch {
		case passed == 0:
			return anyOf(n.oneOf, v, "oneOf", m)
		case passed > 1:
			return m.fail(ValueFail, "matches more than one branch of oneOf")
		}
	}
	if n.not != nil && check(n.not, v, m) == nil {
		return m.fail(ValueFail, "matches the schema of not")
	}
	return nil
}

// anyOf passes when a branch passes. When none does, a branch that failed on
// keys (the value had the branch's type but an undeclared or missing key)
// explains the failure better than a type mismatch of another branch.
func anyOf(subs []*node, v *fastjson.Value, kw string, m mode) *fail {
	var key *fail
	for _, s := range subs {
		f := check(s, v, m)
		if f == nil {
			return nil
		}
		if f.kind == KeyFail && key == nil {
			key = f
		}
	}
	if key != nil {
		return key
	}
	if m == quiet {
		return quietVal
	}
	return m.fail(ValueFail, "matches no branch of "+kw)
}

func (n *node) object(v *fastjson.Value, m mode) *fail {
	o, _ := v.Object()
	var val, key *fail
	var seen uint64 // bit i: props[i] is present and required
	o.Visit(func(k []byte, e *fastjson.Value) {
		if key != nil {
			return
		}
		var p *node
		if i := n.prop(k); i >= 0 {
			p = n.props[i].n
			if n.props[i].req && i < 64 {
				seen |= 1 << i
			}
		} else {
			if n.closed {
				key = m.fail(KeyFail, "undeclared argument").atKey(k)
				return
			}
			if p = n.addl; p == nil {
				return // free-form
			}
		}
		if f := check(p, e, m); f != nil {
			f.atKey(k)
			if f.kind == KeyFail {
				key = f
			} else if val == nil {
				val = f
			}
		}
	})
	if key != nil {
		return key
	}
	if !n.reqFast || seen != n.reqMask {
		// Some required key is missing, or not a declared prop: report the
		// first missing one in "required" order.
		for _, r := range n.required {
			if o.Get(r) == nil {
				return m.fail(KeyFail, "required argument missing").at(r)
			}
		}
	}
	if val != nil {
		return val
	}
	if l := o.Len(); l < n.minProps || (n.maxProps >= 0 && l > n.maxProps) {
		return m.fail(ValueFail, "number of properties out of range")
	}
	return nil
}

// prop finds the index in props of a declared key, or -1. Small property
// sets, the common case, are scanned; the map serves the large ones.
func (n *node) prop(k []byte) int {
	if len(n.props) <= 8 {
		tag := uint32(0)
		if len(k) > 0 {
			tag = uint32(len(k))<<8 | uint32(k[0])
		}
		for i := range n.props {
			if p := &n.props[i]; p.tag == tag && p.name == string(k) {
				return i
			}
		}
		return -1
	}
	if i, ok := n.propIndex[string(k)]; ok {
		return i
	}
	return -1
}

func (n *node) array(v *fastjson.Value, m mode) *fail {
	arr, _ := v.Array()
	if len(arr) < n.minItems {
		return m.fail(ValueFail, "too few items")
	}
	if n.maxItems >= 0 && len(arr) > n.maxItems {
		return m.fail(ValueFail, "too many items")
	}
	var val *fail
	for i, e := range arr {
		s := n.items
		if i < len(n.tuple) {
			s = n.tuple[i]
		} else if n.tuple != nil && n.items == nil {
			s = nil // items beyond a tuple are free unless items says otherwise
		}
		if s == nil {
			continue
		}
		if f := check(s, e, m); f != nil {
			f.atIndex(i)
			if f.kind == KeyFail {
				return f
			}
			if val == nil {
				val = f
			}
		}
	}
	if val != nil {
		return val
	}
	if n.unique {
		for i := 1; i < len(arr); i++ {
			for j := 0; j < i; j++ {
				if equalValues(arr[i], arr[j]) {
					return m.fail(ValueFail, "items are not unique").atIndex(i)
				}
			}
		}
	}
	return nil
}

func (n *node) string(v *fastjson.Value, m mode) *fail {
	if n.minLen == 0 && n.maxLen < 0 && n.pattern == nil {
		return nil
	}
	b := v.GetStringBytes()
	if n.minLen > 0 || n.maxLen >= 0 {
		l := utf8.RuneCount(b)
		if l < n.minLen {
			return m.fail(ValueFail, "string shorter than minLength")
		}
		if n.maxLen >= 0 && l > n.maxLen {
			return m.fail(ValueFail, "string longer than maxLength")
		}
	}
	if n.pattern != nil && !n.pattern.Match(b) {
		return m.fail(ValueFail, "string does not match pattern")
	}
	return nil
}

func (n *node) number(v *fastjson.Value, m mode) *fail {
	if !n.hasMin && !n.hasMax && !n.hasExMin && !n.hasExMax && n.multipleOf == 0 {
		return nil
	}
	x := v.GetFloat64()
	switch {
	case n.hasMin && x < n.min:
		return m.fail(ValueFail, "below minimum")
	case n.hasMax && x > n.max:
		return m.fail(ValueFail, "above maximum")
	case n.hasExMin && x <= n.exMin:
		return m.fail(ValueFail, "not above exclusiveMinimum")
	case n.hasExMax && x >= n.exMax:
		return m.fail(ValueFail, "not below exclusiveMaximum")
	}
	if n.multipleOf > 0 {
		q := x / n.multipleOf
		if math.IsInf(q, 0) || math.Abs(q-math.Round(q)) > 1e-9*math.Max(1, math.Abs(q)) {
			return m.fail(ValueFail, "not a multiple of multipleOf")
		}
	}
	return nil
}

func (n *node) inEnum(v *fastjson.Value, t fastjson.Type) bool {
	if n.strEnum != nil {
		if t != fastjson.TypeString {
			return false
		}
		b := v.GetStringBytes()
		for _, s := range n.strEnum {
			if s == string(b) {
				return true
			}
		}
		return false
	}
	for _, e := range n.enum {
		if equal(v, e) {
			return true
		}
	}
	return false
}

func (ts typeSet) has(v *fastjson.Value, t fastjson.Type) bool {
	switch t {
	case fastjson.TypeNull:
		return ts&tNull != 0
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return ts&tBoolean != 0
	case fastjson.TypeObject:
		return ts&tObject != 0
	case fastjson.TypeArray:
		return ts&tArray != 0
	case fastjson.TypeString:
		return ts&tString != 0
	case fastjson.TypeNumber:
		if ts&tNumber != 0 {
			return true
		}
		return ts&tInteger != 0 && isInteger(v.GetFloat64())
	}
	return false
}

// isInteger: spec v1 rule 4, a number with zero fraction is an integer.
func isInteger(f float64) bool { return f == math.Trunc(f) && !math.IsInf(f, 0) }

func (ts typeSet) String() string {
	var names []string
	for _, n := range [...]struct {
		t    typeSet
		name string
	}{{tNull, "null"}, {tBoolean, "boolean"}, {tObject, "object"}, {tArray, "array"},
		{tNumber, "number"}, {tInteger, "integer"}, {tString, "string"}, {tNone, "(unknown type)"}} {
		if ts&n.t != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, " or ")
}

func typeOf(v *fastjson.Value, t fastjson.Type) string {
	switch t {
	case fastjson.TypeNull:
		return "null"
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return "boolean"
	case fastjson.TypeObject:
		return "object"
	case fastjson.TypeArray:
		return "array"
	case fastjson.TypeString:
		return "string"
	}
	if isInteger(v.GetFloat64()) {
		return "integer"
	}
	return "number"
}

// coercible reports whether a lenient host would have converted the value
// losslessly: "5" for an integer, "true" for a boolean, 5 for a string.
func coercible(want typeSet, v *fastjson.Value, t fastjson.Type) bool {
	switch t {
	case fastjson.TypeString:
		s := string(v.GetStringBytes())
		if want&(tNumber|tInteger) != 0 {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				if want&tNumber != 0 || isInteger(f) {
					return true
				}
			}
		}
		return want&tBoolean != 0 && (s == "true" || s == "false")
	case fastjson.TypeNumber, fastjson.TypeTrue, fastjson.TypeFalse:
		return want&tString != 0
	}
	return false
}

// equal compares a parsed value with a schema constant (decoded with
// UseNumber) under JSON Schema equality: numbers by value.
func equal(v *fastjson.Value, c any) bool {
	switch c := c.(type) {
	case nil:
		return v.Type() == fastjson.TypeNull
	case bool:
		return (c && v.Type() == fastjson.TypeTrue) || (!c && v.Type() == fastjson.TypeFalse)
	case string:
		return v.Type() == fastjson.TypeString && string(v.GetStringBytes()) == c
	case json.Number:
		f, err := c.Float64()
		return err == nil && v.Type() == fastjson.TypeNumber && v.GetFloat64() == f
	case []any:
		arr, err := v.Array()
		if err != nil || len(arr) != len(c) {
			return false
		}
		for i := range arr {
			if !equal(arr[i], c[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		o, err := v.Object()
		if err != nil || o.Len() != len(c) {
			return false
		}
		ok := true
		o.Visit(func(k []byte, e *fastjson.Value) {
			want, found := c[string(k)]
			ok = ok && found && equal(e, want)
		})
		return ok
	}
	return false
}

// equalValues compares two parsed values under JSON Schema equality.
func equalValues(a, b *fastjson.Value) bool {
	ta, tb := a.Type(), b.Type()
	if ta != tb {
		return false
	}
	switch ta {
	case fastjson.TypeString:
		return string(a.GetStringBytes()) == string(b.GetStringBytes())
	case fastjson.TypeNumber:
		return a.GetFloat64() == b.GetFloat64()
	case fastjson.TypeArray:
		x, _ := a.Array()
		y, _ := b.Array()
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalValues(x[i], y[i]) {
				return false
			}
		}
		return true
	case fastjson.TypeObject:
		x, _ := a.Object()
		y, _ := b.Object()
		if x.Len() != y.Len() {
			return false
		}
		ok := true
		x.Visit(func(k []byte, e *fastjson.Value) {
			if ok {
				f := y.Get(string(k))
				ok = f != nil && equalValues(e, f)
			}
		})
		return ok
	}
	return true // null, true, false: same type is same value
}
