package signature

import (
	"bytes"
	"encoding/binary"
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
	"github.com/toolaudit/toolaudit/signature/ecmare"
)

// Signature is a compiled inputSchema. It is immutable and safe for
// concurrent use.
type Signature struct {
	// dynamic and the root node come first, in the signature's own
	// memory: a check reads them first, and they share a cache line
	// rather than one leading to the other (checking is bound by memory
	// latency).
	dynamic     bool // the schema has a $dynamicRef that looks along the dynamic scope
	rootNode    node
	root        *node // &rootNode
	unsupported []Unsupported
	unchecked   bool           // some part of the schema is not enforced (Enforced)
	schema      []byte         // the inputSchema compiled, for Schema
	notes       notes          // what Expect reads of the schema and Check does not
	values      *jsontape.Tape // the enum and const values, copied out of the schema
}

// Unsupported is a part of the schema the checker does not enforce as
// written: a keyword it cannot enforce, a keyword whose value is not valid
// JSON Schema, a reference that leads nowhere, a pattern that RE2 cannot
// run, or a part that matches no value for a reason worth reporting (a
// $ref cycle, an unknown type name).
type Unsupported struct {
	Path    string // JSON pointer into the schema
	Keyword string
	Why     string
	// Unchecked: a value that reaches this part cannot be shown to satisfy
	// it, so a check that reaches it fails with kind Unchecked (the
	// checker fails closed: an unenforced part is never an open door).
	// Otherwise the part is stricter than written (it matches nothing, or
	// an OpenAPI keyword is ignored): it can only refuse more.
	Unchecked bool
}

func (u Unsupported) String() string {
	s := u.Path + "/" + u.Keyword + ": " + u.Why
	if u.Unchecked {
		s += " (not enforced: calls that reach it are refused)"
	}
	return s
}

// Unsupported lists what the checker does not enforce as written in this
// schema; empty for the schemas of every real manifest in the corpus. At
// most maxReports entries are listed, the last one saying how many more
// there were.
func (s *Signature) Unsupported() []Unsupported { return s.unsupported }

// Enforced reports whether the checker enforces every part of the schema:
// false when a check can end Unchecked (see Unsupported.Unchecked).
func (s *Signature) Enforced() bool { return !s.unchecked }

// ErrSchema is returned by Compile for a schema it cannot use at all.
var ErrSchema = errors.New("unusable inputSchema")

// Options change how a schema is compiled.
type Options struct {
	// Formats asserts the "format" values that package format knows
	// (date-time, email, uri, ...): a string that is not of its format
	// fails (H3). Off, format is an annotation, as JSON Schema 2020-12
	// says by default.
	Formats bool
}

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
	// head is the name's first 16 bytes, zero-padded: a key matches a
	// name of up to 16 bytes without reading the name's bytes (packed
	// apart: checking is bound by memory latency), a longer one reads
	// only the rest. Most mismatches end at the length or the first word.
	head [2]uint64
	name string
	n    *node
	req  bool // named in "required"
	// plain: n checks nothing but its types (n.has is 0), which are
	// copied here, so that a member that passes is checked without
	// reading n (checking is bound by memory latency; most properties
	// are {"type": ...}). Set once the signature is compiled (plainProps).
	plain bool
	types typeSet
}

// headOf is prop.head of a name or key.
func headOf[T string | []byte](name T) [2]uint64 {
	var b [16]byte
	copy(b[:], name)
	return [2]uint64{binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])}
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
	cUnchecked
	cScope     // the node opens a schema resource of a signature with dynamic references
	cUneval    // unevaluatedProperties or unevaluatedItems
	cRareKeys  // patternProperties, propertyNames or dependentRequired
	cRareValue // if, dependentSchemas, contains, an asserted format or a pattern not run
)

// node is one compiled schema node. Zero values mean "no constraint". The
// fields read for every value come first; the keywords real schemas
// rarely use live apart (rare), so that the nodes of a schema stay close
// in memory (checking is bound by memory latency).
type node struct {
	has   checks
	types typeSet // 0: any type
	never bool    // the false schema, or a node of a $ref cycle
	why   string  // why never: the failure's reason

	// objects
	props     []prop         // sorted by name; nil when no key is declared by name
	propIndex map[string]int // name -> index in props
	// required lists the distinct required names in schema order; nReq
	// counts them. Those that are props are flagged (prop.req); the others
	// are in reqOther, so that an object's keys are counted against
	// required in one pass (an object has no repeated names).
	required []string
	reqOther map[string]bool
	closed   bool  // undeclared keys fail (H2)
	hasAddl  bool  // additionalProperties is present (it evaluates every other key)
	addl     *node // schema for undeclared keys when open with a schema
	minProps int
	maxProps int // -1: none

	// arrays
	items    *node // beyond the tuple
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
	res                 *resource // the resource the node belongs to (dynamic signatures)
	x                   *rare     // never nil: noRare until a rare keyword is compiled (ext)
}

