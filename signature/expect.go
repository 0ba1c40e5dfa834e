package signature

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolaudit/toolaudit/jsontape"
)

// Expectation is what a signature expects at one path of the arguments,
// read from the compiled schema: the one reading that checking uses, so
// that what a rejected call is told cannot drift from what refused it.
// It is for failures (package resolve/suggest): Check never reads it.
type Expectation struct {
	// Keys are the keys declared there by name, sorted and distinct: the
	// properties of the nodes that apply (see Expect), which for an
	// object closed by default include the keys its if, then, else and
	// dependentSchemas branches declare, as Check counts them; and the
	// strings a patternProperties pattern matches when they are few and
	// fixed ("^(cpu|mem)_limit$" declares cpu_limit and mem_limit).
	Keys []string
	// Patterns are the patternProperties patterns there, as written
	// (ECMA-262), in schema order: keys they match are declared too.
	Patterns []string
	// Required are the keys required there, in order of first mention:
	// required, and the dependentRequired names of the keys present.
	Required []string
	// Value is the arguments' value at the path: the zero Value when
	// they have none there.
	Value jsontape.Value

	words []string // the value keywords of the nodes that have any (Values)
}

// Values returns, for each schema node that applies there and constrains
// the value, a JSON object of its value keywords as the schema writes
// them, in the order the walk meets the nodes (the node, its reference,
// allOf, anyOf, oneOf, then the branches of if and dependentSchemas that
// apply): several mean that several nodes, or the alternatives of a
// combinator, constrain the value. Each call parses them anew (they are
// kept as text: only a failure reads them).
//
// The value keywords are those that say what a value may be, in this
// order: type, enum, const, format (even when it is only an annotation:
// it tells the caller what to send), pattern, minLength, maxLength,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
// minItems, maxItems, uniqueItems, minProperties, maxProperties. Their
// values are as written, valid or not (what the checker makes of them is
// in Unsupported); a keyword the schema repeats is given once, the first.
func (e Expectation) Values() []jsontape.Value { return parseWords(e.words) }

// valueKeywords are the keywords of Expectation.Values, in their order.
var valueKeywords = [...]string{
	"type", "enum", "const", "format", "pattern", "minLength", "maxLength",
	"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
	"minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
}

// valueKeyword maps a keyword of valueKeywords to its index.
var valueKeyword = func() map[string]int {
	m := make(map[string]int, len(valueKeywords))
	for i, k := range valueKeywords {
		m[k] = i
	}
	return m
}()

// Bounds of Expect: combinators and references can multiply the nodes a
// path reaches, and a schema is the tool server's to write.
const (
	maxExpectNodes = 16 // schema nodes followed at once
	maxExpectRefs  = 32 // references followed in one walk
	maxLiterals    = 16 // fixed strings a pattern may match to declare them as keys
	maxLiteralLen  = 128
)

// notes are what Expect reads and Check never does, kept apart from the
// nodes so that checking reads none of it: the value keywords of the
// nodes that have any, as written, and what the patternProperties
// patterns are as written and which fixed strings they match.
type notes struct {
	// words are the JSON objects of the nodes' value keywords, compact,
	// substrings of one string: text is cheaper to keep than a tape (the
	// keywords are parsed when a call fails, by Expect).
	words    map[*node]string
	patterns map[*regexp.Regexp]patNote
}

type patNote struct {
	src      string
	literals []string // nil unless the pattern matches only these strings
}

// noteWords records the value keywords of schema object m, compiled into
// n, as a compact JSON object (see finishWords).
func (c *compiler) noteWords(n *node, m jsontape.Value) {
	var found [len(valueKeywords)]jsontape.Value
	some := false
	for mb := m.Members(); mb.Next(); {
		if i, ok := valueKeyword[string(mb.Name())]; ok && !found[i].Exists() {
			found[i], some = mb.Value(), true
		}
	}
	if !some {
		return
	}
	if c.words == nil {
		c.words = wordBufs.Get().(*wordBuf)
	}
	b := append(c.words.text, '{')
	first := true
	for i, v := range found {
		if !v.Exists() {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, valueKeywords[i]...)
		b = append(b, '"', ':')
		b = v.AppendCompact(b)
	}
	c.words.text = append(b, '}')
	c.words.ends = append(c.words.ends, wordEnd{n, len(c.words.text)})
}

