package signature

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/oracle"
	"github.com/toolaudit/toolaudit/jsontape"
)

// gen builds a random schema using every 2020-12 keyword the checker
// enforces, and random instances for it, from a stream of bytes (a fuzz
// input or a seeded generator). Patterns are ones that ECMA-262 and RE2
// read alike, and no $ref sits under not (internal/testkit/oracle's rewrite does
// not compile those apart, as the checker does).
type gen struct {
	b []byte
	i int
}

func (g *gen) n(k int) int {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return int(g.b[g.i-1]) % k
}

var (
	genKeys     = []string{"a", "b", "c", "ab"}
	genPatterns = []string{"^a", "b$", "^[ab]+$", "c"}
)

func (g *gen) key() string { return genKeys[g.n(len(genKeys))] }

func (g *gen) schema(depth int, negated bool) string {
	if depth <= 0 || g.n(5) == 0 {
		return g.leaf()
	}
	var parts []string
	for range 1 + g.n(3) {
		parts = append(parts, g.keyword(depth-1, negated))
	}
	// A member repeated by the generator is dropped: JSON has none.
	seen := map[string]bool{}
	var out []string
	for _, p := range parts {
		name := p[:strings.Index(p, ":")]
		if !seen[name] {
			seen[name] = true
			out = append(out, p)
		}
	}
	return "{" + strings.Join(out, ",") + "}"
}

func (g *gen) leaf() string {
	switch g.n(8) {
	case 0:
		return "true"
	case 1:
		return "false"
	case 2:
		return `{"type":"integer"}`
	case 3:
		return `{"type":"string"}`
	case 4:
		return `{"type":"object"}`
	case 5:
		return `{"enum":[1,"a",null]}`
	case 6:
		return `{"minimum":2}`
	}
	return `{}`
}

func (g *gen) schemas(depth int, negated bool) string {
	var s []string
	for range 1 + g.n(3) {
		s = append(s, g.schema(depth, negated))
	}
	return "[" + strings.Join(s, ",") + "]"
}

func (g *gen) props(depth int, negated bool, keys []string) string {
	var s []string
	seen := map[string]bool{}
	for range 1 + g.n(3) {
		k := keys[g.n(len(keys))]
		if !seen[k] {
			seen[k] = true
			s = append(s, fmt.Sprintf("%q:%s", k, g.schema(depth, negated)))
		}
	}
	return "{" + strings.Join(s, ",") + "}"
}

func (g *gen) keyword(depth int, negated bool) string {
	switch g.n(32) {
	case 0:
		return `"type":` + []string{`"object"`, `"array"`, `"string"`, `"integer"`, `["object","null"]`, `"number"`}[g.n(6)]
	case 1, 2:
		return `"properties":` + g.props(depth, negated, genKeys)
	case 3:
		return `"patternProperties":` + g.props(depth, negated, genPatterns)
	case 4:
		return `"additionalProperties":` + g.schema(depth, negated)
	case 5:
		return fmt.Sprintf(`"required":[%q]`, g.key())
	case 6:
		return `"propertyNames":` + g.schema(depth, negated)
	case 7:
		return fmt.Sprintf(`"dependentRequired":{%q:[%q]}`, g.key(), g.key())
	case 8:
		return fmt.Sprintf(`"dependentSchemas":{%q:%s}`, g.key(), g.schema(depth, negated))
	case 9:
		return `"if":` + g.schema(depth, negated)
	case 10:
		return `"then":` + g.schema(depth, negated)
	case 11:
		return `"else":` + g.schema(depth, negated)
	case 12:
		return `"unevaluatedProperties":` + g.schema(depth, negated)
	case 13:
		return `"items":` + g.schema(depth, negated)
	case 14:
		return `"prefixItems":` + g.schemas(depth, negated)
	case 15:
		return `"contains":` + g.schema(depth, negated)
	case 16:
		return fmt.Sprintf(`"minContains":%d`, g.n(3))
	case 17:
		return fmt.Sprintf(`"maxContains":%d`, g.n(3))
	case 18:
		return `"unevaluatedItems":` + g.schema(depth, negated)
	case 19:
		return `"allOf":` + g.schemas(depth, negated)
	case 20:
		return `"anyOf":` + g.schemas(depth, negated)
	case 21:
		return `"oneOf":` + g.schemas(depth, negated)
	case 22:
		return `"not":` + g.schema(depth, !negated)
	case 23:
		if negated {
			return `"minProperties":1`
		}
		return fmt.Sprintf(`"$ref":"#/$defs/d%d"`, g.n(2))
	case 24:
		return fmt.Sprintf(`"maxProperties":%d`, g.n(3))
	case 25:
		return fmt.Sprintf(`"minItems":%d`, g.n(3))
	case 26:
		return `"uniqueItems":true`
	case 27:
		return fmt.Sprintf(`"maxLength":%d`, g.n(3))
	case 28:
		return fmt.Sprintf(`"pattern":%q`, genPatterns[g.n(len(genPatterns))])
	case 29:
		return fmt.Sprintf(`"multipleOf":%d`, 1+g.n(3))
	case 30:
		return `"const":` + g.value(1)
	}
	return `"enum":[` + g.value(1) + "," + g.value(1) + "]"
}

