package signature

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolaudit/toolaudit/internal/testkit/oracle"
	"github.com/toolaudit/toolaudit/jsontape"
)

// The differential oracle is a general JSON Schema validator run on the
// schemas rewritten to the contract's closed world (package
// internal/testkit/oracle says how). Schemas it cannot compile (type names that are
// not JSON Schema's, such as "dict") are excluded, and the checker must
// report them as unsupported.

type oracleTool struct {
	name   string
	raw    []byte
	doc    any
	ours   *Signature
	oracle *jsonschema.Schema // nil: excluded
}

// loadTools reads every tool of the given listing files.
func loadTools(t testing.TB, files ...string) map[string][]*oracleTool {
	t.Helper()
	byRegistry := map[string][]*oracleTool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var l struct {
				Registry string `json:"registry"`
				Tools    []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				t.Fatal(err)
			}
			for _, tl := range l.Tools {
				doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(tl.InputSchema))
				if err != nil {
					t.Fatal(err)
				}
				ours, err := Compile(tl.InputSchema)
				if err != nil {
					t.Fatal(err)
				}
				ot := &oracleTool{name: tl.Name, raw: tl.InputSchema, doc: doc, ours: ours}
				ot.oracle, _ = oracle.Compile(tl.InputSchema)
				if ot.oracle == nil && len(ours.Unsupported()) == 0 {
					t.Errorf("%s/%s: the oracle cannot compile it, yet nothing is reported unsupported", l.Registry, tl.Name)
				}
				byRegistry[l.Registry] = append(byRegistry[l.Registry], ot)
			}
		}
		fh.Close()
	}
	return byRegistry
}

func corpus(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata", "corpus"}, parts...)...)
}

// example builds arguments that follow the schema's shape: every declared
// property, the first enum value or branch, lengths and bounds at their
// minimum. They are not always valid (that is fine: both sides judge).
func example(s any, depth int) any {
	m, ok := s.(map[string]any)
	if !ok || depth > 6 {
		return nil
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if c, ok := m["const"]; ok {
		return c
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if arr, ok := m[k].([]any); ok && len(arr) > 0 {
			if _, typed := m["type"]; !typed {
				return example(arr[0], depth+1)
			}
		}
	}
	typ := "object"
	switch tv := m["type"].(type) {
	case string:
		typ = tv
	case []any:
		if len(tv) > 0 {
			typ, _ = tv[0].(string)
		}
	default:
		if _, ok := m["properties"]; !ok {
			typ = "string"
		}
	}
	switch typ {
	case "object":
		out := map[string]any{}
		if props, ok := m["properties"].(map[string]any); ok {
			for k, ps := range props {
				out[k] = example(ps, depth+1)
			}
		}
		return out
	case "array":
		var out []any
		if items, ok := m["items"].(map[string]any); ok {
			out = append(out, example(items, depth+1))
		}
		return out
	case "string":
		return "x"
	case "integer":
		return json.Number("1")
	case "number":
		return json.Number("1.5")
	case "boolean":
		return true
	}
	return nil
}

// mutations returns v and variants of it: each key dropped, an extra key,
// each value replaced by values of other types, one level deep and in
// nested objects.
func mutations(v map[string]any) []any {
	out := []any{v, map[string]any{}}
	repl := []any{"5", json.Number("5"), json.Number("2.5"), json.Number("2.0"), json.Number("-1"), nil, true,
		"", "x", []any{}, []any{"x"}, []any{json.Number("1"), json.Number("1")}, map[string]any{}, map[string]any{"zz": json.Number("1")}}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range v {
			if !yield(k) {
				return
			}
		}
	})
	with := func(k string, x any) map[string]any {
		c := make(map[string]any, len(v)+1)
		for kk, vv := range v {
			c[kk] = vv
		}
		if x == nil && k == "" {
			return c
		}
		c[k] = x
		return c
	}
	out = append(out, with("zz_undeclared", true))
	for _, k := range keys {
		drop := with("", nil)
		delete(drop, k)
		out = append(out, drop)
		for _, r := range repl {
			out = append(out, with(k, r))
		}
		if sub, ok := v[k].(map[string]any); ok {
			for _, sm := range mutations(sub)[1:] {
				out = append(out, with(k, sm))
			}
		}
		if arr, ok := v[k].([]any); ok && len(arr) > 0 {
			if sub, ok := arr[0].(map[string]any); ok {
				for _, sm := range mutations(sub)[1:] {
					out = append(out, with(k, []any{sm}))
				}
			}
		}
	}
	return out
}

type differential struct {
	t              *testing.T
	checked, fails int
	agreeFail      int
}

