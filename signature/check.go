package signature

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolaudit/toolaudit/jsontape"
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

// walk is the state of one check: its mode (loud failures carry a reason
// and a path) and the work it may still do.
//
// Checking a value against a schema costs, in the worst case, the product
// of their sizes (an anyOf of many branches over a long array) or more (a
// recursive $ref with two branches descending into the same data: 2^depth).
// Every node visited costs a step, and so does every unit of work on a
// string (32 bytes counted, 4 bytes matched per instruction of a pattern)
// or on a value compared or hashed (an entry); when the steps run out the
// check fails (H3, "too costly"), so that no call costs more than a
// constant times its size: about a second for a megabyte at worst. The
// budget, budgetBase plus budgetPerByte per byte of the arguments, is far
// above what real schemas need (a few steps per value, a value taking
// several bytes).
type walk struct {
	quiet bool
	steps int
}

const (
	budgetBase    = 1 << 16
	budgetPerByte = 16
)

func newWalk(args jsontape.Value, quiet bool) walk {
	return walk{quiet: quiet, steps: budgetBase + budgetPerByte*len(args.Raw())}
}

// tooCostly is the reason of a check that ran out of steps.
var tooCostly = "arguments too costly to check against this schema (more than " +
	strconv.Itoa(budgetPerByte) + " steps per byte)"

func (w *walk) fail(k Kind, reason string) *fail {
	if w.quiet {
		if k == KeyFail {
			return quietKey
		}
		return quietVal
	}
	return &fail{kind: k, reason: reason}
}

