package signature

import (
	"fmt"
	"strings"
	"testing"
)

// TestRefCycles: a $ref cycle that consumes no data is reported when the
// schema is compiled, naming the cycle, and matches no value (H3 with the
// cycle as the reason), where it used to overflow the stack. Recursion
// through data keeps working to the depth of the data.
func TestRefCycles(t *testing.T) {
	tests := []struct {
		name, schema, args string
		cycle              string // the cycle as reported; "" when there is none
		pass               bool
		path               string
	}{
		{"self", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `{"x":1}`,
			"#/$defs/a -> #/$defs/a", false, "/x"},
		{"mutual", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `{"x":"s"}`,
			"#/$defs/a -> #/$defs/b -> #/$defs/a", false, "/x"},
		{"through anyOf", `{"type":"object","$defs":{"a":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `{"x":"s"}`,
			"#/$defs/a -> #/$defs/a/anyOf/1 -> #/$defs/a", false, "/x"},
		{"through not", `{"type":"object","$defs":{"a":{"not":{"$ref":"#/$defs/a"}}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, `{"x":1}`,
			"#/$defs/a -> #/$defs/a/not -> #/$defs/a -> #/$defs/a/not -> #/$defs/a", false, "/x"}, // under not, a is compiled apart (open)
		{"through allOf and root", `{"type":"object","allOf":[{"$ref":"#"}],"properties":{"x":{}}}`, `{"x":1}`,
			"# -> #/allOf/0 -> #", false, ""},
		{"unused cycle", `{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"type":"integer"}}}`, `{"x":1}`,
			"", true, ""},
		{"tree", `{"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`,
			`{"root":{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]},{"v":4}]}}`, "", true, ""},
		{"tree bad leaf", `{"type":"object","properties":{"root":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}`,
			`{"root":{"v":1,"kids":[{"v":2,"kids":[{"v":"3"}]}]}}`, "", false, "/root/kids/0/kids/0/v"},
		{"through additionalProperties", `{"type":"object","additionalProperties":{"$ref":"#/$defs/o"},"$defs":{"o":{"type":"object","additionalProperties":{"$ref":"#/$defs/o"}}}}`,
			`{"a":{"b":{"c":{}}}}`, "", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			var reported []string
			for _, u := range s.Unsupported() {
				reported = append(reported, u.String())
			}
			all := strings.Join(reported, "\n")
			if tt.cycle == "" {
				if strings.Contains(all, "cycle") {
					t.Fatalf("a cycle reported: %s", all)
				}
			} else if !strings.Contains(all, "reference cycle that consumes no data: "+tt.cycle+"; it matches no value") {
				t.Fatalf("reported %q, want the cycle %s", all, tt.cycle)
			}
			got := s.Check(parse(t, tt.args))
			if (got.Kind == Pass) != tt.pass || got.Path != tt.path {
				t.Fatalf("Check = %+v, want pass=%v path %q", got, tt.pass, tt.path)
			}
			if tt.cycle != "" && (got.Kind != ValueFail || !strings.Contains(got.Reason, tt.cycle)) {
				t.Fatalf("reason %q does not name the cycle", got.Reason)
			}
			if s.Accepts(parse(t, tt.args)) != tt.pass {
				t.Fatal("Accepts disagrees with Check")
			}
		})
	}
}

// TestRecursionToDataDepth: a recursive schema is checked to the depth of
// the data, which the parser bounds.
func TestRecursionToDataDepth(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}}}`)
	args := strings.Repeat(`{"n":`, 120) + `{"v":"x"}` + strings.Repeat("}", 120)
	got := s.Check(parse(t, args))
	if got.Kind != ValueFail || strings.Count(got.Path, "/n") != 120 || !strings.HasSuffix(got.Path, "/v") {
		t.Fatalf("Check = %+v", got)
	}
}

// TestExponentialSchemaIsBounded: two anyOf branches that both recurse into
// the same data double the work per level (2^120 here); the check runs out
// of steps and fails with a reason that says so.
func TestExponentialSchemaIsBounded(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"anyOf":[
		{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["z"]},
		{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["y"]}]}}}`)
	args := parse(t, strings.Repeat(`{"n":`, 120)+`{}`+strings.Repeat("}", 120))
	got := s.Check(args)
	if got.Kind != ValueFail || !strings.Contains(got.Reason, "too costly") {
		t.Fatalf("Check = %+v", got)
	}
	if s.Accepts(args) {
		t.Fatal("accepted")
	}
}

