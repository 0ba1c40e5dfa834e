package resolve

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// exhaustive is the H5 search as it was: every other tool of the version.
func exhaustive(v *registry.Version, name string, args jsontape.Value) *registry.Tool {
	for _, o := range v.Tools() {
		if o.Name != name && o.Sig.Accepts(args) {
			return o
		}
	}
	return nil
}

// synthetic is a catalogue of n tools in one single registry: properties
// drawn from a shared vocabulary (so keys overlap), some required, a few
// taking no key and, when open, a few open (additionalProperties true or
// a schema).
func synthetic(n int, seed uint64, open bool) ([]schema.Tool, [][]string) {
	rng := rand.New(rand.NewPCG(seed, 1))
	types := []string{"string", "integer", "boolean", "number"}
	var tools []schema.Tool
	var keys [][]string
	for i := range n {
		var props []string
		var ks []string
		for _, w := range rng.Perm(300)[:1+rng.IntN(5)] {
			k := fmt.Sprintf("k%d", w)
			ks = append(ks, k)
			props = append(props, fmt.Sprintf(`%q:{"type":%q}`, k, types[w%len(types)]))
		}
		var req []string
		for _, k := range ks[:rng.IntN(min(3, len(ks)+1))] {
			req = append(req, fmt.Sprintf("%q", k))
		}
		extra := ""
		switch r := rng.IntN(100); {
		case !open:
		case r < 1:
			extra = `,"additionalProperties":true`
		case r < 2:
			extra = `,"additionalProperties":{"type":"string"}`
		case r < 3:
			props, req, ks = nil, nil, nil
		}
		s := `{"type":"object","properties":{` + strings.Join(props, ",") + `},"required":[` + strings.Join(req, ",") + `]` + extra + `}`
		tools = append(tools, schema.Tool{Name: fmt.Sprintf("tool_%d", i), InputSchema: []byte(s)})
		keys = append(keys, ks)
	}
	return tools, keys
}

// argsFor builds an argument object for the given keys, each value of the
// type its name's vocabulary index gives (synthetic's rule), or of a
// random type.
func argsFor(rng *rand.Rand, ks []string, wrongType bool) string {
	vals := []string{`"s"`, `7`, `true`, `1.5`}
	var b strings.Builder
	b.WriteByte('{')
	seen := map[string]bool{} // a repeated key is MALFORMED before any search
	for _, k := range ks {
		if seen[k] {
			continue
		}
		if len(seen) > 0 {
			b.WriteByte(',')
		}
		seen[k] = true
		var w int
		fmt.Sscanf(k, "k%d", &w)
		v := vals[w%len(vals)]
		if wrongType || strings.HasPrefix(k, "x") {
			v = vals[rng.IntN(len(vals))]
		}
		fmt.Fprintf(&b, "%q:%s", k, v)
	}
	b.WriteByte('}')
	return b.String()
}

func mcpVersion(t testing.TB) *registry.Version {
	s := registry.New()
	for _, f := range []string{"listings.jsonl", "history.jsonl"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "corpus", "mcp", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			l, err := schema.DecodeListing([]byte(line))
			if err != nil {
				t.Fatal(err)
			}
			s.Apply(l)
		}
	}
	v := s.At("mcp-real", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC))
	if v == nil || len(v.Tools()) < 400 {
		t.Fatal("no mcp-real version")
	}
	return v
}