// rare holds the keywords few schemas use. Nodes without any share noRare,
// which is never written.
type rare struct {
	unchecked string // non-empty: a value reaching this node cannot be checked, and why

	// objects
	patterns   []patProp // patternProperties
	propNames  *node
	depReq     []depRequired
	depSchemas []depSchema
	uneval     *node // unevaluatedProperties
	// decl and declPat are the keys a branch (if, then, else, a
	// dependentSchemas value) declares for the node it belongs to.
	decl    []string
	declPat []patProp

	// arrays
	contains    *node
	minContains int // 1 unless minContains says otherwise
	maxContains int // -1: none
	unevalItems *node

	// strings
	patUnchecked string // non-empty: the pattern cannot be run, and why
	format       func(string) bool
	formatName   string

	ifN, thenN, elseN *node
	dyn               *dynRef // a $dynamicRef resolved along the dynamic scope
}

// noRare is the rare part of every node without a rare keyword.
var noRare = rare{minContains: 1, maxContains: -1}

// ext returns n's own rare part, made on the first write.
func (n *node) ext() *rare {
	if n.x == &noRare {
		r := noRare
		n.x = &r
	}
	return n.x
}

// patProp is one member of patternProperties.
type patProp struct {
	re        *regexp.Regexp
	insts     int
	unchecked string // the pattern cannot be run: a key it might match is unchecked
	n         *node
}

type depRequired struct {
	name string
	req  []string
}

type depSchema struct {
	name string
	n    *node
}

// dynRef is a $dynamicRef whose initial target carries a $dynamicAnchor:
// when checking, the outermost resource of the dynamic scope that declares
// the same dynamic anchor supplies the schema (JSON Schema 2020-12 §8.2.3.2).
type dynRef struct {
	name    string
	initial *node
	targets []*node // every resource's node for name: the candidates, for the cycle check
}

// enumSpec is a compiled enum, apart from the node: few nodes have one.
type enumSpec struct {
	values []jsontape.Value    // nil when all are strings
	hashes map[uint64][]int32  // large enums: jsontape.Hash -> indices in values
	strs   []string            // the values when all are strings
	strSet map[string]struct{} // large string enums
}

// uncheckedKeywords are keywords of other drafts that this checker does
// not enforce: a value reaching a node that has one is unchecked.
var uncheckedKeywords = map[string]string{
	"$recursiveRef": "draft 2019-09's $recursiveRef is not supported (2020-12 replaced it with $dynamicRef)",
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

// Compile compiles an inputSchema (a JSON object) with the default
// Options. It fails only when the schema is not a JSON object (or not
// JSON); problems inside it are reported by Unsupported.
func Compile(schema []byte) (*Signature, error) { return CompileWith(schema, Options{}) }

// CompileWith compiles an inputSchema with options o.
//
// Compiling costs time and memory linear in the schema, whatever its
// shape: a large object is indexed once when $ref pointers look into it,
// paths of reports are spelled only for the reported ones.
func CompileWith(schema []byte, o Options) (*Signature, error) {
	tape := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(tape) // the signature keeps copies of what it needs (copyValues)
	if err := tape.Parse(schema); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	root := tape.Root()
	if root.Kind() != jsontape.Object {
		return nil, fmt.Errorf("%w: not a JSON object", ErrSchema)
	}
	c := &compiler{opts: o, doc: root, refs: map[string]*node{}, index: map[jsontape.Value]*objIndex{}, at: map[*node]*seg{}}
	c.scan(root)
	s := &Signature{}
	s.root = c.init(&s.rootNode, nil)
	c.refs[c.rootRes.uri.String()+"#"] = s.root // "#" is the root itself
	c.compile(s.root, root, nil, kindRoot)
	c.dynamicTargets()
	c.cycles()
	s.unsupported = c.reports()
	s.unchecked = c.unchecked
	s.dynamic = c.dynamic
	if c.dynamic {
		for _, n := range c.all {
			if n.res != nil {
				n.has |= cScope
			}
		}
	}
	plainProps(c.all)
	s.values = c.copyValues()
	c.finishWords()
	s.notes = c.notes
	s.schema = bytes.Clone(schema)
	return s, nil
}

// Schema returns the inputSchema this signature was compiled from, as
// given to Compile (a copy). Do not modify. It is the definition's text
// that package registry checkpoints; what the schema expects at a
// path is Expect's to say, from the compiled form.
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
	at        *seg
	keyword   string
	why       string
	unchecked bool
}