// wordBuf holds the value keywords noted while compiling: the nodes'
// objects one after the other, and where each ends.
type wordBuf struct {
	text []byte
	ends []wordEnd
}

type wordEnd struct {
	n   *node
	end int
}

// wordBufs are the wordBufs of Compile, which goroutines call
// concurrently: the signature keeps one string of them.
var wordBufs = sync.Pool{New: func() any { return new(wordBuf) }}

// finishWords makes the noted value keywords the signature's: one string
// for all, a substring for each node.
func (c *compiler) finishWords() {
	w := c.words
	if w == nil {
		return
	}
	text := string(w.text)
	c.notes.words = make(map[*node]string, len(w.ends))
	start := 0
	for _, e := range w.ends {
		c.notes.words[e.n] = text[start:e.end]
		start = e.end
	}
	clear(w.ends) // the pool holds no node
	w.text, w.ends = w.text[:0], w.ends[:0]
	wordBufs.Put(w)
	c.words = nil
}

// notePattern records the source of a compiled patternProperties pattern.
func (c *compiler) notePattern(re *regexp.Regexp, src string) {
	if re == nil {
		return
	}
	if c.notes.patterns == nil {
		c.notes.patterns = map[*regexp.Regexp]patNote{}
	}
	c.notes.patterns[re] = patNote{src: src, literals: literals(re)}
}

// literals returns the strings a pattern anchored at both ends ("^...$")
// matches when they are few and fixed, else nil.
func literals(re *regexp.Regexp) []string {
	tr := re.String()
	if !strings.HasPrefix(tr, `\A`) || !strings.HasSuffix(tr, `\z`) {
		return nil
	}
	p, err := syntax.Parse(tr, syntax.Perl)
	if err != nil || p.Op != syntax.OpConcat || len(p.Sub) < 2 ||
		p.Sub[0].Op != syntax.OpBeginText || p.Sub[len(p.Sub)-1].Op != syntax.OpEndText {
		return nil
	}
	out := []string{""}
	for _, sub := range p.Sub[1 : len(p.Sub)-1] {
		if out = concatWords(out, words(sub)); out == nil {
			return nil
		}
	}
	return out
}

// words returns the strings p matches, if at most maxLiterals fixed ones.
func words(p *syntax.Regexp) []string {
	switch p.Op {
	case syntax.OpEmptyMatch:
		return []string{""}
	case syntax.OpLiteral:
		if p.Flags&syntax.FoldCase != 0 {
			return nil
		}
		return []string{string(p.Rune)}
	case syntax.OpCharClass:
		var out []string
		for i := 0; i+1 < len(p.Rune); i += 2 {
			for r := p.Rune[i]; r <= p.Rune[i+1]; r++ {
				if len(out) == maxLiterals {
					return nil
				}
				out = append(out, string(r))
			}
		}
		return out
	case syntax.OpCapture:
		return words(p.Sub[0])
	case syntax.OpQuest:
		return union([]string{""}, words(p.Sub[0]))
	case syntax.OpAlternate:
		out := []string{}
		for _, s := range p.Sub {
			if out = union(out, words(s)); out == nil {
				return nil
			}
		}
		return out
	case syntax.OpConcat:
		out := []string{""}
		for _, s := range p.Sub {
			if out = concatWords(out, words(s)); out == nil {
				return nil
			}
		}
		return out
	}
	return nil
}

func union(a, b []string) []string {
	if a == nil || b == nil || len(a)+len(b) > maxLiterals {
		return nil
	}
	return append(a, b...)
}

func concatWords(a, b []string) []string {
	if a == nil || b == nil || len(a)*len(b) > maxLiterals {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if len(x)+len(y) > maxLiteralLen {
				return nil
			}
			out = append(out, x+y)
		}
	}
	return out
}

// expectAt is a node reached by Expect's walk, with the dynamic scope it
// was reached in (signatures with a dynamic $dynamicRef).
type expectAt struct {
	n     *node
	scope []*resource
}

// expectWalk is the state of one Expect. Its steps are the budget of a
// check of the arguments (walk), shared by the nodes it visits, the
// patterns it matches and the conditions it decides: a hint costs no
// more than the check that failed.
type expectWalk struct {
	s     *Signature
	refs  int
	steps int
}

