package signature

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Signature is a compiled inputSchema. It is immutable and safe for
// concurrent use.
type Signature struct {
	root        *node
	unsupported []Unsupported
	schema      []byte // the inputSchema compiled, for Schema
}

// Unsupported is a keyword of the schema that the checker does not enforce,
// or a keyword whose value is not valid JSON Schema.
type Unsupported struct {
	Path    string // JSON pointer into the schema
	Keyword string
	Why     string
}

func (u Unsupported) String() string {
	return u.Path + "/" + u.Keyword + ": " + u.Why
}

// Unsupported lists what the checker ignores in this schema; empty for the
// schemas of every real manifest in the corpus.
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
	never bool    // the false schema

	// objects
	props     []prop         // sorted by name; nil when "properties" is absent
	propIndex map[string]int // name -> index in props
	required  []string
	// reqMask has bit i set for each required props[i]; reqFast says that
	// every required key is one of the first 64 props, so that an object
	// has them all exactly when the keys it has set every bit of reqMask.
	reqMask    uint64
	reqFast    bool
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

	// numbers
	min, max, exMin, exMax             float64
	hasMin, hasMax, hasExMin, hasExMax bool
	multipleOf                         float64

	// values
	enum     []any // decoded with UseNumber
	strEnum  []string
	hasEnum  bool
	constVal any
	hasConst bool

	anyOf, oneOf, allOf []*node
	not                 *node
	ref                 *node
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

// Compile compiles an inputSchema (a JSON object). It fails only when the
// schema is not a JSON object; problems inside it are reported by
// Unsupported and the offending keyword is ignored.
func Compile(schema []byte) (*Signature, error) {
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	var doc any
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%w: not a JSON object", ErrSchema)
	}
	c := &compiler{doc: m, refs: map[string]*node{}}
	s := &Signature{root: c.node(m, "", true), schema: bytes.Clone(schema)}
	s.unsupported = c.unsupported
	return s, nil
}

// Schema returns the inputSchema this signature was compiled from, as
// given to Compile (a copy). Do not modify. It is read only when a call
// fails, to tell the caller what the schema expects (package
// resolve/suggest): the compiled form keeps what checking needs, not the
// schema's wording.
func (s *Signature) Schema() []byte { return s.schema }

type compiler struct {
	slab        []node // nodes are carved from slabs: a schema's nodes sit together in memory
	doc         map[string]any
	refs        map[string]*node
	unsupported []Unsupported
}

// alloc returns a new node with "no constraint" bounds. Slabs are never
// grown in place, so earlier nodes keep their addresses.
func (c *compiler) alloc() *node {
	if len(c.slab) == cap(c.slab) {
		c.slab = make([]node, 0, 16)
	}
	c.slab = append(c.slab, node{maxProps: -1, maxItems: -1, maxLen: -1})
	return &c.slab[len(c.slab)-1]
}

func (c *compiler) report(path, kw, why string) {
	c.unsupported = append(c.unsupported, Unsupported{Path: path, Keyword: kw, Why: why})
}

// node compiles schema s found at JSON pointer path. root marks the
// top-level inputSchema, which is closed even without properties.
func (c *compiler) node(s any, path string, root bool) *node {
	n := c.alloc()
	switch v := s.(type) {
	case bool:
		n.never = !v
		if root && v {
			n.closed = true // closed-world: the top level never takes unknown keys
		}
	case map[string]any:
		c.fill(n, v, path, root)
	default:
		c.report(path, "", "schema is neither an object nor a boolean")
	}
	n.markRequired()
	n.has = n.summarize()
	return n
}