// TestCandidatesDifferential: the indexed H5 search gives the exhaustive
// search's answer (the same tool, or none) for argument objects made from
// the tools' own keys, mutated (undeclared keys, missing required keys,
// wrong types, empty), against the 406 real MCP tools and synthetic
// 1,000-tool catalogues with and without open tools.
func TestCandidatesDifferential(t *testing.T) {
	catalogue := func(open bool) (*registry.Version, [][]string) {
		tools, keys := synthetic(1000, 1, open)
		s := registry.New()
		s.Apply(&schema.Listing{EventID: "syn", ObservedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Registry: "syn", Op: schema.OpSnapshot, Tools: tools})
		return s.At("syn", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)), keys
	}
	synV, synKeys := catalogue(true)
	closedV, closedKeys := catalogue(false)

	mcp := mcpVersion(t)
	var mcpKeys [][]string
	for _, tl := range mcp.Tools() {
		mcpKeys = append(mcpKeys, tl.Sig.TopLevel().Declared)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name string
		v    *registry.Version
		keys [][]string
		open bool // open tools without required keys accept nearly anything
	}{{"mcp", mcp, mcpKeys, false}, {"synthetic", synV, synKeys, true}, {"synthetic-closed", closedV, closedKeys, false}} {
		t.Run(tc.name, func(t *testing.T) {
			var p jsontape.Tape
			checked, found := 0, 0
			all := tc.v.Tools()
			for i := range all {
				ks := tc.keys[i]
				variants := []string{argsFor(rng, ks, false), argsFor(rng, ks, true), `{}`,
					argsFor(rng, append(append([]string{}, ks...), "x_override"), false)}
				if len(ks) > 1 {
					variants = append(variants, argsFor(rng, ks[1:], false), argsFor(rng, ks[:1], false))
				}
				if o := tc.keys[rng.IntN(len(all))]; len(o) > 0 {
					variants = append(variants, argsFor(rng, append(append([]string{}, ks...), o[0]), false))
				}
				for _, a := range variants {
					if err := p.Parse([]byte(a)); err != nil {
						t.Fatal(err)
					}
					args := p.Root()
					for _, name := range []string{all[i].Name, all[rng.IntN(len(all))].Name, "not-a-tool"} {
						want, got := exhaustive(tc.v, name, args), otherAccepting(tc.v, name, args)
						if got != want {
							t.Fatalf("args %s, resolved %s: indexed search %v, exhaustive %v", a, name, toolName(got), toolName(want))
						}
						checked++
						if want != nil {
							found++
						}
					}
				}
			}
			if found < checked/10 || found == checked && !tc.open {
				t.Fatalf("only %d of %d searches found a tool: the test does not exercise the index", found, checked)
			}
			t.Logf("%d searches, %d found a tool", checked, found)
		})
	}
}

func toolName(t *registry.Tool) string {
	if t == nil {
		return "none"
	}
	return t.Name
}

// TestCandidatesDoNotAllocate: the indexed search (index built) allocates
// nothing, like the exhaustive scan it replaces.
func TestCandidatesDoNotAllocate(t *testing.T) {
	v := mcpVersion(t)
	var p jsontape.Tape
	if err := p.Parse([]byte(`{"owner":"o","repo":"r","override":true}`)); err != nil {
		t.Fatal(err)
	}
	args := p.Root()
	otherAccepting(v, "create_issue", args)
	if n := testing.AllocsPerRun(100, func() { otherAccepting(v, "create_issue", args) }); n > 0 {
		t.Fatalf("%.1f allocations per search", n)
	}
}

// BenchmarkLargeRegistry: one single registry of 5,000 tools; 20,000
// calls with valid arguments (OK), and 20,000 with an undeclared key
// (H2, after the H5 search), indexed and, for comparison, with the
// exhaustive search.
func BenchmarkLargeRegistry(b *testing.B) {
	tools, keys := synthetic(5000, 2, false)
	s := registry.New()
	s.Apply(&schema.Listing{EventID: "big", ObservedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Registry: "big", Op: schema.OpSnapshot, Tools: tools})
	snap := s.Snapshot()
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(bad bool) [][]byte {
		var lines [][]byte
		for i := range 20000 {
			k := rng.IntN(len(tools))
			ks := keys[k]
			if bad {
				ks = append(append([]string{}, ks...), "override")
			}
			line, _ := json.Marshal(map[string]any{"type": "call", "event_id": fmt.Sprint("c", i), "emitted_at": "2026-06-01T00:00:00Z",
				"registry": "big", "tool": tools[k].Name, "arguments": json.RawMessage(argsFor(rng, ks, false))})
			lines = append(lines, line)
		}
		return lines
	}
	ok, bad := mk(false), mk(true)
	var r Resolver
	for _, tc := range []struct {
		name  string
		lines [][]byte
		want  schema.Class
	}{{"ok", ok, schema.OK}, {"undeclared-key", bad, schema.H2}} {
		b.Run(tc.name, func(b *testing.B) {
			var dec schema.CallDecoder
			var c schema.Call
			var d schema.Decision
			for b.Loop() {
				for _, l := range tc.lines {
					if err := dec.Decode(l, &c); err != nil {
						b.Fatal(err)
					}
					r.Resolve(snap, &c, &d)
					if d.Class != tc.want {
						b.Fatalf("class %s (%s), want %s", d.Class, d.Reason, tc.want)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tc.lines)), "ns/call")
		})
	}
	b.Run("undeclared-key-exhaustive-search", func(b *testing.B) {
		var dec schema.CallDecoder
		var c schema.Call
		for b.Loop() {
			for _, l := range bad {
				if err := dec.Decode(l, &c); err != nil {
					b.Fatal(err)
				}
				v := snap.At(c.Registry, c.EmittedAt)
				t := v.Providers(c.Tool)[0]
				t.Sig.Check(c.Arguments)
				exhaustive(v, t.Name, c.Arguments)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(bad)), "ns/call")
	})
}
