package signature

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolaudit/toolaudit/jsontape"
)

// Signature is a compiled inputSchema. It is immutable and safe for
// concurrent use.
type Signature struct {
	root        *node
	unsupported []Unsupported
	schema      []byte         // the inputSchema compiled, for Schema
	values      *jsontape.Tape // the enum and const values, copied out of the schema
}

// Unsupported is a keyword of the schema that the checker does not enforce,
// a keyword whose value is not valid JSON Schema, or a part of the schema
// that matches no value for a reason worth reporting (a $ref cycle).
type Unsupported struct {
	Path    string // JSON pointer into the schema
	Keyword string
	Why     string
}

func (u Unsupported) String() string {
	return u.Path + "/" + u.Keyword + ": " + u.Why
}

// Unsupported lists what the checker ignores in this schema; empty for the
// schemas of every real manifest in the corpus. At most maxReports entries
// are listed, the last one saying how many more there were.
func (s *Signature) Unsupported() []Unsupported { return s.unsupported }

// ErrSchema is returned by Compile for a schema it cannot use at all.
var ErrSchema = errors.New("unusable inputSchema")

type typeSet uint8

const (
	tNull typeSet = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger
	tString
	tNone // a type name that is not JSON Schema's: matches no value
)

var typeNames = map[string]typeSet{
	"null": tNull, "boolean": tBoolean, "object": tObject, "array": tArray,
	"number": tNumber, "integer": tInteger, "string": tString,
}

type prop struct {
	tag  uint32 // len(name)<<8 | name[0]: most mismatches end here, before the bytes are read
	name string
	n    *node
	req  bool // named in "required"
}

func tagOf(name string) uint32 {
	if name == "" {
		return 0
	}
	return uint32(len(name))<<8 | uint32(name[0])
}

// checks says which groups of keywords a node has, so that checking a
// value reads one word of the node instead of every field.
type checks uint16

const (
	cNever checks = 1 << iota
	cRef
	cEnum
	cConst
	cObject
	cArray
	cString
	cNumber
	cComb
)

// node is one compiled schema node. Zero values mean "no constraint". The
// fields read for every value come first.
type node struct {
	has   checks
	types typeSet // 0: any type
	never bool    // the false schema, or a node of a $ref cycle
	why   string  // why never: the failure's reason

	// objects
	props     []prop         // sorted by name; nil when "properties" is absent
	propIndex map[string]int // name -> index in props
	// required lists the distinct required names in schema order; nReq
	// counts them. Those that are props are flagged (prop.req); the others
	// are in reqOther, so that an object's keys are counted against
	// required in one pass (an object has no repeated names).
	required   []string
	reqOther   map[string]bool
	closed     bool  // undeclared keys fail (H2)
	addl       *node // schema for undeclared keys when open with a schema
	minProps   int
	maxProps   int // -1: none
	hasObjKeys bool

	// arrays
	items    *node
	tuple    []*node
	minItems int
	maxItems int // -1: none
	unique   bool

	// strings
	minLen, maxLen int // maxLen -1: none
	pattern        *regexp.Regexp
	patInsts       int // the pattern's program size: matching costs up to this per byte

	// numbers
	min, max, exMin, exMax             float64
	hasMin, hasMax, hasExMin, hasExMax bool
	multipleOf                         float64

	// values
	enum     *enumSpec // nil: no enum
	constVal jsontape.Value
	hasConst bool

	anyOf, oneOf, allOf []*node
	not                 *node
	ref                 *node
}

// enumSpec is a compiled enum, apart from the node: few nodes have one.
type enumSpec struct {
	values []jsontape.Value    // nil when all are strings
	hashes map[uint64][]int32  // large enums: jsontape.Hash -> indices in values
	strs   []string            // the values when all are strings
	strSet map[string]struct{} // large string enums
}

