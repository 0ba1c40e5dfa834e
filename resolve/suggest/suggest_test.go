package suggest

import (
	"bufio"
	"bytes"
	"flag"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

var update = flag.Bool("update", false, "rewrite testdata/hints.golden.jsonl")

func loadStore(t testing.TB, path string) *registry.Store {
	t.Helper()
	store := registry.New()
	if _, err := check.LoadListingsFile(path, store, nil); err != nil {
		t.Fatal(err)
	}
	return store
}

// TestHintsGolden decides every call of testdata/calls.jsonl and compares
// its class and hints with the reviewed golden file.
func TestHintsGolden(t *testing.T) {
	store := loadStore(t, "testdata/listings.jsonl")
	s := New()
	var got bytes.Buffer
	calls, err := os.ReadFile("testdata/calls.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var r resolve.Resolver
	var dec schema.CallDecoder
	for _, line := range bytes.Split(bytes.TrimSpace(calls), []byte("\n")) {
		var c schema.Call
		var d schema.Decision
		if !r.Decide(store.Snapshot(), &dec, line, &c, &d) {
			t.Fatalf("%s: %s", line, d.Reason)
		}
		h := s.Hints(store.Snapshot(), &c, &d)
		b := append([]byte(`{"event_id":`), schema.AppendString(nil, c.EventID)...)
		b = append(b, `,"class":`...)
		b = schema.AppendString(b, string(d.Class))
		b = append(b, `,"hints":`...)
		b = h.AppendJSON(b)
		got.Write(append(b, "}\n"...))
		if (d.Class == schema.H1 || d.Class == schema.M1) && s.Tool(store.Snapshot(), &c, &d) != first(h.Tools) {
			t.Errorf("%s: Tool %q, Hints %v", c.EventID, s.Tool(store.Snapshot(), &c, &d), h.Tools)
		}
	}
	const golden = "testdata/hints.golden.jsonl"
	if *update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := lines(got.String()), lines(string(want))
	if len(gl) != len(wl) {
		t.Fatalf("%d hint lines, golden has %d", len(gl), len(wl))
	}
	for i := range gl {
		if gl[i] != wl[i] {
			t.Errorf("got  %s\nwant %s", gl[i], wl[i])
		}
	}
}

// TestForgottenKeyIsNotABorrowedShape: a client that forgot write_file's
// content is told which key is missing, not that its call fits
// create_directory (contract v1.2); a call carrying create_directory's
// undeclared key content is H5 and names write_file.
func TestForgottenKeyIsNotABorrowedShape(t *testing.T) {
	store := loadStore(t, "testdata/listings.jsonl")
	s := New()
	for _, tc := range []struct {
		line, class, reason, missing string
	}{
		{`{"type":"call","event_id":"c","emitted_at":"2026-02-01T00:00:00Z","registry":"multi","server":"files","tool":"write_file","arguments":{"path":"notes.txt"}}`,
			"H2", "required argument missing", "content"},
		{`{"type":"call","event_id":"c","emitted_at":"2026-02-01T00:00:00Z","registry":"multi","server":"files","tool":"create_directory","arguments":{"path":"notes.txt","content":"x"}}`,
			"H5", `fit tool "files/write_file"`, ""},
	} {
		var r resolve.Resolver
		var dec schema.CallDecoder
		var c schema.Call
		var d schema.Decision
		if !r.Decide(store.Snapshot(), &dec, []byte(tc.line), &c, &d) {
			t.Fatal(d.Reason)
		}
		h := s.Hints(store.Snapshot(), &c, &d)
		if string(d.Class) != tc.class || !strings.Contains(d.Reason, tc.reason) || strings.Join(h.Missing, ",") != tc.missing || len(h.Tools) != 0 {
			t.Errorf("%s: %s %q hints %+v, want %s %q missing %q", c.Tool, d.Class, d.Reason, h, tc.class, tc.reason, tc.missing)
		}
	}
}

func first(ss []string) string {
	if len(ss) == 0 {
		return ""
	}
	return ss[0]
}

func lines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"create_issue", "createissue"},
		{"CreateIssue", "createissue"},
		{"create-issues", "createissue"},
		{"createIssues", "createissue"},
		{"list.branches", "listbranch"},
		{"get_policies", "getpolici"},
		{"get_policy", "getpolicy"}, // ies and y differ by one edit: close, not equal
		{"gas", "gas"},
		{"address", "address"},
		{"HTTPServer", "httpserver"},
		{"getV2Items", "getv2item"},
		{"", ""},
		{"___", ""},
	} {
		if got := normalize(tc.in); got != tc.want {
			t.Errorf("normalize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// osa is the textbook full-matrix optimal string alignment distance, the
// oracle of within.
func osa(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			c := d[i-1][j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			c = min(c, d[i-1][j]+1, d[i][j-1]+1)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				c = min(c, d[i-2][j-2]+1)
			}
			d[i][j] = c
		}
	}
	return d[len(a)][len(b)]
}

// TestWithin checks the banded, early-exit distance against the full one
// on random strings over a small alphabet (so that distances are small).
func TestWithin(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	row := make([]int, 3*13)
	for i := 0; i < 20000; i++ {
		a, b := word(), word()
		k := rng.IntN(5)
		want := osa(a, b)
		d, ok := within(a, b, k, row)
		if ok != (want <= k) || (ok && d != want) {
			t.Fatalf("within(%q, %q, %d) = %d, %v; distance %d", a, b, k, d, ok, want)
		}
	}
}

// TestLongNames: a name far longer than any valid one is not compared.
func TestLongNames(t *testing.T) {
	store := loadStore(t, "testdata/listings.jsonl")
	s := New()
	c := schema.Call{Registry: "single", Tool: strings.Repeat("create_issue", 1000)}
	c.EmittedAt, _ = schema.ParseTime("2026-02-01T00:00:00Z")
	d := schema.Decision{Class: schema.H1}
	if h := s.Hints(store.Snapshot(), &c, &d); !h.Empty() {
		t.Fatalf("hints %v", h)
	}
}

// TestHintsReadTheSignature: the hints come from the compiled signature's
// reading of the schema (Signature.Expect), so keys and values that only
// JSON Schema 2020-12's newer keywords declare are hinted: a key declared
// through patternProperties or a then branch, a value reached through a
// $ref to an embedded $id resource or a $dynamicRef, a key a dependent
// schema requires.
func TestHintsReadTheSignature(t *testing.T) {
	const tools = `[
	{"name":"limits","inputSchema":{"type":"object","properties":{"name":{"type":"string"}},
		"patternProperties":{"^(cpu|mem)_limit$":{"type":"integer","minimum":0}}}},
	{"name":"fetch","inputSchema":{"type":"object","properties":{"kind":{"enum":["file","web"]}},"required":["kind"],
		"if":{"properties":{"kind":{"const":"file"}}},
		"then":{"properties":{"path":{"type":"string","minLength":1}},"required":["path"]},
		"else":{"properties":{"url":{"type":"string","format":"uri"}}}}},
	{"name":"embedded","inputSchema":{"type":"object","properties":{"n":{"$ref":"https://example.com/count.json"}},
		"$defs":{"count":{"$id":"https://example.com/count.json","$ref":"#/$defs/c","$defs":{"c":{"type":"integer","maximum":9}}}}}},
	{"name":"tree","inputSchema":{"$id":"https://example.com/tree","type":"object","properties":{"l":{"$ref":"list"}},
		"$defs":{"item":{"$dynamicAnchor":"item","type":"integer","minimum":1},
			"list":{"$id":"list","type":"array","items":{"$dynamicRef":"#item"},"$defs":{"item":{"$dynamicAnchor":"item","type":"string"}}}}}},
	{"name":"deps","inputSchema":{"type":"object","properties":{"user":{"type":"string"},"password":{"type":"string"}},
		"dependentRequired":{"user":["password"]}}}
	]`
	store := registry.New()
	l, err := schema.DecodeListing([]byte(`{"type":"listing","event_id":"l","observed_at":"2026-01-01T00:00:00Z","registry":"r","server":"","op":"snapshot","tools":` + tools + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if is := store.Apply(l); len(is) > 0 {
		t.Fatal(is)
	}
	s := New()
	for _, tc := range []struct {
		tool, args, class, hints string
	}{
		{"limits", `{"name":"a","cpu_limt":2}`, "H2", `{"keys":["cpu_limit"]}`},
		{"limits", `{"mem_limit":-1}`, "H3", `{"expected":{"minimum":0,"type":"integer"}}`},
		{"fetch", `{"kind":"file","pth":"/tmp/x"}`, "H2", `{"keys":["path"],"missing":["path"]}`},
		{"fetch", `{"kind":"file","path":""}`, "H3", `{"expected":{"minLength":1,"type":"string"}}`},
		{"fetch", `{"kind":"web","path":"/tmp/x","ulr":"x"}`, "H2", `{"keys":["url"]}`},
		{"embedded", `{"n":10}`, "H3", `{"expected":{"maximum":9,"type":"integer"}}`},
		{"tree", `{"l":["x"]}`, "H3", `{"expected":{"minimum":1,"type":"integer"}}`},
		{"deps", `{"user":"u"}`, "H2", `{"missing":["password"]}`},
	} {
		line := `{"type":"call","event_id":"c","emitted_at":"2026-02-01T00:00:00Z","registry":"r","tool":"` + tc.tool + `","arguments":` + tc.args + `}`
		var r resolve.Resolver
		var dec schema.CallDecoder
		var c schema.Call
		var d schema.Decision
		if !r.Decide(store.Snapshot(), &dec, []byte(line), &c, &d) {
			t.Fatal(d.Reason)
		}
		h := s.Hints(store.Snapshot(), &c, &d)
		if got := string(h.AppendJSON(nil)); string(d.Class) != tc.class || got != tc.hints {
			t.Errorf("%s %s: %s (%s at %q) hints %s, want %s %s", tc.tool, tc.args, d.Class, d.Reason, d.Path, got, tc.class, tc.hints)
		}
	}
}

// TestHintsConcurrent: one Suggester serves goroutines at once (its caches
// and the forms of key names are shared) and answers each as it answers
// alone; run with -race.
func TestHintsConcurrent(t *testing.T) {
	store := loadStore(t, "testdata/listings.jsonl")
	calls, err := os.ReadFile("testdata/calls.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	type decided struct {
		c    schema.Call
		d    schema.Decision
		want string
	}
	var xs []*decided
	alone := New()
	for _, line := range bytes.Split(bytes.TrimSpace(calls), []byte("\n")) {
		var r resolve.Resolver
		var dec schema.CallDecoder
		x := &decided{}
		if !r.Decide(store.Snapshot(), &dec, line, &x.c, &x.d) {
			t.Fatal(x.d.Reason)
		}
		h := alone.Hints(store.Snapshot(), &x.c, &x.d)
		x.want = string(h.AppendJSON(nil))
		xs = append(xs, x)
	}
	s := New(WithCacheSizes(1, 1, 1)) // evictions while others read
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				x := xs[(g+i)%len(xs)]
				h := s.Hints(store.Snapshot(), &x.c, &x.d)
				if got := string(h.AppendJSON(nil)); got != x.want {
					errs <- x.c.EventID + ": " + got + ", alone " + x.want
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestHintsArgsUnrecorded: the hints of a call decided on its name only
// (arguments not recorded, H3 "not enforced:") read no arguments: the
// expected schema at the root, nothing about keys.
func TestHintsArgsUnrecorded(t *testing.T) {
	store := loadStore(t, "testdata/listings.jsonl")
	calls, err := os.ReadFile("testdata/calls.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var probe schema.Call // the first call whose name resolves
	var dec schema.CallDecoder
	var r resolve.Resolver
	for _, line := range bytes.Split(bytes.TrimSpace(calls), []byte("\n")) {
		var d schema.Decision
		if r.Decide(store.Snapshot(), &dec, line, &probe, &d) && d.ResolvedTool != "" {
			probe.Tool, probe.Server = d.ResolvedTool, d.ResolvedServer
			break
		}
	}
	ev := schema.AppendCall(nil, &schema.Call{EventID: "u-1", EmittedAt: probe.EmittedAt, Registry: probe.Registry, Tool: probe.Tool, Server: probe.Server},
		schema.CallArgs{Unrecorded: true})
	var c schema.Call
	var d schema.Decision
	if !r.Decide(store.Snapshot(), &dec, ev, &c, &d) || d.Class != schema.H3 || d.Reason != resolve.ArgsNotRecorded {
		t.Fatalf("%s: %+v", ev, d)
	}
	h := New().Hints(store.Snapshot(), &c, &d)
	if len(h.Keys) != 0 || len(h.Missing) != 0 {
		t.Errorf("hints about keys of arguments never recorded: %s", h.AppendJSON(nil))
	}
}
