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

// Outcomes, in increasing priority: a key failure outranks a value
// failure, which outranks an unchecked one.
const (
	Pass Kind = iota
	// Unchecked: the value reaches a part of the schema that the checker
	// does not enforce (Unsupported.Unchecked) and nothing else fails. The
	// value may satisfy the schema or not; it is refused all the same
	// (H3, the reason saying the contract is not enforced there), so that
	// an unenforced keyword is never an open door.
	Unchecked
	ValueFail // H3: type, enum, const, range, length, pattern, items count
	KeyFail   // H2: undeclared or missing required key
)

// notEnforced begins the reason of every Unchecked result.
const notEnforced = "not enforced: "

// NotEnforced reports whether reason is that of an Unchecked result (a
// decision's reason carries it): the arguments reached a part of the
// contract that the checker does not enforce, and were refused for it.
func NotEnforced(reason string) bool { return strings.HasPrefix(reason, notEnforced) }

// Result of a check. Path is a JSON pointer into the arguments.
type Result struct {
	Kind      Kind
	Path      string
	Reason    string
	Coercible bool
	// Undeclared: a key failure of a key the schema does not declare where
	// an object is closed (or that propertyNames refuses), as opposed to
	// a missing required key. An undeclared key anywhere in the arguments
	// is reported before a missing one: it is the evidence of a borrowed
	// shape (H5, contract v1.2 rule 6).
	Undeclared bool
}

// fail carries a failure up the recursion; it is allocated only on failure.
type fail struct {
	kind       Kind
	reason     string
	coercible  bool
	undeclared bool
	segs       []string // path segments, innermost first
}

// Accepts needs only pass or fail and which kind: in quiet mode failures
// are these shared values, so a scan over many tools does not allocate.
var (
	quietKey    = &fail{kind: KeyFail}
	quietUndecl = &fail{kind: KeyFail, undeclared: true}
	quietVal    = &fail{kind: ValueFail}
	quietUnk    = &fail{kind: Unchecked}
)

// walk is the state of one check: its mode (loud failures carry a reason
// and a path), the work it may still do, and the dynamic scope.
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
	// scope is the dynamic scope, outermost first: the resources entered
	// on the way to the node being checked (signatures with a dynamic
	// $dynamicRef only).
	scope []*resource
}

const (
	budgetBase    = 1 << 16
	budgetPerByte = 16
)

func newWalk(s *Signature, args jsontape.Value, quiet bool) walk {
	w := walk{quiet: quiet, steps: budgetBase + budgetPerByte*len(args.Raw())}
	if s.dynamic {
		w.scope = make([]*resource, 0, 8)
	}
	return w
}

// tooCostly is the reason of a check that ran out of steps.
var tooCostly = "arguments too costly to check against this schema (more than " +
	strconv.Itoa(budgetPerByte) + " steps per byte)"