// markRequired flags the required props and sets reqMask and reqFast.
func (n *node) markRequired() {
	n.reqFast = true
	for _, r := range n.required {
		i, ok := n.propIndex[r]
		if !ok || i >= 64 {
			n.reqFast = false // undeclared or far: checked by name
			continue
		}
		n.props[i].req = true
		n.reqMask |= 1 << i
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
	set(cEnum, n.hasEnum)
	set(cConst, n.hasConst)
	set(cObject, n.props != nil || n.closed || n.addl != nil || n.required != nil || n.minProps > 0 || n.maxProps >= 0)
	set(cArray, n.items != nil || n.tuple != nil || n.minItems > 0 || n.maxItems >= 0 || n.unique)
	set(cString, n.minLen > 0 || n.maxLen >= 0 || n.pattern != nil)
	set(cNumber, n.hasMin || n.hasMax || n.hasExMin || n.hasExMax || n.multipleOf > 0)
	set(cComb, n.anyOf != nil || n.oneOf != nil || n.allOf != nil || n.not != nil)
	return h
}

func (c *compiler) fill(n *node, m map[string]any, path string, root bool) {
	keys := slices.Sorted(maps.Keys(m)) // deterministic reports
	addlSet := false
	addlOpen := false
	for _, k := range keys {
		v := m[k]
		kp := path + "/" + escape(k)
		switch k {
		case "type":
			n.types = c.types(v, path)
		case "properties":
			pm, ok := v.(map[string]any)
			if !ok {
				c.report(path, k, "not an object")
				continue
			}
			n.hasObjKeys = true
			n.props = make([]prop, 0, len(pm))
			n.propIndex = make(map[string]int, len(pm))
			names := slices.Sorted(maps.Keys(pm)) // deterministic reports
			// The names are packed in one string, so that looking a key up
			// reads adjacent memory.
			packed := strings.Join(names, "")
			off := 0
			for _, name := range names {
				pn := c.node(pm[name], kp+"/"+escape(name), false)
				n.propIndex[name] = len(n.props)
				n.props = append(n.props, prop{tagOf(name), packed[off : off+len(name)], pn, false})
				off += len(name)
			}
		case "required":
			arr, ok := v.([]any)
			if !ok {
				c.report(path, k, "not an array")
				continue
			}
			for _, e := range arr {
				s, ok := e.(string)
				if !ok {
					c.report(path, k, "an entry is not a string")
					continue
				}
				n.required = append(n.required, s)
			}
		case "additionalProperties":
			addlSet = true
			switch a := v.(type) {
			case bool:
				addlOpen = a
			case map[string]any:
				addlOpen = true
				n.addl = c.node(a, kp, false)
			default:
				c.report(path, k, "neither a boolean nor a schema")
			}
		case "minProperties":
			n.minProps = c.count(v, path, k, 0)
		case "maxProperties":
			n.maxProps = c.count(v, path, k, -1)
		case "items":
			switch it := v.(type) {
			case []any: // draft 4 to 2019-09 tuple form
				for i, e := range it {
					n.tuple = append(n.tuple, c.node(e, kp+"/"+strconv.Itoa(i), false))
				}
			default:
				n.items = c.node(it, kp, false)
			}
		case "prefixItems":
			it, ok := v.([]any)
			if !ok {
				c.report(path, k, "not an array")
				continue
			}
			for i, e := range it {
				n.tuple = append(n.tuple, c.node(e, kp+"/"+strconv.Itoa(i), false))
			}
		case "minItems":
			n.minItems = c.count(v, path, k, 0)
		case "maxItems":
			n.maxItems = c.count(v, path, k, -1)
		case "uniqueItems":
			b, ok := v.(bool)
			if !ok {
				c.report(path, k, "not a boolean")
			}
			n.unique = b
		case "minLength":
			n.minLen = c.count(v, path, k, 0)
		case "maxLength":
			n.maxLen = c.count(v, path, k, -1)
		case "pattern":
			s, ok := v.(string)
			if !ok {
				c.report(path, k, "not a string")
				continue
			}
			re, err := regexp.Compile(s)
			if err != nil {
				// ECMA-262 features RE2 lacks (lookaround, backreferences).
				c.report(path, k, "not an RE2 regular expression: "+err.Error())
				continue
			}
			n.pattern = re
		case "minimum":
			n.min, n.hasMin = c.number(v, path, k)
		case "maximum":
			n.max, n.hasMax = c.number(v, path, k)
		case "exclusiveMinimum":
			if b, ok := v.(bool); ok { // draft 4: a modifier of minimum
				if b {
					n.exMin, n.hasExMin = numberOf(m["minimum"])
				}
				continue
			}
			n.exMin, n.hasExMin = c.number(v, path, k)
		case "exclusiveMaximum":
			if b, ok := v.(bool); ok {
				if b {
					n.exMax, n.hasExMax = numberOf(m["maximum"])
				}
				continue
			}
			n.exMax, n.hasExMax = c.number(v, path, k)
		case "multipleOf":
			f, ok := c.number(v, path, k)
			if ok && f > 0 {
				n.multipleOf = f
			}
		case "enum":
			arr, ok := v.([]any)
			if !ok {
				c.report(path, k, "not an array")
				continue
			}
			n.hasEnum, n.enum = true, arr
			n.strEnum = make([]string, 0, len(arr))
			for _, e := range arr {
				if s, ok := e.(string); ok {
					n.strEnum = append(n.strEnum, s)
				} else {
					n.strEnum = nil
					break
				}
			}
		case "const":
			n.hasConst, n.constVal = true, v
		case "anyOf", "oneOf", "allOf":
			arr, ok := v.([]any)
			if !ok || len(arr) == 0 {
				c.report(path, k, "not a non-empty array")
				continue
			}
			subs := make([]*node, len(arr))
			for i, e := range arr {
				subs[i] = c.node(e, kp+"/"+strconv.Itoa(i), false)
			}
			switch k {
			case "anyOf":
				n.anyOf = subs
			case "oneOf":
				n.oneOf = subs
			default:
				n.allOf = subs
			}
		case "not":
			n.not = c.node(v, kp, false)
		case "$ref":
			n.ref = c.ref(v, path)
		default:
			if unsupportedKeywords[k] {
				c.report(path, k, "keyword not enforced")
			}
			// Anything else is an annotation or not a JSON Schema keyword,
			// which JSON Schema itself ignores.
		}
	}
	// Closed world: the top level, and every node that declares properties,
	// rejects undeclared keys unless additionalProperties opens it.
	switch {
	case addlSet && !addlOpen:
		n.closed = true
	case !addlSet && (root || n.props != nil):
		n.closed = true
	}
}

func (c *compiler) types(v any, path string) typeSet {
	var names []any
	switch t := v.(type) {
	case string:
		names = []any{t}
	case []any:
		names = t
	default:
		c.report(path, "type", "neither a string nor an array")
		return 0
	}
	var ts typeSet
	for _, e := range names {
		s, _ := e.(string)
		if b, ok := typeNames[s]; ok {
			ts |= b
		} else {
			// Not a JSON Schema type ("dict", "float", "any"): no value
			// can be shown to have it, so it matches nothing.
			c.report(path, "type", fmt.Sprintf("unknown type %q matches nothing", s))
			ts |= tNone
		}
	}
	return ts
}

func (c *compiler) count(v any, path, kw string, def int) int {
	f, ok := numberOf(v)
	if !ok || f < 0 || f != math.Trunc(f) {
		c.report(path, kw, "not a non-negative integer")
		return def
	}
	return int(min(f, math.MaxInt32))
}

func (c *compiler) number(v any, path, kw string) (float64, bool) {
	f, ok := numberOf(v)
	if !ok {
		c.report(path, kw, "not a number")
	}
	return f, ok
}

func numberOf(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// ref resolves a local JSON pointer reference ("#/$defs/X"); the referenced
// node is compiled once, so recursive schemas terminate.
func (c *compiler) ref(v any, path string) *node {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "#") {
		c.report(path, "$ref", "only local references (#/...) are supported")
		return nil
	}
	if n, ok := c.refs[s]; ok {
		return n
	}
	var target any = c.doc
	for _, tok := range strings.Split(strings.TrimPrefix(s, "#"), "/")[1:] {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := target.(map[string]any)
		if !ok {
			target = nil
			break
		}
		target = m[tok]
	}
	if target == nil {
		c.report(path, "$ref", "reference "+strconv.Quote(s)+" not found")
		return nil
	}
	n := c.alloc()
	c.refs[s] = n // before compiling: a recursive reference finds it
	*n = *c.node(target, strings.TrimPrefix(s, "#"), s == "#")
	return n
}

func escape(tok string) string {
	if !strings.ContainsAny(tok, "~/") {
		return tok
	}
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~", "~0"), "/", "~1")
}