// unsupportedKeywords are JSON Schema validation keywords this checker does
// not enforce. They are reported at compile time.
var unsupportedKeywords = map[string]bool{
	"if": true, "then": true, "else": true, "dependencies": true,
	"dependentRequired": true, "dependentSchemas": true, "patternProperties": true,
	"propertyNames": true, "contains": true, "minContains": true, "maxContains": true,
	"unevaluatedProperties": true, "unevaluatedItems": true, "additionalItems": true,
	"$dynamicRef": true, "$recursiveRef": true, "$dynamicAnchor": true,
	"$recursiveAnchor": true, "nullable": true,
}

// Limits of Compile.
const (
	// maxReports bounds the Unsupported entries of one schema: a hostile
	// schema can hold an unsupported keyword in every node.
	maxReports = 64
	// maxPatternInsts bounds a pattern's program: matching costs up to
	// its size per byte of the string, and a 14-byte pattern can compile
	// to 400 instructions ((?s).*a.{400}c). Larger ones are reported and
	// not enforced.
	maxPatternInsts = 1000
	// smallEnum is the largest enum scanned; larger ones are looked up in
	// a hash table.
	smallEnum = 8
)

// Compile compiles an inputSchema (a JSON object). It fails only when the
// schema is not a JSON object (or not JSON); problems inside it are
// reported by Unsupported and the offending keyword is ignored.
//
// Compiling costs time and memory linear in the schema, whatever its
// shape: a large object is indexed once when $ref pointers look into it,
// paths of reports are spelled only for the reported ones.
func Compile(schema []byte) (*Signature, error) {
	tape := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(tape) // the signature keeps copies of what it needs (copyValues)
	if err := tape.Parse(schema); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	root := tape.Root()
	if root.Kind() != jsontape.Object {
		return nil, fmt.Errorf("%w: not a JSON object", ErrSchema)
	}
	c := &compiler{doc: root, refs: map[string]*node{}, index: map[jsontape.Value]*objIndex{}, at: map[*node]*seg{}}
	s := &Signature{root: c.alloc(nil)}
	c.compile(s.root, root, nil, true)
	c.cycles()
	s.unsupported = c.reports()
	s.values = c.copyValues()
	s.schema = bytes.Clone(schema)
	return s, nil
}

// Schema returns the inputSchema this signature was compiled from, as
// given to Compile (a copy). Do not modify. It is read only when a call
// fails, to tell the caller what the schema expects (package
// resolve/suggest): the compiled form keeps what checking needs, not the
// schema's wording.
func (s *Signature) Schema() []byte { return s.schema }

// tapes are the parse buffers of Compile, which goroutines call
// concurrently.
var tapes = sync.Pool{New: func() any { return new(jsontape.Tape) }}

// seg is one token of a JSON pointer into the schema, linked to its
// parent: a node's path costs one seg, and a path is spelled only when
// it is reported.
type seg struct {
	parent *seg
	tok    string
	raw    bool // tok is already an escaped pointer ("/$defs/a")
}

func (s *seg) child(tok string) *seg { return &seg{parent: s, tok: tok} }

func (s *seg) String() string {
	var toks []*seg
	for ; s != nil; s = s.parent {
		toks = append(toks, s)
	}
	var b strings.Builder
	for i := len(toks) - 1; i >= 0; i-- {
		if toks[i].raw {
			b.WriteString(toks[i].tok)
			continue
		}
		b.WriteByte('/')
		b.WriteString(escape(toks[i].tok))
	}
	return b.String()
}

type report struct {
	at      *seg
	keyword string
	why     string
}

type compiler struct {
	slab     []node // nodes are carved from slabs: a schema's nodes sit together in memory
	all      []*node
	at       map[*node]*seg
	doc      jsontape.Value
	refs     map[string]*node
	index    map[jsontape.Value]*objIndex
	reported []report
	nReports int
	kept     []*jsontape.Value // enum and const values, to copy out of the schema's tape
}