func (g *gen) value(depth int) string {
	switch g.n(8) {
	case 0:
		return "null"
	case 1:
		return []string{"0", "1", "2", "3.5", "6"}[g.n(5)]
	case 2:
		return fmt.Sprintf("%q", []string{"a", "b", "ab", "c", "abc", ""}[g.n(6)])
	case 3:
		return "true"
	case 4, 5:
		if depth <= 0 {
			return "{}"
		}
		var s []string
		seen := map[string]bool{}
		for range g.n(4) {
			k := g.key()
			if !seen[k] {
				seen[k] = true
				s = append(s, fmt.Sprintf("%q:%s", k, g.value(depth-1)))
			}
		}
		return "{" + strings.Join(s, ",") + "}"
	}
	if depth <= 0 {
		return "[]"
	}
	var s []string
	for range g.n(4) {
		s = append(s, g.value(depth-1))
	}
	return "[" + strings.Join(s, ",") + "]"
}

// document is a generated inputSchema: a root with $defs d0 and d1.
func (g *gen) document() string {
	root := g.schema(3, false)
	d0, d1 := g.schema(2, false), g.schema(2, false)
	defs := fmt.Sprintf(`"$defs":{"d0":%s,"d1":%s}`, d0, d1)
	if root == "{}" || !strings.HasPrefix(root, "{") {
		return "{" + defs + "}"
	}
	return "{" + defs + "," + root[1:]
}

// compareGenerated checks one generated schema against a few instances:
// the checker passes what the oracle accepts, fails what it refuses, and
// is never Unchecked (every generated keyword is enforced).
func compareGenerated(t *testing.T, g *gen) int {
	doc := g.document()
	ours, err := Compile([]byte(doc))
	if err != nil {
		t.Fatalf("Compile(%s): %v", doc, err)
	}
	for _, u := range ours.Unsupported() {
		if u.Keyword == "$ref" && strings.Contains(u.Why, "cycle") {
			return 0 // no finite meaning: the checker matches nothing there (TestRefCycles), validators differ
		}
	}
	theirs, err := oracle.Compile([]byte(doc))
	if err != nil {
		return 0 // not a schema the oracle takes (e.g. minContains beside no contains is fine; others are not)
	}
	checked := 0
	for range 4 {
		inst := g.value(3)
		if !strings.HasPrefix(inst, "{") {
			inst = `{"a":` + inst + "}"
		}
		var tp jsontape.Tape
		if err := tp.Parse([]byte(inst)); err != nil {
			t.Fatalf("instance %s: %v", inst, err)
		}
		res := ours.Check(tp.Root())
		want := theirs.Validate(oracle.Instance(tp.Root())) == nil
		if res.Kind == Unchecked {
			t.Fatalf("schema %s\ninstance %s: Unchecked (%s), yet every keyword is enforced", doc, inst, res.Reason)
		}
		if (res.Kind == Pass) != want {
			t.Fatalf("schema %q\ninstance %s\nours %+v, oracle valid=%v\nrewritten %v", doc, inst, res, want, oracle.CloseWorld(mustJSON(doc)))
		}
		var raw any
		_ = json.Unmarshal([]byte(inst), &raw)
		checked++
	}
	return checked
}

// TestDifferentialGenerated: the checker and the closed-world 2020-12
// oracle agree on generated schemas that use every keyword (a fixed seed:
// FuzzDifferentialGenerated explores further).
func TestDifferentialGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 2020))
	checked := 0
	buf := make([]byte, 256)
	for range 20000 {
		for i := range buf {
			buf[i] = byte(r.Uint32())
		}
		checked += compareGenerated(t, &gen{b: buf})
	}
	t.Logf("%d checks", checked)
	if checked < 40000 {
		t.Fatalf("only %d checks: the generator makes schemas the oracle refuses", checked)
	}
}

func FuzzDifferentialGenerated(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte("unevaluatedProperties if then else"))
	f.Fuzz(func(t *testing.T, b []byte) {
		compareGenerated(t, &gen{b: b})
	})
}

func mustJSON(s string) any {
	var v any
	_ = json.Unmarshal([]byte(s), &v)
	return v
}