func (w *walk) fail(k Kind, reason string) *fail {
	if w.quiet {
		switch k {
		case KeyFail:
			return quietKey
		case Unchecked:
			return quietUnk
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

func (f *fail) quiet() bool {
	return f == quietKey || f == quietVal || f == quietUnk || f == quietUndecl
}

// undeclared is the failure of key k, undeclared.
func (w *walk) undeclared(reason string, k []byte) *fail {
	if w.quiet {
		return quietUndecl
	}
	f := &fail{kind: KeyFail, reason: reason, undeclared: true}
	if k != nil {
		f.atKey(k)
	}
	return f
}

// stops reports whether a member's or item's failure ends the walk of its
// object or array: an undeclared key does, nothing can outrank it; other
// failures are kept while the walk looks for one.
func (f *fail) stops() bool { return f.kind == KeyFail && f.undeclared }

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

// worse returns the failure of higher priority, a on a tie (the first
// found).
func worse(a, b *fail) *fail {
	if a == nil || b != nil && (b.kind > a.kind || b.kind == a.kind && b.undeclared && !a.undeclared) {
		return b
	}
	return a
}

// Check checks the arguments of a call. It does not allocate when they pass.
func (s *Signature) Check(args jsontape.Value) Result {
	w := newWalk(s, args, false)
	f := check(s.root, args, &w)
	if f == nil {
		return Result{}
	}
	var b strings.Builder
	for i := len(f.segs) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(escape(f.segs[i]))
	}
	return Result{Kind: f.kind, Path: b.String(), Reason: f.reason, Coercible: f.coercible, Undeclared: f.undeclared}
}

// Accepts reports whether the arguments pass. Unchecked is not a pass.
func (s *Signature) Accepts(args jsontape.Value) bool {
	w := newWalk(s, args, true)
	return check(s.root, args, &w) == nil
}

// target is the node a $ref or $dynamicRef of n leads to, or nil.
func (w *walk) target(n *node) *node {
	if n.ref != nil {
		return n.ref
	}
	if d := n.x.dyn; d != nil {
		for _, r := range w.scope {
			if t := r.dynNodes[d.name]; t != nil {
				return t
			}
		}
		return d.initial
	}
	return nil
}

// check checks v against n. A node of a signature with dynamic references
// first enters its resource into the dynamic scope, then checks itself
// once more, now within it.
func check(n *node, v jsontape.Value, w *walk) *fail {
	if n.has&cScope != 0 && (len(w.scope) == 0 || w.scope[len(w.scope)-1] != n.res) {
		w.scope = append(w.scope, n.res)
		f := check(n, v, w)
		w.scope = w.scope[:len(w.scope)-1]
		return f
	}
	if !w.spend(1) {
		return w.fail(ValueFail, tooCostly)
	}
	var f *fail
	if n.has&(cNever|cRef|cUnchecked) != 0 {
		if n.never {
			return w.fail(ValueFail, n.why)
		}
		if n.x.unchecked != "" { // go on: a definite failure below outranks it
			f = w.fail(Unchecked, notEnforced+n.x.unchecked)
		}
		if r := w.target(n); r != nil {
			if g := check(r, v, w); g != nil {
				if g.stops() {
					return g
				}
				f = worse(f, g)
			}
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
	var g *fail
	switch {
	case t == jsontape.Object && n.has&cObject != 0:
		g = n.object(v, w)
	case t == jsontape.Array && n.has&cArray != 0:
		g = n.array(v, w)
	case t == jsontape.String && n.has&cString != 0:
		g = n.string(v, w)
	case t == jsontape.Number && n.has&cNumber != 0:
		g = n.number(v, w)
	}
	if f == nil && n.has&(cComb|cUneval) == 0 { // the common node: no reference, no combinator
		return g
	}
	if f = worse(f, g); f != nil && f.stops() {
		return f
	}
	// Combinators: a key failure found in them still outranks a value
	// failure found above.
	if n.has&cComb != 0 {
		if f = worse(f, n.combinators(v, w)); f != nil && f.stops() {
			return f
		}
	}
	if n.has&cUneval != 0 {
		f = worse(f, n.unevaluated(v, w))
	}
	return f
}

func (n *node) combinators(v jsontape.Value, w *walk) *fail {
	var worst *fail
	for _, s := range n.allOf {
		if f := check(s, v, w); f != nil {
			if f.stops() {
				return f
			}
			worst = worse(worst, f)
		}
	}
	if worst != nil && worst.kind >= ValueFail {
		return worst
	}
	if n.anyOf != nil {
		passed, key, unk := branches(n.anyOf, v, w, true)
		if passed == 0 {
			if unk >= 0 {
				worst = worse(worst, w.unknown(n.anyOf[unk], v, "anyOf"))
			} else {
				return explain(n.anyOf, key, v, "anyOf", w)
			}
		}
	}
	if n.oneOf != nil {
		switch passed, key, unk := branches(n.oneOf, v, w, false); {
		case passed > 1:
			return w.fail(ValueFail, "matches more than one branch of oneOf")
		case passed == 0 && unk < 0:
			return explain(n.oneOf, key, v, "oneOf", w)
		case unk >= 0:
			worst = worse(worst, w.unknown(n.oneOf[unk], v, "oneOf"))
		}
	}
	if n.not != nil {
		f := w.quietly(n.not, v)
		switch {
		case w.steps < 0:
			return w.fail(ValueFail, tooCostly)
		case f == nil:
			return w.fail(ValueFail, "matches the schema of not")
		case f.kind == Unchecked:
			worst = worse(worst, w.unknown(n.not, v, "not"))
		}
	}
	if n.has&cRareValue == 0 {
		return worst
	}
	if n.x.ifN != nil {
		worst = worse(worst, n.conditional(v, w))
		if worst != nil && worst.stops() {
			return worst
		}
	}
	if n.x.depSchemas != nil && v.Kind() == jsontape.Object {
		for _, d := range n.x.depSchemas {
			if !w.spend(v.Len()) {
				return w.fail(ValueFail, tooCostly)
			}
			if !v.Get(d.name).Exists() {
				continue
			}
			if f := check(d.n, v, w); f != nil {
				if f.stops() {
					return f
				}
				worst = worse(worst, f)
			}
		}
	}
	return worst
}

// conditional checks if, then and else. When if itself cannot be decided,
// the value passes only if it passes both then and else.
func (n *node) conditional(v jsontape.Value, w *walk) *fail {
	c := w.quietly(n.x.ifN, v)
	switch {
	case w.steps < 0:
		return w.fail(ValueFail, tooCostly)
	case c == nil:
		if n.x.thenN != nil {
			return check(n.x.thenN, v, w)
		}
	case c.kind != Unchecked:
		if n.x.elseN != nil {
			return check(n.x.elseN, v, w)
		}
	default:
		for _, b := range [...]*node{n.x.thenN, n.x.elseN} {
			if b != nil && w.quietly(b, v) != nil {
				return w.unknown(n.x.ifN, v, "if")
			}
		}
	}
	return nil
}

// unknown is the failure of a value that an unchecked part of s decides:
// Unchecked, with the reason of the part (checked again, loud).
func (w *walk) unknown(s *node, v jsontape.Value, kw string) *fail {
	if w.quiet {
		return quietUnk
	}
	f := check(s, v, w)
	if f == nil || f.kind != Unchecked {
		return w.fail(Unchecked, "not enforced: a branch of "+kw+" cannot be checked")
	}
	f.segs = f.segs[:0] // the path is the value's, not the branch's inside it
	return f
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
// and of the first unchecked, or -1.
func branches(subs []*node, v jsontape.Value, w *walk, first bool) (passed, key, unk int) {
	key, unk = -1, -1
	for i, s := range subs {
		f := w.quietly(s, v)
		switch {
		case f == nil:
			passed++
			if first {
				return passed, key, unk
			}
		case f.kind == KeyFail && key < 0:
			key = i
		case f.kind == Unchecked && unk < 0:
			unk = i
		}
	}
	return passed, key, unk
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
	rare := n.has&cRareKeys != 0
	for m := v.Members(); m.Next(); {
		k := m.Name()
		var p *node // the schema of the member's value
		declared, plain := false, false
		var types typeSet
		if i := n.prop(k); i >= 0 {
			pr := &n.props[i]
			declared, p, plain, types = true, pr.n, pr.plain, pr.types
			if pr.req {
				nReq++
			}
		} else if n.reqOther != nil && n.reqOther[string(k)] {
			nReq++
		}
		if rare {
			d, f := n.rareKeys(k, &m, w)
			declared = declared || d
			if f != nil {
				if f.atKey(k).stops() {
					return f
				}
				val = worse(val, f)
			}
		}
		if !declared {
			if n.closed {
				return w.undeclared("undeclared argument", k)
			}
			p = n.addl // nil: free-form
		}
		if p != nil {
			if plain && w.steps > 0 {
				// check(p) of a plain node is a step and the types: done
				// here when they pass, without reading p; a failure goes
				// to check for its reason.
				if mv := m.Value(); types == 0 || types.has(mv, mv.Kind()) {
					w.steps--
					continue
				}
			}
			if f := check(p, m.Value(), w); f != nil {
				if f.atKey(k).stops() {
					return f
				}
				val = worse(val, f)
			}
		}
	}
	if val != nil && val.kind == KeyFail { // a nested one, missing
		return val
	}
	if nReq != len(n.required) {
		if w.quiet {
			return quietKey
		}
		return w.fail(KeyFail, "required argument missing").at(n.missing(v))
	}
	if rare && n.x.depReq != nil {
		if f := n.dependentRequired(v, w); f != nil {
			return f
		}
	}
	if val != nil && val.kind == ValueFail {
		return val
	}
	if l := v.Len(); l < n.minProps || (n.maxProps >= 0 && l > n.maxProps) {
		return w.fail(ValueFail, "number of properties out of range")
	}
	return val
}

// dependentRequired checks that the keys each present key depends on are
// present too.
func (n *node) dependentRequired(v jsontape.Value, w *walk) *fail {
	for _, d := range n.x.depReq {
		if !w.spend(v.Len() * (1 + len(d.req))) {
			return w.fail(ValueFail, tooCostly)
		}
		if !v.Get(d.name).Exists() {
			continue
		}
		for _, r := range d.req {
			if !v.Get(r).Exists() {
				return w.fail(KeyFail, "required argument missing (dependentRequired of "+strconv.Quote(d.name)+")").at(r)
			}
		}
	}
	return nil
}

// rareKeys checks member m of key k against patternProperties and
// propertyNames, and reports whether a pattern declares k.
func (n *node) rareKeys(k []byte, m *jsontape.Members, w *walk) (bool, *fail) {
	var declared bool
	var val *fail
	if n.x.patterns != nil {
		declared, val = n.patternProps(k, m.Value(), w)
		if val != nil && val.stops() {
			return declared, val
		}
	}
	if n.x.propNames != nil {
		if f := check(n.x.propNames, m.NameValue(), w); f != nil {
			if f.kind != Unchecked {
				f = w.undeclared("key not allowed by propertyNames: "+f.reason, nil)
			}
			val = worse(val, f)
		}
	}
	return declared, val
}

// patternProps checks a member against the patternProperties whose
// pattern matches its key, and reports whether one did. A pattern that
// cannot be run leaves it unknown whether the key is declared: the member
// is unchecked, and counted as declared so that it is not also refused as
// undeclared.
func (n *node) patternProps(k []byte, v jsontape.Value, w *walk) (bool, *fail) {
	declared := false
	var worst *fail
	for i := range n.x.patterns {
		p := &n.x.patterns[i]
		if p.unchecked != "" {
			declared = true
			worst = worse(worst, w.fail(Unchecked, notEnforced+p.unchecked))
			continue
		}
		if !w.spend(p.insts * (len(k) + 4) / 4) {
			return true, w.fail(ValueFail, tooCostly)
		}
		if !p.re.Match(k) {
			continue
		}
		declared = true
		if f := check(p.n, v, w); f != nil {
			if f.stops() {
				return true, f
			}
			worst = worse(worst, f)
		}
	}
	return declared, worst
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
		h := headOf(k)
		for i := range n.props {
			if p := &n.props[i]; len(p.name) == len(k) && p.head == h && (len(k) <= 16 || p.name[16:] == string(k[16:])) {
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
			if f.atIndex(i).stops() {
				return f
			}
			val = worse(val, f)
		}
	}
	if val != nil && val.kind >= ValueFail {
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
	if n.has&cRareValue != 0 && n.x.contains != nil {
		return worse(val, n.containsCount(v, w))
	}
	return val
}

// containsCount checks contains, minContains and maxContains. Items whose
// match is unchecked may count either way: the result is unchecked unless
// the bounds hold, or fail, whichever way they count.
func (n *node) containsCount(v jsontape.Value, w *walk) *fail {
	matched, unk, first := 0, 0, -1
	i := 0
	for it := v.Items(); it.Next(); i++ {
		switch f := w.quietly(n.x.contains, it.Value()); {
		case f == nil:
			matched++
		case f.kind == Unchecked:
			unk++
			if first < 0 {
				first = i
			}
		}
	}
	switch {
	case w.steps < 0:
		return w.fail(ValueFail, tooCostly)
	case matched+unk < n.x.minContains:
		if n.x.minContains == 1 {
			return w.fail(ValueFail, "no item matches contains")
		}
		return w.fail(ValueFail, "fewer items than minContains match contains")
	case n.x.maxContains >= 0 && matched > n.x.maxContains:
		return w.fail(ValueFail, "more items than maxContains match contains")
	case matched < n.x.minContains || n.x.maxContains >= 0 && matched+unk > n.x.maxContains:
		return w.unknownItem(n.x.contains, v, first, "contains")
	}
	return nil
}

// unknownItem is unknown for item i of array v.
func (w *walk) unknownItem(s *node, v jsontape.Value, i int, kw string) *fail {
	if w.quiet {
		return quietUnk
	}
	j := 0
	for it := v.Items(); it.Next(); j++ {
		if j == i {
			return w.unknown(s, it.Value(), kw).atIndex(i)
		}
	}
	return w.fail(Unchecked, notEnforced+kw)
}

// unevaluated checks unevaluatedProperties and unevaluatedItems: the
// members or items that no other keyword of n, its references and its
// passing branches evaluated (JSON Schema 2020-12 §11).
func (n *node) unevaluated(v jsontape.Value, w *walk) *fail {
	switch t := v.Kind(); {
	case t == jsontape.Object && n.x.uneval != nil && v.Len() > 0:
		ev := make([]bool, v.Len())
		w.evalProps(n, v, ev, true)
		var val *fail
		i := 0
		for m := v.Members(); m.Next(); i++ {
			if ev[i] {
				continue
			}
			if n.x.uneval.never && n.x.uneval.why == falseSchema {
				return w.undeclared("undeclared argument", m.Name())
			}
			if f := check(n.x.uneval, m.Value(), w); f != nil {
				if f.atKey(m.Name()).stops() {
					return f
				}
				val = worse(val, f)
			}
		}
		return val
	case t == jsontape.Array && n.x.unevalItems != nil && v.Len() > 0:
		ev := make([]bool, v.Len())
		w.evalItems(n, v, ev, true)
		var val *fail
		i := 0
		for it := v.Items(); it.Next(); i++ {
			if ev[i] {
				continue
			}
			if f := check(n.x.unevalItems, it.Value(), w); f != nil {
				if n.x.unevalItems.never && n.x.unevalItems.why == falseSchema && !f.quiet() {
					f.reason = "item not allowed (unevaluatedItems)"
				}
				if f.atIndex(i).stops() {
					return f
				}
				val = worse(val, f)
			}
		}
		return val
	}
	return nil
}

// evalProps marks in ev the members of object v that n evaluates: its
// properties, patternProperties, additionalProperties and
// unevaluatedProperties, and those of its references and of the in-place
// branches that pass (allOf, anyOf, oneOf, if/then/else, dependentSchemas;
// not never). self is the node whose unevaluatedProperties asks.
func (w *walk) evalProps(n *node, v jsontape.Value, ev []bool, self bool) {
	if !w.spend(1) || n.never {
		return
	}
	if r := w.target(n); r != nil {
		w.evalProps(r, v, ev, false)
	}
	if n.hasAddl || n.closed || (!self && n.x.uneval != nil) {
		for i := range ev {
			ev[i] = true
		}
		return
	}
	i := 0
	for m := v.Members(); m.Next(); i++ {
		if ev[i] {
			continue
		}
		k := m.Name()
		if n.prop(k) >= 0 {
			ev[i] = true
			continue
		}
		for _, p := range n.x.patterns {
			if p.re != nil && w.spend(p.insts*(len(k)+4)/4) && p.re.Match(k) {
				ev[i] = true
				break
			}
		}
	}
	w.evalBranches(n, v, ev, false)
}

// evalItems marks in ev the items of array v that n evaluates, as
// evalProps does for members.
func (w *walk) evalItems(n *node, v jsontape.Value, ev []bool, self bool) {
	if !w.spend(1) || n.never {
		return
	}
	if r := w.target(n); r != nil {
		w.evalItems(r, v, ev, false)
	}
	if n.items != nil || (!self && n.x.unevalItems != nil) {
		for i := range ev {
			ev[i] = true
		}
		return
	}
	for i := 0; i < len(n.tuple) && i < len(ev); i++ {
		ev[i] = true
	}
	if n.x.contains != nil {
		i := 0
		for it := v.Items(); it.Next(); i++ {
			if !ev[i] && w.quietly(n.x.contains, it.Value()) == nil {
				ev[i] = true
			}
		}
	}
	w.evalBranches(n, v, ev, true)
}

// evalBranches runs evalProps (evalItems if items) over the in-place
// branches of n that v passes.
func (w *walk) evalBranches(n *node, v jsontape.Value, ev []bool, items bool) {
	if n.has&cComb == 0 {
		return
	}
	eval := func(w *walk, s *node, v jsontape.Value, ev []bool, self bool) {
		if items {
			w.evalItems(s, v, ev, self)
		} else {
			w.evalProps(s, v, ev, self)
		}
	}
	for _, s := range n.allOf {
		eval(w, s, v, ev, false)
	}
	for _, subs := range [...][]*node{n.anyOf, n.oneOf} {
		for _, s := range subs {
			if w.quietly(s, v) == nil {
				eval(w, s, v, ev, false)
			}
		}
	}
	if n.x.ifN != nil {
		if w.quietly(n.x.ifN, v) == nil {
			eval(w, n.x.ifN, v, ev, false)
			if n.x.thenN != nil {
				eval(w, n.x.thenN, v, ev, false)
			}
		} else if n.x.elseN != nil {
			eval(w, n.x.elseN, v, ev, false)
		}
	}
	for _, d := range n.x.depSchemas {
		if v.Kind() == jsontape.Object && v.Get(d.name).Exists() {
			eval(w, d.n, v, ev, false)
		}
	}
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
	if n.has&cRareValue == 0 {
		return nil
	}
	if n.x.format != nil {
		if !w.spend(len(b)>>3 + 1) {
			return w.fail(ValueFail, tooCostly)
		}
		if !n.x.format(string(b)) {
			return w.fail(ValueFail, "string is not a valid "+n.x.formatName)
		}
	}
	if n.x.patUnchecked != "" {
		return w.fail(Unchecked, notEnforced+n.x.patUnchecked)
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
	if n.multipleOf > 0 && !multipleOf(x, n.multipleOf) {
		return w.fail(ValueFail, "not a multiple of multipleOf")
	}
	return nil
}

// multipleOf reports whether x is a multiple of m (m > 0). The quotient is
// compared with its rounding at a relative tolerance, so that 0.3 is a
// multiple of 0.1 as written in decimal; a quotient too large for a float
// (1e308 of 0.5) is decided exactly by the remainder instead.
func multipleOf(x, m float64) bool {
	q := x / m
	if math.IsInf(q, 0) {
		return math.Mod(x, m) == 0
	}
	return math.Abs(q-math.Round(q)) <= 1e-9*math.Max(1, math.Abs(q))
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