// TestLinearShapes: the shapes that were quadratic (uniqueItems compared
// pairwise, required looked up per name, enums scanned) decide correctly;
// BenchmarkHostile shows their cost per byte.
func TestLinearShapes(t *testing.T) {
	const n = 200000
	ints := func(dup bool) string {
		var b strings.Builder
		b.WriteString(`{"a":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			if dup && i == n-1 {
				b.WriteString("17.0") // equal to item 17, by value
				continue
			}
			fmt.Fprint(&b, i)
		}
		b.WriteString("]}")
		return b.String()
	}
	uniq := mustCompile(t, `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`)
	if got := uniq.Check(parse(t, ints(false))); got.Kind != Pass {
		t.Fatalf("200,000 distinct integers: %+v", got)
	}
	if got := uniq.Check(parse(t, ints(true))); got.Kind != ValueFail || got.Path != fmt.Sprintf("/a/%d", n-1) {
		t.Fatalf("a repeat at the end: %+v", got)
	}

	var keys, req strings.Builder
	keys.WriteString("{")
	req.WriteString("[")
	for i := range 100000 {
		if i > 0 {
			keys.WriteByte(',')
			req.WriteByte(',')
		}
		fmt.Fprintf(&keys, `"k%d":%d`, i, i)
		fmt.Fprintf(&req, `"k%d"`, i)
	}
	keys.WriteString("}")
	req.WriteString(`,"missing"]`)
	args := parse(t, keys.String())
	open := mustCompile(t, `{"type":"object","additionalProperties":true,"required":`+req.String()+`}`)
	if got := open.Check(args); got.Kind != KeyFail || got.Path != "/missing" {
		t.Fatalf("100,000 required keys: %+v", got)
	}
	closed := mustCompile(t, `{"type":"object","properties":{"k0":{}}}`)
	if got := closed.Check(args); got.Kind != KeyFail || got.Path != "/k1" {
		t.Fatalf("100,000 keys, closed: %+v", got)
	}

	enum := mustCompile(t, `{"type":"object","properties":{"a":{"type":"array","items":{"enum":`+strings.TrimPrefix(strings.TrimSuffix(ints(false), "}"), `{"a":`)+`}}}}`)
	if got := enum.Check(parse(t, ints(false))); got.Kind != Pass {
		t.Fatalf("an enum of 200,000 numbers: %+v", got)
	}
	if got := enum.Check(parse(t, `{"a":[5,199999.0,-1]}`)); got.Kind != ValueFail || got.Path != "/a/2" {
		t.Fatalf("not in the enum: %+v", got)
	}
}

// TestCostlyPatterns: a pattern whose program would cost too much per byte
// is reported and not enforced; a long string against a pattern within
// the limit is charged its cost.
func TestCostlyPatterns(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":".*a.{600}.{600}c"}}}`)
	if u := s.Unsupported(); len(u) != 1 || u[0].Keyword != "pattern" || !strings.Contains(u[0].Why, "instructions") {
		t.Fatalf("unsupported = %v", u)
	}
	s = mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":".*a.{900}c"}}}`)
	if len(s.Unsupported()) != 0 {
		t.Fatalf("unsupported = %v", s.Unsupported())
	}
	long := `{"s":"` + strings.Repeat("a", 1<<20) + `"}`
	if got := s.Check(parse(t, long)); got.Kind != ValueFail || !strings.Contains(got.Reason, "too costly") {
		t.Fatalf("Check = %+v", got)
	}
	// Classes copied per repetition: bounded before compiling.
	s = mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"\\p{L}{500}\\p{L}{500}"}}}`)
	if u := s.Unsupported(); len(u) != 1 || !strings.Contains(u[0].Why, "ranges") {
		t.Fatalf("unsupported = %v", u)
	}
	s = mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"^\\p{L}[\\p{L}\\s'-]{0,99}$"}}}`)
	if got := s.Check(parse(t, `{"s":"Zoë O'Neil"}`)); got.Kind != Pass {
		t.Fatalf("a realistic name pattern: %+v", got)
	}
	s = mustCompile(t, `{"type":"object","properties":{"s":{"type":"string","pattern":"^[a-z]{0,90}c$"}}}`)
	if got := s.Check(parse(t, `{"s":"`+strings.Repeat("b", 80)+`c"}`)); got.Kind != Pass {
		t.Fatalf("Check = %+v", got)
	}
}

// TestReportsAreBounded: a schema with an unresolvable reference in every
// node reports the first maxReports and how many more.
func TestReportsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%04d":{"$ref":"#/nowhere"}`, i)
	}
	b.WriteString("}}")
	u := mustCompile(t, b.String()).Unsupported()
	if len(u) != maxReports+1 || u[0].Path != "/properties/p0000" || u[maxReports].Why != "936 more not listed" || !u[maxReports].Unchecked {
		t.Fatalf("%d reports, first %v, last %v", len(u), u[0], u[len(u)-1])
	}
}