type compiler struct {
	opts      Options
	slab      []node // nodes are carved from slabs: a schema's nodes sit together in memory
	all       []*node
	at        map[*node]*seg
	doc       jsontape.Value
	refs      map[string]*node // compiled reference targets by canonical URI
	index     map[jsontape.Value]*objIndex
	reported  []report
	nReports  int
	kept      []*jsontape.Value // enum and const values, to copy out of the schema's tape
	unchecked bool

	resources map[string]*resource
	resOf     map[jsontape.Value]*resource
	rootRes   *resource
	dyns      []*node // nodes with a dynamic $dynamicRef
	dynamic   bool
	negated   int // how many not keywords enclose the schema being compiled: odd, it is open
	notes     notes
	words     *wordBuf // the value keywords of the nodes (noteWords)
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
// grown in place, so earlier nodes keep their addresses. The first is
// small: most schemas have a handful of nodes besides the root.
func (c *compiler) alloc(at *seg) *node {
	if len(c.slab) == cap(c.slab) {
		size := 16
		if c.slab == nil {
			size = 4
		}
		c.slab = make([]node, 0, size)
	}
	c.slab = append(c.slab, node{})
	return c.init(&c.slab[len(c.slab)-1], at)
}

// init makes n a new node with "no constraint" bounds.
func (c *compiler) init(n *node, at *seg) *node {
	*n = node{maxProps: -1, maxItems: -1, maxLen: -1, x: &noRare}
	c.all = append(c.all, n)
	c.at[n] = at
	return n
}

// report notes a part of the schema not enforced as written.
func (c *compiler) report(at *seg, kw, why string) { c.note(at, kw, why, false) }

// uncheck makes node n unchecked (a value reaching it fails Unchecked) and
// reports why.
func (c *compiler) uncheck(n *node, at *seg, kw, why string) {
	if n.x.unchecked == "" {
		n.ext().unchecked = kw + " at #" + at.String() + ": " + why
	}
	c.note(at, kw, why, true)
}

func (c *compiler) note(at *seg, kw, why string, unchecked bool) {
	c.nReports++
	c.unchecked = c.unchecked || unchecked
	if len(c.reported) < maxReports {
		c.reported = append(c.reported, report{at, kw, why, unchecked})
	}
}

func (c *compiler) reports() []Unsupported {
	if c.nReports == 0 {
		return nil
	}
	out := make([]Unsupported, 0, len(c.reported)+1)
	for _, r := range c.reported {
		out = append(out, Unsupported{Path: r.at.String(), Keyword: r.keyword, Why: r.why, Unchecked: r.unchecked})
	}
	if more := c.nReports - len(c.reported); more > 0 {
		out = append(out, Unsupported{Keyword: "…", Why: strconv.Itoa(more) + " more not listed", Unchecked: c.unchecked})
	}
	return out
}

// nodeKind says where a schema sits, for the closed-world rule.
type nodeKind uint8

const (
	kindPlain  nodeKind = iota
	kindRoot            // the top-level inputSchema: closed even without properties
	kindBranch          // if, then, else or a dependentSchemas value: declares keys for its parent, never closed by default
	kindOpen            // an allOf, anyOf or oneOf branch of a node with unevaluatedProperties, which closes the whole
)

// node compiles the schema s found at at into a new node.
func (c *compiler) node(s jsontape.Value, at *seg) *node { return c.nodeOf(s, at, kindPlain) }

func (c *compiler) nodeOf(s jsontape.Value, at *seg, k nodeKind) *node {
	n := c.alloc(at)
	c.compile(n, s, at, k)
	return n
}

// compile compiles s into n.
func (c *compiler) compile(n *node, s jsontape.Value, at *seg, k nodeKind) {
	if r := c.resOf[s]; r != nil {
		n.res = r
	}
	switch s.Kind() {
	case jsontape.True:
		if k == kindRoot {
			n.closed = true // closed-world: the top level never takes unknown keys
		}
	case jsontape.False:
		n.never, n.why = true, falseSchema
	case jsontape.Object:
		c.fill(n, s, at, k)
	default:
		c.uncheck(n, at, "", "schema is neither an object nor a boolean")
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
	set(cRef, n.ref != nil || n.x.dyn != nil)
	set(cUnchecked, n.x.unchecked != "")
	set(cEnum, n.enum != nil)
	set(cConst, n.hasConst)
	set(cObject, n.props != nil || n.x.patterns != nil || n.closed || n.addl != nil || n.required != nil ||
		n.minProps > 0 || n.maxProps >= 0 || n.x.propNames != nil || n.x.depReq != nil)
	set(cArray, n.items != nil || n.tuple != nil || n.minItems > 0 || n.maxItems >= 0 || n.unique || n.x.contains != nil)
	set(cString, n.minLen > 0 || n.maxLen >= 0 || n.pattern != nil || n.x.patUnchecked != "" || n.x.format != nil)
	set(cNumber, n.hasMin || n.hasMax || n.hasExMin || n.hasExMax || n.multipleOf > 0)
	set(cComb, n.anyOf != nil || n.oneOf != nil || n.allOf != nil || n.not != nil || n.x.ifN != nil || n.x.depSchemas != nil)
	set(cUneval, n.x.uneval != nil || n.x.unevalItems != nil)
	set(cRareKeys, n.x.patterns != nil || n.x.propNames != nil || n.x.depReq != nil)
	set(cRareValue, n.x.ifN != nil || n.x.depSchemas != nil || n.x.contains != nil || n.x.format != nil || n.x.patUnchecked != "")
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

// namedProp is a declared key before the props are packed.
type namedProp struct {
	name string
	n    *node
}

func (c *compiler) fill(n *node, m jsontape.Value, at *seg, k nodeKind) {
	c.noteWords(n, m)
	branchKind := kindPlain
	if m.Get("unevaluatedProperties").Exists() {
		branchKind = kindOpen
	}
	var (
		declared    []namedProp
		hasProps    bool
		itemsArray  bool
		addlItems   jsontape.Value
		hasUnevalPr bool
	)
	for _, kv := range sortedMembers(m) {
		key, v := kv.name, kv.v
		switch key {
		case "type":
			n.types = c.types(n, v, at)
		case "properties":
			if v.Kind() != jsontape.Object {
				c.uncheck(n, at, key, "not an object")
				continue
			}
			hasProps = true
			kp := at.child(key)
			for _, p := range sortedMembers(v) {
				declared = append(declared, namedProp{p.name, c.node(p.v, kp.child(p.name))})
			}
		case "patternProperties":
			if v.Kind() != jsontape.Object {
				c.uncheck(n, at, key, "not an object")
				continue
			}
			kp := at.child(key)
			for _, p := range sortedMembers(v) {
				pp := patProp{n: c.node(p.v, kp.child(p.name))}
				pp.re, pp.insts, pp.unchecked = c.regex(p.name, kp, p.name)
				c.notePattern(pp.re, p.name)
				n.ext().patterns = append(n.x.patterns, pp)
			}
		case "required":
			if v.Kind() != jsontape.Array {
				c.uncheck(n, at, key, "not an array")
				continue
			}
			n.required = c.names(n, v, at, key)
		case "additionalProperties":
			n.hasAddl = true
			switch v.Kind() {
			case jsontape.True, jsontape.False:
			case jsontape.Object:
				n.addl = c.node(v, at.child(key))
			default:
				c.uncheck(n, at, key, "neither a boolean nor a schema")
			}
		case "unevaluatedProperties":
			hasUnevalPr = true
			n.ext().uneval = c.node(v, at.child(key))
		case "propertyNames":
			n.ext().propNames = c.node(v, at.child(key))
		case "dependentRequired":
			c.depRequired(n, v, at, key)
		case "dependentSchemas":
			c.depSchemas(n, v, at, key)
		case "dependencies": // draft 7: both of the above in one keyword
			if v.Kind() != jsontape.Object {
				c.uncheck(n, at, key, "not an object")
				continue
			}
			kp := at.child(key)
			for _, d := range sortedMembers(v) {
				if d.v.Kind() == jsontape.Array {
					n.ext().depReq = append(n.x.depReq, depRequired{d.name, c.names(n, d.v, kp, d.name)})
				} else {
					n.ext().depSchemas = append(n.x.depSchemas, depSchema{d.name, c.nodeOf(d.v, kp.child(d.name), kindBranch)})
				}
			}
		case "minProperties":
			n.minProps = c.count(n, v, at, key, 0)
		case "maxProperties":
			n.maxProps = c.count(n, v, at, key, -1)
		case "items":
			if v.Kind() == jsontape.Array { // draft 4 to 2019-09 tuple form
				itemsArray = true
				n.tuple = c.nodes(v, at.child(key))
				continue
			}
			n.items = c.node(v, at.child(key))
		case "additionalItems": // draft 7: items beyond an items array
			addlItems = v
		case "prefixItems":
			if v.Kind() != jsontape.Array {
				c.uncheck(n, at, key, "not an array")
				continue
			}
			n.tuple = c.nodes(v, at.child(key))
		case "unevaluatedItems":
			n.ext().unevalItems = c.node(v, at.child(key))
		case "contains":
			n.ext().contains = c.node(v, at.child(key))
		case "minContains":
			n.ext().minContains = c.count(n, v, at, key, 1)
		case "maxContains":
			n.ext().maxContains = c.count(n, v, at, key, -1)
		case "minItems":
			n.minItems = c.count(n, v, at, key, 0)
		case "maxItems":
			n.maxItems = c.count(n, v, at, key, -1)
		case "uniqueItems":
			switch v.Kind() {
			case jsontape.True:
				n.unique = true
			case jsontape.False:
			default:
				c.uncheck(n, at, key, "not a boolean")
			}
		case "minLength":
			n.minLen = c.count(n, v, at, key, 0)
		case "maxLength":
			n.maxLen = c.count(n, v, at, key, -1)
		case "pattern":
			if v.Kind() != jsontape.String {
				c.uncheck(n, at, key, "not a string")
				continue
			}
			n.pattern, n.patInsts, n.ext().patUnchecked = c.regex(string(v.Str()), at, key)
		case "format":
			c.format(n, v)
		case "minimum":
			n.min, n.hasMin = c.number(n, v, at, key)
		case "maximum":
			n.max, n.hasMax = c.number(n, v, at, key)
		case "exclusiveMinimum":
			if b := v.Kind(); b == jsontape.True || b == jsontape.False { // draft 4: a modifier of minimum
				if b == jsontape.True {
					n.exMin, n.hasExMin = numberOf(m.Get("minimum"))
				}
				continue
			}
			n.exMin, n.hasExMin = c.number(n, v, at, key)
		case "exclusiveMaximum":
			if b := v.Kind(); b == jsontape.True || b == jsontape.False {
				if b == jsontape.True {
					n.exMax, n.hasExMax = numberOf(m.Get("maximum"))
				}
				continue
			}
			n.exMax, n.hasExMax = c.number(n, v, at, key)
		case "multipleOf":
			f, ok := c.number(n, v, at, key)
			if ok && f <= 0 {
				c.uncheck(n, at, key, "not a positive number")
				continue
			}
			n.multipleOf = f
		case "enum":
			if v.Kind() != jsontape.Array {
				c.uncheck(n, at, key, "not an array")
				continue
			}
			c.enum(n, v)
		case "const":
			n.hasConst, n.constVal = true, v
			c.kept = append(c.kept, &n.constVal)
		case "anyOf", "oneOf", "allOf":
			if v.Kind() != jsontape.Array || v.Len() == 0 {
				c.uncheck(n, at, key, "not a non-empty array")
				continue
			}
			subs := c.nodesOf(v, at.child(key), branchKind)
			switch key {
			case "anyOf":
				n.anyOf = subs
			case "oneOf":
				n.oneOf = subs
			default:
				n.allOf = subs
			}
		case "not":
			// Inside not, closing a node would make not pass more:
			// nothing under an odd number of nots is closed by default.
			c.negated++
			n.not = c.node(v, at.child(key))
			c.negated--
		case "if":
			n.ext().ifN = c.nodeOf(v, at.child(key), kindBranch)
		case "then":
			n.ext().thenN = c.nodeOf(v, at.child(key), kindBranch)
		case "else":
			n.ext().elseN = c.nodeOf(v, at.child(key), kindBranch)
		case "$ref":
			n.ref = c.ref(n, v, at, key)
		case "$dynamicRef":
			c.dynamicRef(n, v, at)
		case "nullable":
			// OpenAPI 3.0, not JSON Schema: ignored, so null stays refused
			// unless the type allows it (stricter than the author meant).
			c.report(at, key, "an OpenAPI keyword, not JSON Schema: ignored (null is refused unless type allows it)")
		default:
			if why, ok := uncheckedKeywords[key]; ok {
				c.uncheck(n, at, key, why)
			}
			// Anything else is an annotation or not a JSON Schema keyword,
			// which JSON Schema itself ignores.
		}
	}
	if itemsArray && addlItems.Exists() {
		n.items = c.node(addlItems, at.child("additionalItems"))
	}
	if n.x.ifN == nil { // then and else without if are ignored (2020-12 §10.2.2)
		n.ext().thenN, n.ext().elseN = nil, nil
	}
	// Closed world. The keys that if, then, else and dependentSchemas
	// declare (their properties and patternProperties, and those of their
	// own branches) are declared by this node: those branches constrain
	// this object's keys, and closing each branch on its own would refuse
	// the object's other keys. A branch is never closed by default; it
	// hands what it declares up.
	var names []string
	var pats []patProp
	for _, b := range n.branches() {
		names = append(names, b.x.decl...)
		pats = append(pats, b.x.declPat...)
	}
	if k == kindBranch {
		for _, p := range declared {
			n.ext().decl = append(n.x.decl, p.name)
		}
		n.ext().decl = append(n.x.decl, names...)
		n.ext().declPat = append(pats, n.x.patterns...)
	}
	// The top level, and every node that declares keys by name (its
	// properties, or those of its branches), rejects undeclared keys
	// unless additionalProperties or unevaluatedProperties says otherwise
	// (rule 3). patternProperties alone closes nothing: a node without
	// properties is open, as in JSON Schema, and a key no pattern matches
	// is free there; where the node is closed, a key a pattern matches is
	// declared.
	switch addl := m.Get("additionalProperties"); {
	case addl.Exists():
		n.closed = addl.Kind() != jsontape.True && addl.Kind() != jsontape.Object
	case hasUnevalPr || k == kindBranch || k == kindOpen || c.negated%2 == 1:
	default:
		n.closed = k == kindRoot || hasProps || names != nil
		if n.closed {
			for _, name := range names {
				declared = append(declared, namedProp{name, c.anything()})
			}
			for _, p := range pats {
				n.ext().patterns = append(n.x.patterns, patProp{re: p.re, insts: p.insts, unchecked: p.unchecked, n: c.anything()})
			}
		}
	}
	n.setProps(declared)
}

// branches returns the subschemas that declare keys for n.
func (n *node) branches() []*node {
	var out []*node
	for _, b := range [...]*node{n.x.ifN, n.x.thenN, n.x.elseN} {
		if b != nil {
			out = append(out, b)
		}
	}
	for _, d := range n.x.depSchemas {
		out = append(out, d.n)
	}
	return out
}

// anything is a node that accepts every value: the schema of a key that
// only a branch constrains.
func (c *compiler) anything() *node {
	n := c.alloc(nil)
	n.has = n.summarize()
	return n
}

// setProps packs the declared keys: the names in one string, so that
// looking a key up reads adjacent memory. A name declared twice (by
// properties and a branch) keeps its first node.
func (n *node) setProps(declared []namedProp) {
	if declared == nil {
		return
	}
	slices.SortStableFunc(declared, func(a, b namedProp) int { return strings.Compare(a.name, b.name) })
	declared = slices.CompactFunc(declared, func(a, b namedProp) bool { return a.name == b.name })
	var b strings.Builder
	for _, p := range declared {
		b.WriteString(p.name)
	}
	packed := b.String()
	n.props = make([]prop, 0, len(declared))
	n.propIndex = make(map[string]int, len(declared))
	off := 0
	for _, p := range declared {
		n.propIndex[p.name] = len(n.props)
		n.props = append(n.props, prop{head: headOf(p.name), name: packed[off : off+len(p.name)], n: p.n})
		off += len(p.name)
	}
}

// plainProps flags the props whose node checks nothing but types. It runs
// last: a node's has is final only once cycles and scopes are marked.
func plainProps(all []*node) {
	for _, n := range all {
		for i := range n.props {
			p := &n.props[i]
			p.plain, p.types = p.n.has == 0, p.n.types
		}
	}
}

// names reads an array of distinct names (required, dependentRequired).
func (c *compiler) names(n *node, v jsontape.Value, at *seg, kw string) []string {
	seen := map[string]bool{}
	out := []string{}
	for it := v.Items(); it.Next(); {
		e := it.Value()
		if e.Kind() != jsontape.String {
			c.uncheck(n, at, kw, "an entry is not a string")
			continue
		}
		if s := string(e.Str()); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func (c *compiler) depRequired(n *node, v jsontape.Value, at *seg, kw string) {
	if v.Kind() != jsontape.Object {
		c.uncheck(n, at, kw, "not an object")
		return
	}
	for _, d := range sortedMembers(v) {
		if d.v.Kind() != jsontape.Array {
			c.uncheck(n, at, kw, "a value is not an array")
			continue
		}
		n.ext().depReq = append(n.x.depReq, depRequired{d.name, c.names(n, d.v, at.child(kw), d.name)})
	}
}

func (c *compiler) depSchemas(n *node, v jsontape.Value, at *seg, kw string) {
	if v.Kind() != jsontape.Object {
		c.uncheck(n, at, kw, "not an object")
		return
	}
	kp := at.child(kw)
	for _, d := range sortedMembers(v) {
		n.ext().depSchemas = append(n.x.depSchemas, depSchema{d.name, c.nodeOf(d.v, kp.child(d.name), kindBranch)})
	}
}

// nodes compiles each schema of array v.
func (c *compiler) nodes(v jsontape.Value, at *seg) []*node { return c.nodesOf(v, at, kindPlain) }

func (c *compiler) nodesOf(v jsontape.Value, at *seg, k nodeKind) []*node {
	out := make([]*node, 0, v.Len())
	for it := v.Items(); it.Next(); {
		out = append(out, c.nodeOf(it.Value(), at.child(strconv.Itoa(len(out))), k))
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

// regex compiles an ECMA-262 pattern (pattern, patternProperties). A
// pattern that cannot be run as written is reported, and returned as the
// reason that a value it would decide is unchecked.
func (c *compiler) regex(src string, at *seg, kw string) (*regexp.Regexp, int, string) {
	fail := func(why string) (*regexp.Regexp, int, string) {
		c.note(at, kw, why, true)
		return nil, 0, "pattern " + quoteReport(src) + " at #" + at.child(kw).String() + ": " + why
	}
	re, insts, err := compileECMA(src)
	if err != nil {
		return fail(err.Error())
	}
	if insts > maxPatternInsts {
		return fail("compiles to " + strconv.Itoa(insts) + " instructions, more than " + strconv.Itoa(maxPatternInsts) + ": matching would cost too much per byte")
	}
	return re, insts, ""
}

// compileECMA compiles a JSON Schema (ECMA-262) pattern for RE2, with
// ECMA-262's meaning (package ecmare), and returns the size of the program
// regexp runs. Compiling copies a character class once per repetition
// ("[\p{L}\s]{0,99}" copies some 600 ranges 99 times: 2.4 ms and 2.9 MB
// for 17 bytes), so the copies are counted on the parsed pattern first
// and a pattern that would make more than maxClassRanges is not compiled.
func compileECMA(src string) (*regexp.Regexp, int, error) {
	tr, err := ecmare.Translate(src)
	if err != nil {
		return nil, 0, err
	}
	p, err := syntax.Parse(tr, syntax.Perl)
	if err != nil {
		return nil, 0, fmt.Errorf("beyond RE2's limits: %w", err)
	}
	if n := classRanges(p); n > maxClassRanges {
		return nil, 0, fmt.Errorf("its character classes repeat to %d ranges, more than %d: compiling it would cost too much", n, maxClassRanges)
	}
	insts := maxPatternInsts + 1
	if prog, err := syntax.Compile(p.Simplify()); err == nil {
		insts = len(prog.Inst)
	}
	if insts > maxPatternInsts {
		return nil, insts, nil // the caller reports it
	}
	re, err := ecmare.Compile(src)
	if err != nil {
		return nil, 0, err
	}
	return re, insts, nil
}

// maxClassRanges bounds the class ranges a compiled pattern holds (16
// bytes each): the realistic name pattern above makes about 66,000.
const maxClassRanges = 1 << 18

// classRanges counts the ranges of the character classes of p as
// compiling copies them: once per repetition. Saturating, linear in p.
func classRanges(p *syntax.Regexp) int {
	n := 0
	switch p.Op {
	case syntax.OpCharClass:
		n = len(p.Rune) / 2
	case syntax.OpRepeat:
		m := p.Max
		if m < 0 {
			m = p.Min + 1
		}
		n = classRanges(p.Sub[0]) * max(m, 1)
	default:
		for _, sub := range p.Sub {
			n += classRanges(sub)
		}
	}
	return min(n, maxClassRanges+1)
}

func (c *compiler) types(n *node, v jsontape.Value, at *seg) typeSet {
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
		c.uncheck(n, at, "type", "neither a string nor an array")
		return 0
	}
	return ts
}

func (c *compiler) count(n *node, v jsontape.Value, at *seg, kw string, def int) int {
	f, ok := numberOf(v)
	if !ok || f < 0 || f != math.Trunc(f) {
		c.uncheck(n, at, kw, "not a non-negative integer")
		return def
	}
	return int(min(f, math.MaxInt32))
}

func (c *compiler) number(n *node, v jsontape.Value, at *seg, kw string) (float64, bool) {
	f, ok := numberOf(v)
	if !ok {
		c.uncheck(n, at, kw, "not a number")
	}
	return f, ok
}

func numberOf(v jsontape.Value) (float64, bool) {
	if v.Kind() != jsontape.Number {
		return 0, false
	}
	return v.Float64(), true
}

// ref compiles the target of a $ref; each target is compiled once, so
// recursive schemas terminate. A reference that leads nowhere makes n
// unchecked.
func (c *compiler) ref(n *node, v jsontape.Value, at *seg, kw string) *node {
	if v.Kind() != jsontape.String {
		c.uncheck(n, at, kw, "not a string")
		return nil
	}
	r := n.res
	if r == nil {
		r = c.rootRes
	}
	t, why := c.resolve(string(v.Str()), r)
	if why != "" {
		c.uncheck(n, at, kw, why)
		return nil
	}
	return c.targetNode(t)
}

func (c *compiler) targetNode(t target) *node {
	tok := t.key
	if t.res == c.rootRes {
		tok = t.key[len(c.rootRes.uri.String())+1:]
	}
	if c.negated%2 == 1 { // compiled apart: under not, nothing is closed by default
		t.key += "\x00not"
	}
	if n, ok := c.refs[t.key]; ok {
		return n
	}
	n := c.alloc(&seg{tok: tok, raw: true})
	c.refs[t.key] = n // before compiling: a recursive reference finds it
	c.compile(n, t.v, c.at[n], kindPlain)
	if n.res == nil {
		n.res = t.res
	}
	return n
}

// dynamicRef compiles a $dynamicRef. It starts where a $ref of the same
// text would lead; when that target declares the fragment as a
// $dynamicAnchor, the check looks along the dynamic scope (dynRef).
func (c *compiler) dynamicRef(n *node, v jsontape.Value, at *seg) {
	if v.Kind() != jsontape.String {
		c.uncheck(n, at, "$dynamicRef", "not a string")
		return
	}
	r := n.res
	if r == nil {
		r = c.rootRes
	}
	t, why := c.resolve(string(v.Str()), r)
	if why != "" {
		c.uncheck(n, at, "$dynamicRef", why)
		return
	}
	initial := c.targetNode(t)
	if d, ok := t.res.dynamic[t.anchor]; t.anchor == "" || !ok || d != t.v {
		n.ref = initial // a plain reference
		return
	}
	n.ext().dyn = &dynRef{name: t.anchor, initial: initial}
	c.dyns = append(c.dyns, n)
	c.dynamic = true
}

// dynamicTargets compiles, for each name a dynamic reference uses, every
// resource's dynamic anchor of that name: the candidates of the scope.
func (c *compiler) dynamicTargets() {
	for i := 0; i < len(c.dyns); i++ { // compiling a target can add dynamic references
		d := c.dyns[i].x.dyn
		keys := make([]string, 0, len(c.resources))
		for k := range c.resources {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			r := c.resources[k]
			v, ok := r.dynamic[d.name]
			if !ok {
				continue
			}
			t := c.targetNode(target{res: r, v: v, key: k + "#" + d.name, anchor: d.name})
			if r.dynNodes == nil {
				r.dynNodes = map[string]*node{}
			}
			r.dynNodes[d.name] = t
			d.targets = append(d.targets, t)
		}
	}
}

// format compiles a format keyword: asserted when Options.Formats is set
// and the format is one package format knows, an annotation otherwise.
func (c *compiler) format(n *node, v jsontape.Value) {
	if !c.opts.Formats || v.Kind() != jsontape.String {
		return
	}
	if f, ok := formatChecker(string(v.Str())); ok {
		n.ext().format, n.ext().formatName = f, string(v.Str())
	}
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

// falseSchema is the reason of the false schema.
const falseSchema = "no value is allowed here"