// copyValues moves the enum and const values to a tape of their own, so
// that a compiled signature holds those values, not the whole schema's
// tape (16 bytes per value of the schema).
func (c *compiler) copyValues() *jsontape.Tape {
	if len(c.kept) == 0 {
		return nil
	}
	var buf []byte
	buf = append(buf, '[')
	for i, v := range c.kept {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = v.AppendCompact(buf)
	}
	buf = append(buf, ']')
	t := new(jsontape.Tape)
	if err := t.Parse(buf); err != nil {
		panic("signature: enum and const values do not parse again: " + err.Error()) // they parsed once
	}
	it := t.Root().Items()
	for _, v := range c.kept {
		it.Next()
		*v = it.Value()
	}
	return t
}

// alloc returns a new node with "no constraint" bounds. Slabs are never
// grown in place, so earlier nodes keep their addresses.
func (c *compiler) alloc(at *seg) *node {
	if len(c.slab) == cap(c.slab) {
		c.slab = make([]node, 0, 16)
	}
	c.slab = append(c.slab, node{maxProps: -1, maxItems: -1, maxLen: -1})
	n := &c.slab[len(c.slab)-1]
	c.all = append(c.all, n)
	c.at[n] = at
	return n
}

func (c *compiler) report(at *seg, kw, why string) {
	c.nReports++
	if len(c.reported) < maxReports {
		c.reported = append(c.reported, report{at, kw, why})
	}
}

func (c *compiler) reports() []Unsupported {
	if c.nReports == 0 {
		return nil
	}
	out := make([]Unsupported, 0, len(c.reported)+1)
	for _, r := range c.reported {
		out = append(out, Unsupported{Path: r.at.String(), Keyword: r.keyword, Why: r.why})
	}
	if more := c.nReports - len(c.reported); more > 0 {
		out = append(out, Unsupported{Keyword: "…", Why: strconv.Itoa(more) + " more not listed"})
	}
	return out
}

// node compiles the schema s found at at into a new node.
func (c *compiler) node(s jsontape.Value, at *seg) *node {
	n := c.alloc(at)
	c.compile(n, s, at, false)
	return n
}

// compile compiles s into n. root marks the top-level inputSchema, which
// is closed even without properties.
func (c *compiler) compile(n *node, s jsontape.Value, at *seg, root bool) {
	switch s.Kind() {
	case jsontape.True:
		if root {
			n.closed = true // closed-world: the top level never takes unknown keys
		}
	case jsontape.False:
		n.never, n.why = true, "no value is allowed here"
	case jsontape.Object:
		c.fill(n, s, at, root)
	default:
		c.report(at, "", "schema is neither an object nor a boolean")
	}
	n.markRequired()
	n.has = n.summarize()
}

// markRequired flags the required props and puts the other required
// names in reqOther.
func (n *node) markRequired() {
	for _, r := range n.required {
		if i, ok := n.propIndex[r]; ok {
			n.props[i].req = true
			continue
		}
		if n.reqOther == nil {
			n.reqOther = map[string]bool{}
		}
		n.reqOther[r] = true
	}
}

func (n *node) summarize() checks {
	var h checks
	set := func(c checks, on bool) {
		if on {
			h |= c
		}
	}
	set(cNever, n.never)
	set(cRef, n.ref != nil)
	set(cEnum, n.enum != nil)
	set(cConst, n.hasConst)
	set(cObject, n.props != nil || n.closed || n.addl != nil || n.required != nil || n.minProps > 0 || n.maxProps >= 0)
	set(cArray, n.items != nil || n.tuple != nil || n.minItems > 0 || n.maxItems >= 0 || n.unique)
	set(cString, n.minLen > 0 || n.maxLen >= 0 || n.pattern != nil)
	set(cNumber, n.hasMin || n.hasMax || n.hasExMin || n.hasExMax || n.multipleOf > 0)
	set(cComb, n.anyOf != nil || n.oneOf != nil || n.allOf != nil || n.not != nil)
	return h
}