// Expect returns what the signature expects at path, a JSON pointer into
// args (a Result's Path). It follows the nodes that Check would apply
// there: properties, patternProperties whose pattern matches the key,
// additionalProperties or unevaluatedProperties for other keys, prefixItems
// and items; $ref and $dynamicRef (along the dynamic scope), across
// embedded $id resources and anchors; allOf, anyOf and oneOf (every
// branch); then or else as args decide if, and the dependentSchemas of the
// keys present. Where args has no value (the zero Value, or a path beyond
// it), every branch applies. The walk follows at most 16 nodes at a time
// and 32 references, within the step budget of a check of args. A path
// the schema does not reach, or that costs more than that budget, gets
// the zero Expectation.
func (s *Signature) Expect(args jsontape.Value, path string) Expectation {
	w := expectWalk{s: s, steps: budgetBase + budgetPerByte*len(args.Raw())}
	v := args
	nodes := w.expand(s.root, nil, v, nil)
	if w.steps < 0 {
		return Expectation{}
	}
	for _, tok := range pointerTokens(path) {
		in := v.Kind()
		v = memberAt(v, tok)
		var next []expectAt
		for _, a := range nodes {
			for _, ch := range w.children(a.n, tok, in) {
				next = w.expand(ch, a.scope, v, next)
			}
		}
		if len(next) == 0 || w.steps < 0 {
			return Expectation{}
		}
		nodes = next
	}
	e := s.expectation(nodes, v)
	e.Value = v
	return e
}

// expand appends n and the nodes it stands for at value v: its reference's
// target, its combinators' branches and the conditional branches that
// apply, recursively, at most maxExpectNodes in all.
func (w *expectWalk) expand(n *node, scope []*resource, v jsontape.Value, out []expectAt) []expectAt {
	if n == nil || len(out) >= maxExpectNodes || !w.spend(1) {
		return out
	}
	for _, a := range out {
		if a.n == n {
			return out
		}
	}
	if w.s.dynamic && n.res != nil && (len(scope) == 0 || scope[len(scope)-1] != n.res) {
		scope = append(slices.Clip(scope), n.res)
	}
	out = append(out, expectAt{n, scope})
	if w.refs < maxExpectRefs {
		sw := walk{scope: scope}
		if t := sw.target(n); t != nil {
			w.refs++
			out = w.expand(t, scope, v, out)
		}
	}
	for _, subs := range [...][]*node{n.allOf, n.anyOf, n.oneOf} {
		for _, b := range subs {
			out = w.expand(b, scope, v, out)
		}
	}
	if n.ifN != nil {
		then, els := w.condition(n, scope, v)
		if then {
			out = w.expand(n.thenN, scope, v, out)
		}
		if els {
			out = w.expand(n.elseN, scope, v, out)
		}
	}
	for _, d := range n.depSchemas {
		if !v.Exists() || v.Kind() == jsontape.Object && v.Get(d.name).Exists() {
			out = w.expand(d.n, scope, v, out)
		}
	}
	return out
}

// condition reports which of n's then and else apply to v: the one if
// decides, or both when it cannot be decided (no value, an unchecked
// part, too costly).
func (w *expectWalk) condition(n *node, scope []*resource, v jsontape.Value) (then, els bool) {
	if !v.Exists() || w.steps <= 0 {
		return true, true
	}
	cw := walk{quiet: true, steps: w.steps, scope: slices.Clone(scope)}
	f := check(n.ifN, v, &cw)
	w.steps = max(cw.steps, 0) // out of steps here, the path goes on undecided
	switch {
	case cw.steps < 0:
		return true, true
	case f == nil:
		return true, false
	case f.kind != Unchecked:
		return false, true
	}
	return true, true
}

