package suggest

import (
	"encoding/json"
	"slices"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// Hints tell the caller of a rejected call how to correct it (wire
// contract v1.1). Every member is optional; which ones a class gets is in
// the package documentation.
type Hints struct {
	// Tools: for H1 and M1 the valid names nearest to the emitted one; for
	// M2 and M3 the qualified names to pin (server__tool).
	Tools []string
	// Keys: for H2, the declared keys nearest to the undeclared one.
	Keys []string
	// Missing: for H2, the required keys the arguments lack there.
	Missing []string
	// Expected: for H3, what the schema requires of the value at the
	// decision's path, as a JSON object of its keywords (type, enum,
	// const, format, pattern, min/max lengths, ranges, multipleOf, item
	// and property counts; an enum lists at most 32 values), or "anyOf"
	// with one such object per alternative.
	Expected json.RawMessage
}

// Empty reports whether h holds no hint.
func (h *Hints) Empty() bool {
	return len(h.Tools) == 0 && len(h.Keys) == 0 && len(h.Missing) == 0 && len(h.Expected) == 0
}

// AppendJSON appends h as a JSON object whose members are the non-empty
// hints: "tools", "keys", "missing" (arrays of strings), "expected" (an
// object).
func (h *Hints) AppendJSON(b []byte) []byte {
	b = append(b, '{')
	first := true
	list := func(key string, ss []string) {
		if len(ss) == 0 {
			return
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":[`...)
		for i, s := range ss {
			if i > 0 {
				b = append(b, ',')
			}
			b = schema.AppendString(b, s)
		}
		b = append(b, ']')
	}
	list("tools", h.Tools)
	list("keys", h.Keys)
	list("missing", h.Missing)
	if len(h.Expected) > 0 {
		if !first {
			b = append(b, ',')
		}
		b = append(b, `"expected":`...)
		b = append(b, h.Expected...)
	}
	return append(b, '}')
}

// Default cache sizes (entries).
const (
	DefaultAnswers  = 1 << 14 // names answered, by (version, pin, name)
	DefaultVersions = 256     // name indexes, by version
	DefaultSchemas  = 1024    // tools' normalised key names, by digest
)

// Suggester computes hints, with its caches. The zero value is not
// usable: call New.
type Suggester struct {
	answers *lru.Cache[answerKey, []string]
	indexes *lru.Cache[string, *nameIndex]
	forms   *lru.Cache[string, *keyForms]
}

type answerKey struct{ version, pin, tool string }

// Option configures New.
type Option func(*sizes)

type sizes struct{ answers, versions, schemas int }

// WithCacheSizes sets how many answers, version indexes and tools' sets
// of normalised key names are kept (defaults DefaultAnswers, DefaultVersions,
// DefaultSchemas); a size below 1 keeps the default.
func WithCacheSizes(answers, versions, schemas int) Option {
	return func(s *sizes) {
		if answers > 0 {
			s.answers = answers
		}
		if versions > 0 {
			s.versions = versions
		}
		if schemas > 0 {
			s.schemas = schemas
		}
	}
}

// New returns a Suggester.
func New(opts ...Option) *Suggester {
	sz := sizes{DefaultAnswers, DefaultVersions, DefaultSchemas}
	for _, o := range opts {
		o(&sz)
	}
	s := &Suggester{}
	s.answers, _ = lru.New[answerKey, []string](sz.answers) // sizes > 0: no error
	s.indexes, _ = lru.New[string, *nameIndex](sz.versions)
	s.forms, _ = lru.New[string, *keyForms](sz.schemas)
	return s
}

// Hints returns the hints for decision d of call c, decided against vs.
// An accepted call, or a class without hints (H4, H5, M4, M5, MALFORMED),
// gets none. The slices of the result are shared: do not modify them.
func (s *Suggester) Hints(vs resolve.Versions, c *schema.Call, d *schema.Decision) Hints {
	var h Hints
	switch d.Class {
	case schema.H1, schema.M1:
		h.Tools = s.names(vs, c)
	case schema.M2, schema.M3:
		h.Tools = pins(vs, c)
	case schema.H2:
		h.Keys, h.Missing = s.keys(vs, c, d)
	case schema.H3:
		h.Expected = s.expected(vs, c, d)
	}
	return h
}

// Tool returns, for an H1 or M1 decision, the valid name nearest to the
// emitted one (the first of Hints' Tools), else "": the decision row's
// suggested_tool.
func (s *Suggester) Tool(vs resolve.Versions, c *schema.Call, d *schema.Decision) string {
	if !namesTool(d.Class) {
		return ""
	}
	return firstName(s.names(vs, c))
}

// SuggestedTool is Tool's answer read from the hints of a decision of
// class c, for the front ends that computed them anyway.
func (h *Hints) SuggestedTool(c schema.Class) string {
	if !namesTool(c) {
		return ""
	}
	return firstName(h.Tools)
}

// namesTool reports whether a decision of class c has a suggested tool:
// the name was not found (H1, M1).
func namesTool(c schema.Class) bool { return c == schema.H1 || c == schema.M1 }

func firstName(ns []string) string {
	if len(ns) == 0 {
		return ""
	}
	return ns[0]
}

func (s *Suggester) names(vs resolve.Versions, c *schema.Call) []string {
	v := vs.At(c.Registry, c.EmittedAt)
	if v == nil || len(c.Tool) > maxName {
		return nil
	}
	x := s.index(v)
	// A small registry is searched faster than a cache is kept up (its
	// insertions and evictions, and the garbage they make).
	cached := len(x.cands) > cacheAbove
	key := answerKey{v.ID, c.Server, c.Tool}
	if cached {
		if ns, ok := s.answers.Get(key); ok {
			return ns
		}
	}
	q := x.parseQuery(c.Tool, c.Server)
	ms := x.nearest(q)
	if alt, ok := x.unprefixed(c.Tool); ok {
		// "shell__search" where no server "shell" is connected: the
		// model may have invented the server, not the tool.
		ms = merge(ms, x.nearest(alt))
	}
	pin := c.Server
	if pin != "" && v.Server(pin) == nil {
		pin = "\x00" // a pin to no connected server: name every tool in full
	}
	var ns []string
	for _, n := range names(ms, pin, x.single) {
		if n != c.Tool || c.Server != "" {
			ns = append(ns, n)
		}
	}
	if cached {
		s.answers.Add(key, ns)
	}
	return ns
}

// cacheAbove is the number of names above which a version's answers are
// cached (BenchmarkStorm: at 100 names a search costs less than the
// cache).
const cacheAbove = 256

// index returns the name index of v, building it on first use.
func (s *Suggester) index(v *registry.Version) *nameIndex {
	if x, ok := s.indexes.Get(v.ID); ok {
		return x
	}
	x := &nameIndex{byNorm: map[string]string{}, single: v.Single()}
	for _, srv := range v.Servers() {
		if srv.Name != "" {
			x.byNorm[normalize(srv.Name)] = srv.Name
		}
	}
	for _, t := range v.Tools() {
		c := candidate{name: newName(t.Name), server: t.Server, tool: t.Name, shared: len(v.Providers(t.Name)) > 1}
		x.cands = append(x.cands, c)
		x.maxLen = max(x.maxLen, len(c.key))
	}
	slices.SortStableFunc(x.cands, func(a, b candidate) int { return len(a.key) - len(b.key) })
	x.starts = make([]int, x.maxLen+2)
	for i, c := range x.cands {
		x.masks = append(x.masks, c.mask)
		x.starts[len(c.key)+1] = i + 1
	}
	for l := 1; l < len(x.starts); l++ {
		x.starts[l] = max(x.starts[l], x.starts[l-1]) // lengths no name has
	}
	s.indexes.Add(v.ID, x)
	return x
}

// pins returns the qualified names of the top-trust providers of the
// call's name: the servers to pin (M2: any of them; M3: the trusted one
// rather than its shadow).
func pins(vs resolve.Versions, c *schema.Call) []string {
	v := vs.At(c.Registry, c.EmittedAt)
	if v == nil {
		return nil
	}
	provs := v.Providers(c.Tool)
	top := 0
	for i, p := range provs {
		if i == 0 || p.Trust > top {
			top = p.Trust
		}
	}
	var out []string
	for _, p := range provs {
		if p.Trust == top && p.Server != "" {
			out = append(out, p.Server+"__"+p.Name)
		}
	}
	return out
}

// tool returns the signature of d's resolved tool and the normalised
// forms of its keys.
func (s *Suggester) tool(vs resolve.Versions, c *schema.Call, d *schema.Decision) (*signature.Signature, *keyForms) {
	v := vs.At(c.Registry, c.EmittedAt)
	if v == nil {
		return nil, nil
	}
	srv := v.Server(d.ResolvedServer)
	if srv == nil {
		return nil, nil
	}
	t := srv.Tool(d.ResolvedTool)
	if t == nil || t.Sig == nil {
		return nil, nil
	}
	f, ok := s.forms.Get(t.Digest)
	if !ok {
		f = &keyForms{}
		s.forms.Add(t.Digest, f)
	}
	return t.Sig, f
}

// keys returns the H2 hints: the declared keys nearest to an undeclared
// one (when the path names a key the arguments have), and the required
// keys missing from the object that holds it.
func (s *Suggester) keys(vs resolve.Versions, c *schema.Call, d *schema.Decision) (near, missing []string) {
	sig, forms := s.tool(vs, c, d)
	i := strings.LastIndexByte(d.Path, '/')
	if sig == nil || i < 0 {
		return nil, nil
	}
	parent, last := d.Path[:i], d.Path[i+1:]
	if strings.Contains(last, "~") {
		last = unescape.Replace(last)
	}
	e := sig.Expect(c.Arguments, parent)
	if e.Value.Kind() != jsontape.Object {
		return nil, nil
	}
	has := set(e.Value)
	if has(last) {
		near = nearestKeys(last, e.Keys, forms.of(e.Keys), has)
	}
	for _, r := range e.Required {
		if !has(r) {
			missing = append(missing, r)
		}
	}
	return near, missing
}

// unescape unescapes a JSON pointer token (RFC 6901).
var unescape = strings.NewReplacer("~1", "/", "~0", "~")

// set returns a membership test of the keys of object o: a scan for a
// few, a map beyond.
func set(o jsontape.Value) func(string) bool {
	if o.Len() <= 16 {
		return func(k string) bool { return o.Get(k).Exists() }
	}
	m := make(map[string]bool, o.Len())
	for it := o.Members(); it.Next(); {
		m[string(it.Name())] = true
	}
	return func(k string) bool { return m[k] }
}

// expected returns the H3 hint: the constraints at the decision's path.
func (s *Suggester) expected(vs resolve.Versions, c *schema.Call, d *schema.Decision) json.RawMessage {
	sig, _ := s.tool(vs, c, d)
	if sig == nil {
		return nil
	}
	return expected(sig.Expect(c.Arguments, d.Path).Values())
}