func (d *differential) compare(where string, ot *oracleTool, args any) {
	if ot.oracle == nil {
		return
	}
	raw, err := json.Marshal(args)
	if err != nil {
		d.t.Fatal(err)
	}
	d.compareRaw(where, ot, raw)
}

func (d *differential) compareRaw(where string, ot *oracleTool, raw []byte) {
	var tp jsontape.Tape
	if tp.Parse(raw) != nil {
		return // the call decoder rejects it before any checker runs
	}
	v := tp.Root()
	inst := oracle.Instance(v)
	d.checked++
	want := ot.oracle.Validate(inst) == nil
	got := ot.ours.Check(v)
	if !want {
		d.fails++
	}
	if got.Kind == Pass != want {
		d.t.Errorf("%s %s: ours %+v, oracle valid=%v\nargs %s\nschema %s", where, ot.name, got, want, raw, ot.raw)
		return
	}
	if !want {
		d.agreeFail++
	}
}

// TestDifferentialOracle: same verdict as the closed-world JSON Schema
// oracle on every corpus call (against every tool of its registry) and on
// thousands of mutations of them and of examples built from every real
// manifest.
func TestDifferentialOracle(t *testing.T) {
	tools := loadTools(t, corpus("mcp", "listings.jsonl"), corpus("mcp", "history.jsonl"),
		corpus("sample", "listings.jsonl"), corpus("bfcl", "listings.jsonl"))
	d := &differential{t: t}
	excluded := 0
	regs := slices.Sorted(func(yield func(string) bool) {
		for r := range tools {
			if !yield(r) {
				return
			}
		}
	})
	// Examples of every tool, mutated, against the tool itself.
	for _, r := range regs {
		for _, ot := range tools[r] {
			if ot.oracle == nil {
				excluded++
				continue
			}
			ex, _ := example(ot.doc, 0).(map[string]any)
			if ex == nil {
				continue
			}
			for _, m := range mutations(jsonNumbers(ex)) {
				d.compare(r, ot, m)
			}
		}
	}
	// Corpus calls, mutated, against every tool of their registry.
	for _, f := range []string{corpus("sample", "calls.jsonl"), corpus("bfcl", "calls.jsonl")} {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			dec.UseNumber()
			var c struct {
				Registry  string         `json:"registry"`
				Arguments map[string]any `json:"arguments"`
			}
			if err := dec.Decode(&c); err != nil || c.Arguments == nil {
				continue
			}
			for _, m := range mutations(c.Arguments) {
				for _, ot := range tools[c.Registry] {
					d.compare(c.Registry, ot, m)
				}
			}
		}
		fh.Close()
	}
	t.Logf("%d checks, %d failing on both sides, %d tools excluded (oracle cannot compile)", d.checked, d.agreeFail, excluded)
	if d.checked < 100000 || d.agreeFail < d.checked/10 || d.agreeFail > d.checked*9/10 {
		t.Fatalf("differential too weak: %d checks, %d failures", d.checked, d.agreeFail)
	}
}

func jsonNumbers(v map[string]any) map[string]any {
	b, _ := json.Marshal(v)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out map[string]any
	_ = dec.Decode(&out)
	return out
}

// FuzzDifferentialOracle feeds arbitrary argument objects to a few real
// schemas (github, fetch, git, a BFCL nested one) on both sides.
func FuzzDifferentialOracle(f *testing.F) {
	tools := loadTools(f, corpus("mcp", "listings.jsonl"))
	var picked []*oracleTool
	for _, r := range slices.Sorted(func(yield func(string) bool) {
		for r := range tools {
			if !yield(r) {
				return
			}
		}
	}) {
		for _, ot := range tools[r] {
			s := string(ot.raw)
			if ot.oracle != nil && (strings.Contains(s, "anyOf") || strings.Contains(s, "oneOf") ||
				strings.Contains(s, "exclusiveM") || strings.Contains(s, "enum") || strings.Contains(s, "maxLength")) {
				picked = append(picked, ot)
			}
		}
	}
	for i, ot := range picked {
		ex, _ := json.Marshal(example(ot.doc, 0))
		f.Add(uint8(i), ex)
	}
	f.Add(uint8(0), []byte(`{"a":null}`))
	f.Fuzz(func(t *testing.T, i uint8, raw []byte) {
		var tp jsontape.Tape
		if tp.Parse(raw) != nil || tp.Root().Kind() != jsontape.Object {
			return // the call decoder rejects these before any checker runs
		}
		ot := picked[int(i)%len(picked)]
		d := &differential{t: t}
		d.compareRaw("fuzz", ot, raw)
	})
}