// children are the subschemas of n that apply to member or item tok of a
// value of kind in; when in is unknown (Invalid), a declared key is taken
// first, an item next.
func (w *expectWalk) children(n *node, tok string, in jsontape.Kind) []*node {
	if in != jsontape.Array {
		if out := w.declaredChildren(n, tok); out != nil {
			return out
		}
	}
	if in != jsontape.Object {
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && (len(tok) == 1 || tok[0] != '0') {
			switch {
			case i < len(n.tuple):
				return []*node{n.tuple[i]}
			case n.items != nil:
				return []*node{n.items}
			}
		}
		if in == jsontape.Array {
			return nil
		}
	}
	switch {
	case n.addl != nil:
		return []*node{n.addl}
	case !n.hasAddl && n.uneval != nil:
		return []*node{n.uneval}
	}
	return nil
}

// declaredChildren are the subschemas of the properties and
// patternProperties that declare key tok.
func (w *expectWalk) declaredChildren(n *node, tok string) []*node {
	var out []*node
	if i := n.prop([]byte(tok)); i >= 0 {
		out = append(out, n.props[i].n)
	}
	for i := range n.patterns {
		p := &n.patterns[i]
		if p.re == nil || !w.spend(p.insts*(len(tok)+4)/4) { // as the check charges it
			continue
		}
		if p.re.MatchString(tok) {
			out = append(out, p.n)
		}
	}
	return out
}

// spend takes n steps and reports whether the budget still holds.
func (w *expectWalk) spend(n int) bool {
	w.steps -= n
	return w.steps >= 0
}

// expectation gathers what the nodes expect of value v.
func (s *Signature) expectation(nodes []expectAt, v jsontape.Value) Expectation {
	var e Expectation
	var keys, words []string
	var req, pats distinct
	for _, a := range nodes {
		n := a.n
		for i := range n.props {
			keys = append(keys, n.props[i].name)
		}
		for i := range n.patterns {
			p := n.patterns[i].re
			if p == nil {
				continue
			}
			pn, ok := s.notes.patterns[p]
			if !ok {
				continue
			}
			pats.add(pn.src)
			keys = append(keys, pn.literals...)
		}
		for _, r := range n.required {
			req.add(r)
		}
		for _, d := range n.depReq {
			if v.Kind() == jsontape.Object && v.Get(d.name).Exists() {
				for _, r := range d.req {
					req.add(r)
				}
			}
		}
		if ws, ok := s.notes.words[n]; ok {
			words = append(words, ws)
		}
	}
	e.words, e.Required, e.Patterns = words, req.list, pats.list
	if keys != nil {
		slices.Sort(keys)
		e.Keys = slices.Compact(keys)
	}
	return e
}

// distinct is a list of distinct strings in order of first mention: a
// scan while it is short, a set beyond.
type distinct struct {
	list []string
	set  map[string]bool
}

func (d *distinct) add(s string) {
	switch {
	case len(d.list) < 16:
		if slices.Contains(d.list, s) {
			return
		}
	case d.set == nil:
		d.set = make(map[string]bool, 2*len(d.list))
		for _, x := range d.list {
			d.set[x] = true
		}
		fallthrough
	default:
		if d.set[s] {
			return
		}
		d.set[s] = true
	}
	d.list = append(d.list, s)
}

// parseWords parses the value keywords of the nodes (compact JSON
// objects that parsed once, as parts of the schema) into a tape of their
// own.
func parseWords(words []string) []jsontape.Value {
	if words == nil {
		return nil
	}
	n := 1
	for _, w := range words {
		n += len(w) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, w := range words {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, w...)
	}
	b = append(b, ']')
	t := new(jsontape.Tape)
	if err := t.Parse(b); err != nil {
		panic("signature: value keywords do not parse again: " + err.Error()) // they parsed once
	}
	out := make([]jsontape.Value, 0, len(words))
	for it := t.Root().Items(); it.Next(); {
		out = append(out, it.Value())
	}
	return out
}

// memberAt returns member or item tok of v, or the zero Value.
func memberAt(v jsontape.Value, tok string) jsontape.Value {
	switch v.Kind() {
	case jsontape.Object:
		return v.Get(tok)
	case jsontape.Array:
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 {
			return jsontape.Value{}
		}
		for it := v.Items(); it.Next(); i-- {
			if i == 0 {
				return it.Value()
			}
		}
	}
	return jsontape.Value{}
}

// pointerTokens splits a JSON pointer into its unescaped tokens.
func pointerTokens(p string) []string {
	if p == "" {
		return nil
	}
	toks := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			toks[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
	}
	return toks
}
