package signature

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/jsontape"
)

// values renders an Expectation's Values compactly: one node's keywords
// as name=value separated by spaces, nodes separated by " | ".
func values(vs []jsontape.Value) string {
	var nodes []string
	for _, c := range vs {
		var kws []string
		for m := c.Members(); m.Next(); {
			kws = append(kws, string(m.Name())+"="+string(m.Value().AppendCompact(nil)))
		}
		nodes = append(nodes, strings.Join(kws, " "))
	}
	return strings.Join(nodes, " | ")
}

// TestExpect: what the compiled signature says is expected at a path,
// keyword by keyword, through references, resources, anchors, dynamic
// references, combinators and the branches the arguments select.
func TestExpect(t *testing.T) {
	const (
		ifThen = `{"type":"object","properties":{"kind":{"enum":["file","web"]}},
			"if":{"properties":{"kind":{"const":"file"}}},
			"then":{"properties":{"path":{"type":"string","minLength":1}},"required":["path"]},
			"else":{"properties":{"url":{"type":"string","format":"uri"}},"required":["url"]}}`
		patterns = `{"type":"object","properties":{"name":{}},
			"patternProperties":{"^(cpu|mem)_limit$":{"type":"integer","minimum":0},"^x-":{"type":"string"}}}`
		embedded = `{"type":"object","properties":{"n":{"$ref":"https://example.com/a.json"}},
			"$defs":{"a":{"$id":"https://example.com/a.json","$ref":"#/$defs/b",
				"$defs":{"b":{"type":"integer","maximum":9}}}}}`
		// The $dynamicRef in list's items starts at list's own "item"
		// (string), but the root resource, outermost in the dynamic
		// scope, declares "item" too (integer): its wins.
		dynamic = `{"$id":"https://example.com/root","type":"object","properties":{"l":{"$ref":"list"}},
			"$defs":{"item":{"$dynamicAnchor":"item","type":"integer"},
				"list":{"$id":"list","type":"array","items":{"$dynamicRef":"#item"},
					"$defs":{"item":{"$dynamicAnchor":"item","type":"string"}}}}}`
	)
	tests := []struct {
		name, schema, args, path string
		keys, patterns, required string // joined by ","
		values                   string
	}{
		{"top keys", `{"type":"object","properties":{"b":{},"a":{"type":"string"}},"required":["b"]}`, `{}`, "",
			"a,b", "", "b", "type=\"object\""},
		{"value", `{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":5,"description":"x"}}}`, `{"n":9}`, "/n",
			"", "", "", `type="integer" minimum=1 maximum=5`},
		{"spelling kept", `{"properties":{"n":{"type":["integer"],"exclusiveMinimum":1.50,"multipleOf":1e-1}}}`, `{"n":0}`, "/n",
			"", "", "", `type=["integer"] exclusiveMinimum=1.50 multipleOf=1e-1`},
		{"annotation format and pattern as written", `{"properties":{"s":{"type":"string","format":"email","pattern":"^\\d+$"}}}`, `{"s":""}`, "/s",
			"", "", "", `type="string" format="email" pattern="^\\d+$"`},
		{"enum and const", `{"properties":{"e":{"enum":[1,"a",{"b":null}]},"c":{"const":{"k":[1]}}}}`, `{}`, "/c",
			"", "", "", `const={"k":[1]}`},
		{"path nowhere", `{"properties":{"a":{"type":"string"}}}`, `{"b":1}`, "/b", "", "", "", ""},
		{"ref", `{"properties":{"s":{"$ref":"#/$defs/state"}},"$defs":{"state":{"type":"string","enum":["open","closed"]}}}`, `{}`, "/s",
			"", "", "", `type="string" enum=["open","closed"]`},
		{"ref through embedded $id", embedded, `{"n":10}`, "/n", "", "", "", `type="integer" maximum=9`},
		{"anchor", `{"properties":{"n":{"$ref":"#pos"}},"$defs":{"p":{"$anchor":"pos","minimum":0}}}`, `{}`, "/n",
			"", "", "", `minimum=0`},
		{"percent-encoded pointer", `{"properties":{"n":{"$ref":"#/$defs/a%20b"}},"$defs":{"a b":{"maxLength":3}}}`, `{}`, "/n",
			"", "", "", `maxLength=3`},
		{"dynamic ref along the scope", dynamic, `{"l":["x"]}`, "/l/0", "", "", "", `type="integer"`},
		{"anyOf alternatives", `{"properties":{"v":{"anyOf":[{"type":"string","minLength":3},{"type":"array"}]}}}`, `{"v":"a"}`, "/v",
			"", "", "", `type="string" minLength=3 | type="array"`},
		{"allOf keys and required", `{"allOf":[{"properties":{"a":{}},"required":["a"]},{"properties":{"b":{}},"required":["b","a"]}]}`, `{}`, "",
			"a,b", "", "a,b", ""},
		{"pattern declares fixed keys", patterns, `{"cpu_limt":1}`, "",
			"cpu_limit,mem_limit,name", "^(cpu|mem)_limit$,^x-", "", `type="object"`},
		{"pattern's schema", patterns, `{"x-trace":1}`, "/x-trace", "", "", "", `type="string"`},
		{"property and pattern both", `{"properties":{"mem_limit":{"maximum":8}},"patternProperties":{"^(cpu|mem)_limit$":{"type":"integer"}}}`, `{}`, "/mem_limit",
			"", "", "", `maximum=8 | type="integer"`},
		{"then applies", ifThen, `{"kind":"file"}`, "", "kind,path,url", "", "path", `type="object"`},
		// Both branches' keys are declared by the object: under else, path is
		// accepted too (the branches are open), so it is suggested.
		{"else applies", ifThen, `{"kind":"web"}`, "", "kind,path,url", "", "url", `type="object"`},
		{"then's value", ifThen, `{"kind":"file","path":""}`, "/path", "", "", "", `type="string" minLength=1`},
		{"else's value", ifThen, `{"kind":"web","url":"x"}`, "/url", "", "", "", `type="string" format="uri"`},
		{"no arguments: both branches", ifThen, ``, "", "kind,path,url", "", "path,url", `type="object"`},
		{"dependentSchemas and dependentRequired of present keys",
			`{"properties":{"a":{},"b":{},"c":{}},"dependentRequired":{"a":["b"]},"dependentSchemas":{"c":{"properties":{"d":{"maximum":1}},"required":["d"]}}}`,
			`{"a":1,"c":1}`, "", "a,b,c,d", "", "b,d", ""},
		{"dependents of absent keys", `{"properties":{"a":{},"b":{},"c":{}},"dependentRequired":{"a":["b"]},"dependentSchemas":{"c":{"required":["d"]}}}`,
			`{}`, "", "a,b,c", "", "", ""},
		{"additionalProperties", `{"type":"object","additionalProperties":{"type":"number"}}`, `{"z":"1"}`, "/z", "", "", "", `type="number"`},
		{"unevaluatedProperties", `{"type":"object","properties":{"a":{}},"unevaluatedProperties":{"type":"boolean"}}`, `{"z":1}`, "/z", "", "", "", `type="boolean"`},
		{"prefixItems then items", `{"properties":{"t":{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}}}`, `{"t":["a",1,2]}`, "/t/2",
			"", "", "", `type="integer"`},
		{"tuple item", `{"properties":{"t":{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}}}`, `{"t":["a"]}`, "/t/0",
			"", "", "", `type="string"`},
		{"draft 7 additionalItems", `{"properties":{"t":{"items":[{}],"additionalItems":{"maxLength":2}}}}`, `{"t":[1,"abc"]}`, "/t/1",
			"", "", "", `maxLength=2`},
		{"escaped path", `{"properties":{"a/b~c":{"type":"null"}}}`, `{"a/b~c":1}`, "/a~1b~0c", "", "", "", `type="null"`},
		{"recursive ref is bounded", `{"$defs":{"r":{"$ref":"#/$defs/r"}},"properties":{"x":{"$ref":"#/$defs/r"}}}`, `{}`, "/x", "", "", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustCompile(t, tc.schema)
			var args jsontape.Value
			if tc.args != "" {
				args = parse(t, tc.args)
			}
			e := s.Expect(args, tc.path)
			got := [...]string{strings.Join(e.Keys, ","), strings.Join(e.Patterns, ","), strings.Join(e.Required, ","), values(e.Values())}
			want := [...]string{tc.keys, tc.patterns, tc.required, tc.values}
			if got != want {
				t.Errorf("Expect(%s, %q)\nkeys, patterns, required, values\ngot  %q\nwant %q", tc.args, tc.path, got, want)
			}
		})
	}
}