type member struct {
	name string
	v    jsontape.Value
}

// sortedMembers returns the members of object o sorted by name: reports
// and props come out in a deterministic order.
func sortedMembers(o jsontape.Value) []member {
	ms := make([]member, 0, o.Len())
	for m := o.Members(); m.Next(); {
		ms = append(ms, member{string(m.Name()), m.Value()})
	}
	slices.SortFunc(ms, func(a, b member) int { return strings.Compare(a.name, b.name) })
	return ms
}

func (c *compiler) fill(n *node, m jsontape.Value, at *seg, root bool) {
	addl := m.Get("additionalProperties")
	for _, kv := range sortedMembers(m) {
		k, v := kv.name, kv.v
		switch k {
		case "type":
			n.types = c.types(v, at)
		case "properties":
			if v.Kind() != jsontape.Object {
				c.report(at, k, "not an object")
				continue
			}
			kp := at.child(k)
			pm := sortedMembers(v)
			n.hasObjKeys = true
			n.props = make([]prop, 0, len(pm))
			n.propIndex = make(map[string]int, len(pm))
			// The names are packed in one string, so that looking a key up
			// reads adjacent memory.
			var b strings.Builder
			for _, p := range pm {
				b.WriteString(p.name)
			}
			packed := b.String()
			off := 0
			for _, p := range pm {
				pn := c.node(p.v, kp.child(p.name))
				n.propIndex[p.name] = len(n.props)
				n.props = append(n.props, prop{tagOf(p.name), packed[off : off+len(p.name)], pn, false})
				off += len(p.name)
			}
		case "required":
			if v.Kind() != jsontape.Array {
				c.report(at, k, "not an array")
				continue
			}
			seen := map[string]bool{}
			for it := v.Items(); it.Next(); {
				e := it.Value()
				if e.Kind() != jsontape.String {
					c.report(at, k, "an entry is not a string")
					continue
				}
				if s := string(e.Str()); !seen[s] {
					seen[s] = true
					n.required = append(n.required, s)
				}
			}
		case "additionalProperties":
			switch v.Kind() {
			case jsontape.True, jsontape.False:
			case jsontape.Object:
				n.addl = c.node(v, at.child(k))
			default:
				c.report(at, k, "neither a boolean nor a schema")
			}
		case "minProperties":
			n.minProps = c.count(v, at, k, 0)
		case "maxProperties":
			n.maxProps = c.count(v, at, k, -1)
		case "items":
			if v.Kind() == jsontape.Array { // draft 4 to 2019-09 tuple form
				n.tuple = c.nodes(v, at.child(k))
				continue
			}
			n.items = c.node(v, at.child(k))
		case "prefixItems":
			if v.Kind() != jsontape.Array {
				c.report(at, k, "not an array")
				continue
			}
			n.tuple = c.nodes(v, at.child(k))
		case "minItems":
			n.minItems = c.count(v, at, k, 0)
		case "maxItems":
			n.maxItems = c.count(v, at, k, -1)
		case "uniqueItems":
			switch v.Kind() {
			case jsontape.True:
				n.unique = true
			case jsontape.False:
			default:
				c.report(at, k, "not a boolean")
			}
		case "minLength":
			n.minLen = c.count(v, at, k, 0)
		case "maxLength":
			n.maxLen = c.count(v, at, k, -1)
		case "pattern":
			c.pattern(n, v, at)
		case "minimum":
			n.min, n.hasMin = c.number(v, at, k)
		case "maximum":
			n.max, n.hasMax = c.number(v, at, k)
		case "exclusiveMinimum":
			if b := v.Kind(); b == jsontape.True || b == jsontape.False { // draft 4: a modifier of minimum
				if b == jsontape.True {
					n.exMin, n.hasExMin = numberOf(m.Get("minimum"))
				}
				continue
			}
			n.exMin, n.hasExMin = c.number(v, at, k)
		case "exclusiveMaximum":
			if b := v.Kind(); b == jsontape.True || b == jsontape.False {
				if b == jsontape.True {
					n.exMax, n.hasExMax = numberOf(m.Get("maximum"))
				}
				continue
			}
			n.exMax, n.hasExMax = c.number(v, at, k)
		case "multipleOf":
			f, ok := c.number(v, at, k)
			if ok && f > 0 {
				n.multipleOf = f
			}
		case "enum":
			if v.Kind() != jsontape.Array {
				c.report(at, k, "not an array")
				continue
			}
			c.enum(n, v)
		case "const":
			n.hasConst, n.constVal = true, v
			c.kept = append(c.kept, &n.constVal)
		case "anyOf", "oneOf", "allOf":
			if v.Kind() != jsontape.Array || v.Len() == 0 {
				c.report(at, k, "not a non-empty array")
				continue
			}
			subs := c.nodes(v, at.child(k))
			switch k {
			case "anyOf":
				n.anyOf = subs
			case "oneOf":
				n.oneOf = subs
			default:
				n.allOf = subs
			}
		case "not":
			n.not = c.node(v, at.child(k))
		case "$ref":
			n.ref = c.ref(v, at)
		default:
			if unsupportedKeywords[k] {
				c.report(at, k, "keyword not enforced")
			}
			// Anything else is an annotation or not a JSON Schema keyword,
			// which JSON Schema itself ignores.
		}
	}
	// Closed world: the top level, and every node that declares properties,
	// rejects undeclared keys unless additionalProperties opens it.
	switch addl.Kind() {
	case jsontape.Invalid: // absent
		n.closed = root || n.props != nil
	case jsontape.True, jsontape.Object:
	default: // false, or a value that is not a schema (reported)
		n.closed = true
	}
}