// spend takes n steps and reports whether the budget still holds.
func (w *walk) spend(n int) bool {
	w.steps -= n
	return w.steps >= 0
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
func (s *Signature) Check(args jsontape.Value) Result {
	w := newWalk(args, false)
	f := check(s.root, args, &w)
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
func (s *Signature) Accepts(args jsontape.Value) bool {
	w := newWalk(args, true)
	return check(s.root, args, &w) == nil
}

func check(n *node, v jsontape.Value, w *walk) *fail {
	if !w.spend(1) {
		return w.fail(ValueFail, tooCostly)
	}
	if n.has&(cNever|cRef) != 0 {
		if n.never {
			return w.fail(ValueFail, n.why)
		}
		if f := check(n.ref, v, w); f != nil {
			return f
		}
	}
	t := v.Kind()
	if n.types != 0 && !n.types.has(v, t) {
		if w.quiet {
			return quietVal
		}
		f := w.fail(ValueFail, "wrong type: want "+n.types.String()+", got "+typeOf(v, t))
		f.coercible = coercible(n.types, v, t)
		return f
	}
	if n.has&cEnum != 0 && !n.inEnum(v, t, w) {
		return w.fail(ValueFail, "value not in enum")
	}
	if n.has&cConst != 0 && !(w.spend(v.Size()) && jsontape.Equal(v, n.constVal)) {
		return w.fail(ValueFail, "value is not the const")
	}
	var f *fail
	switch {
	case t == jsontape.Object && n.has&cObject != 0:
		f = n.object(v, w)
	case t == jsontape.Array && n.has&cArray != 0:
		f = n.array(v, w)
	case t == jsontape.String && n.has&cString != 0:
		f = n.string(v, w)
	case t == jsontape.Number && n.has&cNumber != 0:
		f = n.number(v, w)
	}
	if f != nil && f.kind == KeyFail || n.has&cComb == 0 {
		return f
	}
	// Combinators: a key failure found in them still outranks a value
	// failure found above.
	if g := n.combinators(v, w); g != nil && (f == nil || g.kind > f.kind) {
		return g
	}
	return f
}

func (n *node) combinators(v jsontape.Value, w *walk) *fail {
	var worst *fail
	for _, s := range n.allOf {
		if f := check(s, v, w); f != nil {
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
		passed, key := branches(n.anyOf, v, w, true)
		if passed == 0 {
			return explain(n.anyOf, key, v, "anyOf", w)
		}
	}
	if n.oneOf != nil {
		switch passed, key := branches(n.oneOf, v, w, false); {
		case passed == 0:
			return explain(n.oneOf, key, v, "oneOf", w)
		case passed > 1:
			return w.fail(ValueFail, "matches more than one branch of oneOf")
		}
	}
	if n.not != nil {
		f := w.quietly(n.not, v)
		if w.steps < 0 {
			return w.fail(ValueFail, tooCostly)
		}
		if f == nil {
			return w.fail(ValueFail, "matches the schema of not")
		}
	}
	return nil
}

// quietly checks v against s without building failures: the branches of
// anyOf, oneOf and not are checked this way, their failures being mostly
// discarded, and only a branch that explains a failure is checked again,
// loud (explain).
func (w *walk) quietly(s *node, v jsontape.Value) *fail {
	q := w.quiet
	w.quiet = true
	f := check(s, v, w)
	w.quiet = q
	return f
}

// branches counts the subs that v passes (stopping at the first when
// first is set) and returns the index of the first that failed on keys,
// or -1.
func branches(subs []*node, v jsontape.Value, w *walk, first bool) (passed, key int) {
	key = -1
	for i, s := range subs {
		f := w.quietly(s, v)
		if f == nil {
			passed++
			if first {
				return passed, key
			}
		} else if f.kind == KeyFail && key < 0 {
			key = i
		}
	}
	return passed, key
}

// explain is the failure of a value that passes no branch of subs. A
// branch that failed on keys (the value had the branch's type but an
// undeclared or missing key) explains it better than a type mismatch of
// another branch.
func explain(subs []*node, key int, v jsontape.Value, kw string, w *walk) *fail {
	switch {
	case w.steps < 0:
		return w.fail(ValueFail, tooCostly)
	case key >= 0 && w.quiet:
		return quietKey
	case key >= 0:
		return check(subs[key], v, w)
	case w.quiet:
		return quietVal
	}
	return w.fail(ValueFail, "matches no branch of "+kw)
}

func (n *node) object(v jsontape.Value, w *walk) *fail {
	var val *fail
	nReq := 0 // required names present (an object has no repeated names)
	for m := v.Members(); m.Next(); {
		k := m.Name()
		var p *node
		if i := n.prop(k); i >= 0 {
			p = n.props[i].n
			if n.props[i].req {
				nReq++
			}
		} else {
			if n.closed {
				return w.fail(KeyFail, "undeclared argument").atKey(k)
			}
			if n.reqOther != nil && n.reqOther[string(k)] {
				nReq++
			}
			if p = n.addl; p == nil {
				continue // free-form
			}
		}
		if f := check(p, m.Value(), w); f != nil {
			f.atKey(k)
			if f.kind == KeyFail {
				return f
			}
			if val == nil {
				val = f
			}
		}
	}
	if nReq != len(n.required) {
		if w.quiet {
			return quietKey
		}
		return w.fail(KeyFail, "required argument missing").at(n.missing(v))
	}
	if val != nil {
		return val
	}
	if l := v.Len(); l < n.minProps || (n.maxProps >= 0 && l > n.maxProps) {
		return w.fail(ValueFail, "number of properties out of range")
	}
	return nil
}

// missing returns the first required name, in "required" order, that
// object v lacks (a failure path: it may allocate).
func (n *node) missing(v jsontape.Value) string {
	keys := make(map[string]bool, v.Len())
	for m := v.Members(); m.Next(); {
		keys[string(m.Name())] = true
	}
	for _, r := range n.required {
		if !keys[r] {
			return r
		}
	}
	return ""
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

func (n *node) array(v jsontape.Value, w *walk) *fail {
	l := v.Len()
	if l < n.minItems {
		return w.fail(ValueFail, "too few items")
	}
	if n.maxItems >= 0 && l > n.maxItems {
		return w.fail(ValueFail, "too many items")
	}
	var val *fail
	i := 0
	for it := v.Items(); it.Next(); i++ {
		s := n.items
		if i < len(n.tuple) {
			s = n.tuple[i]
		} else if n.tuple != nil && n.items == nil {
			break // items beyond a tuple are free unless items says otherwise
		}
		if s == nil {
			break
		}
		if f := check(s, it.Value(), w); f != nil {
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
		if !w.spend(v.Size()) {
			return w.fail(ValueFail, tooCostly)
		}
		if i := firstRepeat(v); i >= 0 {
			return w.fail(ValueFail, "items are not unique").atIndex(i)
		}
	}
	return nil
}

// firstRepeat returns the smallest index of an item of array v equal to
// an earlier one, or -1. Small arrays are compared pairwise; larger ones
// by a keyed hash of each item (jsontape.Hash: numbers by value, members
// in any order): the hashes are sorted, and only items whose hash occurs
// twice are compared exactly, in order. n log n, where pairwise
// comparison took 8 minutes of CPU for 200,000 distinct integers.
func firstRepeat(v jsontape.Value) int {
	const small = 16
	if v.Len() <= small {
		var items [small]jsontape.Value
		i := 0
		for it := v.Items(); it.Next(); i++ {
			items[i] = it.Value()
			for j := 0; j < i; j++ {
				if jsontape.Equal(items[i], items[j]) {
					return i
				}
			}
		}
		return -1
	}
	hs := make([]uint64, 0, v.Len())
	for it := v.Items(); it.Next(); {
		hs = append(hs, jsontape.Hash(it.Value()))
	}
	sorted := slices.Clone(hs)
	slices.Sort(sorted)
	var twice map[uint64][]jsontape.Value // hashes seen twice -> the items so far
	for k := 1; k < len(sorted); k++ {
		if sorted[k] == sorted[k-1] {
			if twice == nil {
				twice = map[uint64][]jsontape.Value{}
			}
			twice[sorted[k]] = nil
		}
	}
	if twice == nil {
		return -1
	}
	i := 0
	for it := v.Items(); it.Next(); i++ {
		earlier, ok := twice[hs[i]]
		if !ok {
			continue
		}
		for _, e := range earlier {
			if jsontape.Equal(it.Value(), e) {
				return i
			}
		}
		twice[hs[i]] = append(earlier, it.Value())
	}
	return -1
}

func (n *node) string(v jsontape.Value, w *walk) *fail {
	if n.minLen == 0 && n.maxLen < 0 && n.pattern == nil {
		return nil
	}
	b := v.Str()
	if n.minLen > 0 || n.maxLen >= 0 {
		if !w.spend(len(b)>>5 + 1) {
			return w.fail(ValueFail, tooCostly)
		}
		l := utf8.RuneCount(b)
		if l < n.minLen {
			return w.fail(ValueFail, "string shorter than minLength")
		}
		if n.maxLen >= 0 && l > n.maxLen {
			return w.fail(ValueFail, "string longer than maxLength")
		}
	}
	if n.pattern != nil {
		// Matching costs up to the program's size per byte.
		if !w.spend(n.patInsts * (len(b) + 4) / 4) {
			return w.fail(ValueFail, tooCostly)
		}
		if !n.pattern.Match(b) {
			return w.fail(ValueFail, "string does not match pattern")
		}
	}
	return nil
}

func (n *node) number(v jsontape.Value, w *walk) *fail {
	if !n.hasMin && !n.hasMax && !n.hasExMin && !n.hasExMax && n.multipleOf == 0 {
		return nil
	}
	x := v.Float64()
	switch {
	case n.hasMin && x < n.min:
		return w.fail(ValueFail, "below minimum")
	case n.hasMax && x > n.max:
		return w.fail(ValueFail, "above maximum")
	case n.hasExMin && x <= n.exMin:
		return w.fail(ValueFail, "not above exclusiveMinimum")
	case n.hasExMax && x >= n.exMax:
		return w.fail(ValueFail, "not below exclusiveMaximum")
	}
	if n.multipleOf > 0 {
		q := x / n.multipleOf
		if math.IsInf(q, 0) || math.Abs(q-math.Round(q)) > 1e-9*math.Max(1, math.Abs(q)) {
			return w.fail(ValueFail, "not a multiple of multipleOf")
		}
	}
	return nil
}

func (n *node) inEnum(v jsontape.Value, t jsontape.Kind, w *walk) bool {
	e := n.enum
	if e.values == nil {
		if t != jsontape.String {
			return false
		}
		b := v.Str()
		if e.strSet != nil {
			_, ok := e.strSet[string(b)]
			return ok
		}
		for _, s := range e.strs {
			if s == string(b) {
				return true
			}
		}
		return false
	}
	if !w.spend(v.Size()) {
		return false
	}
	if e.hashes != nil {
		for _, i := range e.hashes[jsontape.Hash(v)] {
			if jsontape.Equal(v, e.values[i]) {
				return true
			}
		}
		return false
	}
	for _, x := range e.values {
		if jsontape.Equal(v, x) {
			return true
		}
	}
	return false
}

func (ts typeSet) has(v jsontape.Value, t jsontape.Kind) bool {
	switch t {
	case jsontape.Null:
		return ts&tNull != 0
	case jsontape.True, jsontape.False:
		return ts&tBoolean != 0
	case jsontape.Object:
		return ts&tObject != 0
	case jsontape.Array:
		return ts&tArray != 0
	case jsontape.String:
		return ts&tString != 0
	case jsontape.Number:
		if ts&tNumber != 0 {
			return true
		}
		return ts&tInteger != 0 && isInteger(v.Float64())
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

func typeOf(v jsontape.Value, t jsontape.Kind) string {
	switch t {
	case jsontape.Null:
		return "null"
	case jsontape.True, jsontape.False:
		return "boolean"
	case jsontape.Object:
		return "object"
	case jsontape.Array:
		return "array"
	case jsontape.String:
		return "string"
	}
	if isInteger(v.Float64()) {
		return "integer"
	}
	return "number"
}

// coercible reports whether a lenient host would have converted the value
// losslessly: "5" for an integer, "true" for a boolean, 5 for a string.
func coercible(want typeSet, v jsontape.Value, t jsontape.Kind) bool {
	switch t {
	case jsontape.String:
		s := string(v.Str())
		if want&(tNumber|tInteger) != 0 && len(s) < 1<<10 {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				if want&tNumber != 0 || isInteger(f) {
					return true
				}
			}
		}
		return want&tBoolean != 0 && (s == "true" || s == "false")
	case jsontape.Number, jsontape.True, jsontape.False:
		return want&tString != 0
	}
	return false
}