// TestExpectAgreesWithCheck: the value keywords Expect names at the path
// of a value failure include one that the value breaks, for schemas
// whose failures come from a reference, an embedded resource, a
// conditional branch or a pattern.
func TestExpectAgreesWithCheck(t *testing.T) {
	for _, tc := range []struct{ schema, args, keyword string }{
		{`{"properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer"}}}`, `{"n":"1"}`, "type"},
		{`{"properties":{"kind":{},"size":{}},"if":{"properties":{"kind":{"const":"big"}}},"then":{"properties":{"size":{"minimum":100}}}}`, `{"kind":"big","size":1}`, "minimum"},
		{`{"patternProperties":{"^n_":{"maximum":3}}}`, `{"n_a":4}`, "maximum"},
		{`{"properties":{"v":{"$ref":"https://example.com/v"}},"$defs":{"v":{"$id":"https://example.com/v","enum":["a"]}}}`, `{"v":"b"}`, "enum"},
	} {
		s := mustCompile(t, tc.schema)
		args := parse(t, tc.args)
		r := s.Check(args)
		if r.Kind != ValueFail {
			t.Fatalf("%s %s: %+v, want a value failure", tc.schema, tc.args, r)
		}
		found := false
		for _, c := range s.Expect(args, r.Path).Values() {
			found = found || c.Get(tc.keyword).Exists()
		}
		if !found {
			t.Errorf("%s %s: failed at %q (%s), Expect names no %s: %v", tc.schema, tc.args, r.Path, r.Reason, tc.keyword, values(s.Expect(args, r.Path).Values()))
		}
	}
}