// nodes compiles each schema of array v.
func (c *compiler) nodes(v jsontape.Value, at *seg) []*node {
	out := make([]*node, 0, v.Len())
	for it := v.Items(); it.Next(); {
		out = append(out, c.node(it.Value(), at.child(strconv.Itoa(len(out)))))
	}
	return out
}

func (c *compiler) enum(n *node, v jsontape.Value) {
	e := &enumSpec{}
	n.enum = e
	allStr := true
	for it := v.Items(); it.Next(); {
		e.values = append(e.values, it.Value())
		allStr = allStr && it.Value().Kind() == jsontape.String
	}
	if allStr {
		e.strs = make([]string, len(e.values))
		for i, x := range e.values {
			e.strs[i] = string(x.Str())
		}
		if len(e.strs) > smallEnum {
			e.strSet = make(map[string]struct{}, len(e.strs))
			for _, s := range e.strs {
				e.strSet[s] = struct{}{}
			}
		}
		e.values = nil
		return
	}
	for i := range e.values {
		c.kept = append(c.kept, &e.values[i])
	}
	if len(e.values) > smallEnum {
		e.hashes = make(map[uint64][]int32, len(e.values))
		for i, x := range e.values {
			h := jsontape.Hash(x)
			e.hashes[h] = append(e.hashes[h], int32(i))
		}
	}
}

func (c *compiler) pattern(n *node, v jsontape.Value, at *seg) {
	if v.Kind() != jsontape.String {
		c.report(at, "pattern", "not a string")
		return
	}
	s := string(v.Str())
	re, err := regexp.Compile(s)
	if err != nil {
		// ECMA-262 features RE2 lacks (lookaround, backreferences).
		c.report(at, "pattern", "not an RE2 regular expression: "+err.Error())
		return
	}
	// The size of the program regexp runs, as regexp computes it.
	insts := maxPatternInsts + 1
	if p, err := syntax.Parse(s, syntax.Perl); err == nil {
		if prog, err := syntax.Compile(p.Simplify()); err == nil {
			insts = len(prog.Inst)
		}
	}
	if insts > maxPatternInsts {
		c.report(at, "pattern", "compiles to "+strconv.Itoa(insts)+" instructions, more than "+strconv.Itoa(maxPatternInsts)+": matching would cost too much per byte")
		return
	}
	n.pattern, n.patInsts = re, insts
}

func (c *compiler) types(v jsontape.Value, at *seg) typeSet {
	var ts typeSet
	add := func(e jsontape.Value) {
		s := string(e.Str())
		if b, ok := typeNames[s]; ok && e.Kind() == jsontape.String {
			ts |= b
		} else {
			// Not a JSON Schema type ("dict", "float", "any"): no value
			// can be shown to have it, so it matches nothing.
			c.report(at, "type", fmt.Sprintf("unknown type %q matches nothing", s))
			ts |= tNone
		}
	}
	switch v.Kind() {
	case jsontape.String:
		add(v)
	case jsontape.Array:
		for it := v.Items(); it.Next(); {
			add(it.Value())
		}
	default:
		c.report(at, "type", "neither a string nor an array")
		return 0
	}
	return ts
}

func (c *compiler) count(v jsontape.Value, at *seg, kw string, def int) int {
	f, ok := numberOf(v)
	if !ok || f < 0 || f != math.Trunc(f) {
		c.report(at, kw, "not a non-negative integer")
		return def
	}
	return int(min(f, math.MaxInt32))
}

func (c *compiler) number(v jsontape.Value, at *seg, kw string) (float64, bool) {
	f, ok := numberOf(v)
	if !ok {
		c.report(at, kw, "not a number")
	}
	return f, ok
}

func numberOf(v jsontape.Value) (float64, bool) {
	if v.Kind() != jsontape.Number {
		return 0, false
	}
	return v.Float64(), true
}

// ref resolves a local JSON pointer reference ("#/$defs/X"); the referenced
// node is compiled once, so recursive schemas terminate.
func (c *compiler) ref(v jsontape.Value, at *seg) *node {
	s := string(v.Str())
	if v.Kind() != jsontape.String || !strings.HasPrefix(s, "#") {
		c.report(at, "$ref", "only local references (#/...) are supported")
		return nil
	}
	if n, ok := c.refs[s]; ok {
		return n
	}
	target := c.doc
	if ptr := s[1:]; ptr != "" {
		if ptr[0] != '/' {
			target = jsontape.Value{}
		}
		for _, tok := range strings.Split(ptr, "/")[1:] {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			if target = c.lookup(target, tok); !target.Exists() {
				break
			}
		}
	}
	if !target.Exists() {
		c.report(at, "$ref", "reference "+strconv.Quote(s)+" not found")
		return nil
	}
	n := c.alloc(&seg{tok: s[1:], raw: true})
	c.refs[s] = n // before compiling: a recursive reference finds it
	c.compile(n, target, c.at[n], s == "#")
	return n
}

// objIndex indexes a large object or array of the schema that $ref
// pointers look into, so that n pointers cost n lookups, not n scans.
type objIndex struct {
	members map[string]jsontape.Value
	items   []jsontape.Value
}

// lookup returns the member tok of an object, or item tok of an array.
func (c *compiler) lookup(v jsontape.Value, tok string) jsontape.Value {
	k := v.Kind()
	if k != jsontape.Object && k != jsontape.Array {
		return jsontape.Value{}
	}
	idx := c.index[v]
	if idx == nil {
		idx = &objIndex{}
		if k == jsontape.Object {
			idx.members = make(map[string]jsontape.Value, v.Len())
			for m := v.Members(); m.Next(); {
				idx.members[string(m.Name())] = m.Value()
			}
		} else {
			for it := v.Items(); it.Next(); {
				idx.items = append(idx.items, it.Value())
			}
		}
		c.index[v] = idx
	}
	if k == jsontape.Object {
		return idx.members[tok]
	}
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 || i >= len(idx.items) || (len(tok) > 1 && tok[0] == '0') {
		return jsontape.Value{}
	}
	return idx.items[i]
}

func escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}