// TestExpectBounded: a schema whose combinators fan out is walked within
// maxExpectNodes nodes.
func TestExpectBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"$defs":{"f":{"anyOf":[`)
	for i := range 64 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"$ref":"#/$defs/f","minimum":1}`)
	}
	b.WriteString(`]}},"properties":{"x":{"$ref":"#/$defs/f"}}}`)
	s := mustCompile(t, b.String())
	if e := s.Expect(parse(t, `{"x":0}`), "/x"); len(e.Values()) > maxExpectNodes {
		t.Fatalf("%d nodes", len(e.Values()))
	}
}

// TestExpectWithinBudget: Expect spends from the step budget of a check
// of the arguments, as the check charges it (here 40 patterns matched
// against a key), and answers nothing beyond it: a short key is answered,
// a 20,000-byte one, which the check itself finds too costly, is not.
func TestExpectWithinBudget(t *testing.T) {
	var pats []string
	for i := range 40 {
		pats = append(pats, fmt.Sprintf(`"^[a-z]*x{1,%d}$":{"type":"string"}`, i+1))
	}
	s := mustCompile(t, `{"patternProperties":{`+strings.Join(pats, ",")+`}}`)
	for _, tc := range []struct {
		key   string
		nodes int
	}{
		{"aax", maxExpectNodes},
		{strings.Repeat("a", 20000) + "x", 0},
	} {
		args := parse(t, `{"`+tc.key+`":1}`)
		if r := s.Check(args); r.Kind != ValueFail {
			t.Fatalf("key of %d bytes: %+v", len(tc.key), r)
		}
		e := s.Expect(args, "/"+tc.key)
		if got := len(e.Values()); got != tc.nodes {
			t.Errorf("key of %d bytes: %d nodes, want %d", len(tc.key), got, tc.nodes)
		}
	}
}

// TestExpectValue: an Expectation carries the arguments' value at its
// path, or the zero Value where they have none.
func TestExpectValue(t *testing.T) {
	s := mustCompile(t, `{"properties":{"a":{"properties":{"b":{"items":{"type":"string"}},"c":{}}}}}`)
	args := parse(t, `{"a":{"b":[1,"x"]}}`)
	for _, tc := range []struct{ path, want string }{
		{"", `{"a":{"b":[1,"x"]}}`},
		{"/a/b/1", `"x"`},
		{"/a/b/2", ``},
		{"/a/c", ``},
	} {
		e := s.Expect(args, tc.path)
		if got := string(e.Value.AppendCompact(nil)); got != tc.want {
			t.Errorf("%q: value %s, want %s", tc.path, got, tc.want)
		}
	}
}

// TestDistinct: the list keeps the first mention of each string, in
// order, whether it is scanned (short) or kept in a set (long).
func TestDistinct(t *testing.T) {
	for _, n := range []int{3, 16, 17, 100} {
		var d distinct
		for round := range 3 {
			for i := range n {
				d.add(fmt.Sprint(i))
				if round == 0 && len(d.list) != i+1 {
					t.Fatalf("n=%d: %d after adding %d", n, len(d.list), i)
				}
			}
		}
		for i, s := range d.list {
			if s != fmt.Sprint(i) || len(d.list) != n {
				t.Fatalf("n=%d: %v", n, d.list)
			}
		}
	}
}

// TestPatternLiterals: a pattern anchored at both ends that matches a few
// fixed strings declares them; any other declares none by name.
func TestPatternLiterals(t *testing.T) {
	for _, tc := range []struct{ pattern, want string }{
		{`^limit$`, "limit"},
		{`^(cpu|mem)_limit$`, "cpu_limit,mem_limit"},
		{`^a[bc]?$`, "a,ab,ac"},
		{`^(?:x|y)(1|2)$`, "x1,x2,y1,y2"},
		{`^x-`, ""},
		{`limit$`, ""},
		{`^a+$`, ""},
		{`^[a-z]$`, ""},                     // 26 strings: too many
		{`^(a|b)(c|d)(e|f)(g|h)(i|j)$`, ""}, // 32
		{`^\d$`, "0,1,2,3,4,5,6,7,8,9"},     // ten: few enough
	} {
		re, _, err := compileECMA(tc.pattern)
		if err != nil || re == nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if got := strings.Join(literals(re), ","); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.pattern, got, tc.want)
		}
	}
}
