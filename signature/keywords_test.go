package signature

import (
	"testing"
)

// TestKeywords: each 2020-12 keyword the checker enforces, with cases
// written from the specification (JSON Schema Validation 2020-12 and Core
// §10-11), under the contract's closed world.
func TestKeywords(t *testing.T) {
	const (
		P = Pass
		U = Unchecked
		V = ValueFail
		K = KeyFail
	)
	tests := []struct {
		name, schema, args string
		want               Kind
		path               string
	}{
		// patternProperties: a matching key is declared and its value checked.
		{"patternProperties declares", `{"type":"object","patternProperties":{"^x_":{"type":"integer"}}}`, `{"x_a":1}`, P, ""},
		{"patternProperties value", `{"type":"object","patternProperties":{"^x_":{"type":"integer"}}}`, `{"x_a":"1"}`, V, "/x_a"},
		{"patternProperties closes", `{"type":"object","patternProperties":{"^x_":{}}}`, `{"y":1}`, K, "/y"},
		{"patternProperties nested is open", `{"type":"object","properties":{"o":{"patternProperties":{"^x_":{}}}}}`, `{"o":{"y":1}}`, P, ""},
		{"patternProperties with properties", `{"type":"object","properties":{"a":{"type":"string"}},"patternProperties":{"a":{"maxLength":1}}}`, `{"a":"xy"}`, V, "/a"},
		{"patternProperties is ECMA unanchored", `{"type":"object","patternProperties":{"b":{}}}`, `{"abc":1}`, P, ""},
		{"patternProperties and additionalProperties", `{"type":"object","patternProperties":{"^x":{}},"additionalProperties":{"type":"string"}}`, `{"x":1,"y":2}`, V, "/y"},
		// propertyNames
		{"propertyNames", `{"type":"object","additionalProperties":true,"propertyNames":{"maxLength":3}}`, `{"abcd":1}`, K, "/abcd"},
		{"propertyNames ok", `{"type":"object","additionalProperties":true,"propertyNames":{"pattern":"^[a-z]+$"}}`, `{"abc":1}`, P, ""},
		{"propertyNames false", `{"type":"object","additionalProperties":true,"propertyNames":false}`, `{}`, P, ""},
		// dependentRequired, dependentSchemas, dependencies (draft 7)
		{"dependentRequired", `{"type":"object","properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}}`, `{"a":1}`, K, "/b"},
		{"dependentRequired absent trigger", `{"type":"object","properties":{"a":{},"b":{}},"dependentRequired":{"a":["b"]}}`, `{"b":1}`, P, ""},
		{"dependentSchemas applies", `{"type":"object","properties":{"a":{},"b":{}},"dependentSchemas":{"a":{"properties":{"b":{"type":"integer"}}}}}`, `{"a":1,"b":"x"}`, V, "/b"},
		{"dependentSchemas declares its keys", `{"type":"object","properties":{"a":{}},"dependentSchemas":{"a":{"properties":{"c":{"type":"integer"}},"required":["c"]}}}`, `{"a":1,"c":2}`, P, ""},
		{"dependentSchemas branch is open", `{"type":"object","properties":{"a":{},"z":{}},"dependentSchemas":{"a":{"properties":{"c":{}}}}}`, `{"a":1,"z":2}`, P, ""},
		{"dependentSchemas required", `{"type":"object","properties":{"a":{}},"dependentSchemas":{"a":{"properties":{"c":{}},"required":["c"]}}}`, `{"a":1}`, K, "/c"},
		{"dependencies array", `{"type":"object","properties":{"a":{},"b":{}},"dependencies":{"a":["b"]}}`, `{"a":1}`, K, "/b"},
		{"dependencies schema", `{"type":"object","properties":{"a":{},"b":{}},"dependencies":{"a":{"properties":{"b":{"type":"string"}}}}}`, `{"a":1,"b":2}`, V, "/b"},
		// if / then / else
		{"if then", `{"type":"object","properties":{"k":{},"n":{}},"if":{"properties":{"k":{"const":"int"}}},"then":{"properties":{"n":{"type":"integer"}}},"else":{"properties":{"n":{"type":"string"}}}}`, `{"k":"int","n":"x"}`, V, "/n"},
		{"if else", `{"type":"object","properties":{"k":{},"n":{}},"if":{"properties":{"k":{"const":"int"}}},"then":{"properties":{"n":{"type":"integer"}}},"else":{"properties":{"n":{"type":"string"}}}}`, `{"k":"str","n":1}`, V, "/n"},
		{"if else ok", `{"type":"object","properties":{"k":{},"n":{}},"if":{"properties":{"k":{"const":"int"}}},"then":{"properties":{"n":{"type":"integer"}}},"else":{"properties":{"n":{"type":"string"}}}}`, `{"k":"str","n":"x"}`, P, ""},
		{"then declares keys", `{"type":"object","properties":{"mode":{}},"if":{"properties":{"mode":{"const":"file"}},"required":["mode"]},"then":{"properties":{"path":{"type":"string"}},"required":["path"]}}`, `{"mode":"file","path":"/x"}`, P, ""},
		{"then requires", `{"type":"object","properties":{"mode":{}},"if":{"properties":{"mode":{"const":"file"}},"required":["mode"]},"then":{"properties":{"path":{"type":"string"}},"required":["path"]}}`, `{"mode":"file"}`, K, "/path"},
		{"undeclared beside branches", `{"type":"object","properties":{"mode":{}},"if":{"properties":{"mode":{"const":"file"}}},"then":{"properties":{"path":{}}}}`, `{"mode":"x","other":1}`, K, "/other"},
		{"then without if ignored", `{"type":"object","properties":{"a":{}},"then":false}`, `{"a":1}`, P, ""},
		// contains, minContains, maxContains
		{"contains", `{"type":"object","properties":{"l":{"contains":{"type":"integer"}}}}`, `{"l":["a","b"]}`, V, "/l"},
		{"contains ok", `{"type":"object","properties":{"l":{"contains":{"type":"integer"}}}}`, `{"l":["a",1]}`, P, ""},
		{"contains empty", `{"type":"object","properties":{"l":{"contains":{}}}}`, `{"l":[]}`, V, "/l"},
		{"minContains", `{"type":"object","properties":{"l":{"contains":{"const":1},"minContains":2}}}`, `{"l":[1,2]}`, V, "/l"},
		{"maxContains", `{"type":"object","properties":{"l":{"contains":{"const":1},"maxContains":1}}}`, `{"l":[1,1]}`, V, "/l"},
		{"minContains 0", `{"type":"object","properties":{"l":{"contains":{"const":1},"minContains":0}}}`, `{"l":[]}`, P, ""},
		{"maxContains without contains", `{"type":"object","properties":{"l":{"maxContains":0}}}`, `{"l":[1]}`, P, ""},
		// items forms
		{"prefixItems and items", `{"type":"object","properties":{"l":{"prefixItems":[{"type":"string"}],"items":{"type":"integer"}}}}`, `{"l":["a",1,"b"]}`, V, "/l/2"},
		{"additionalItems draft 7", `{"type":"object","properties":{"l":{"items":[{"type":"string"}],"additionalItems":false}}}`, `{"l":["a",1]}`, V, "/l/1"},
		{"additionalItems ignored with items schema", `{"type":"object","properties":{"l":{"items":{},"additionalItems":false}}}`, `{"l":["a",1]}`, P, ""},
		// unevaluatedProperties
		{"unevaluatedProperties false", `{"type":"object","properties":{"a":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2}`, K, "/b"},
		{"unevaluatedProperties through allOf", `{"type":"object","allOf":[{"properties":{"a":{}},"additionalProperties":true}],"properties":{"b":{}},"unevaluatedProperties":false}`, `{"a":1,"b":2}`, P, ""},
		{"unevaluatedProperties through allOf, extra", `{"type":"object","allOf":[{"properties":{"a":{}},"additionalProperties":true}],"unevaluatedProperties":false}`, `{"a":1,"c":2}`, P, ""},
		{"unevaluatedProperties through anyOf", `{"type":"object","anyOf":[{"properties":{"a":{"const":1}},"required":["a"],"unevaluatedProperties":true},{"properties":{"b":{}},"required":["b"],"additionalProperties":true}],"unevaluatedProperties":false}`, `{"b":1,"c":1}`, P, ""},
		{"unevaluatedProperties through failed branch", `{"type":"object","properties":{"k":{}},"if":{"properties":{"k":{"const":1}},"required":["k"]},"then":{"properties":{"x":{}}},"unevaluatedProperties":false}`, `{"k":2,"x":1}`, K, "/x"},
		{"unevaluatedProperties through then", `{"type":"object","properties":{"k":{}},"if":{"properties":{"k":{"const":1}},"required":["k"]},"then":{"properties":{"x":{}}},"unevaluatedProperties":false}`, `{"k":1,"x":1}`, P, ""},
		{"unevaluatedProperties through ref", `{"type":"object","$ref":"#/$defs/base","properties":{"b":{}},"unevaluatedProperties":false,"$defs":{"base":{"properties":{"a":{}},"additionalProperties":true}}}`, `{"a":1,"z":2}`, P, ""},
		{"unevaluatedProperties schema", `{"type":"object","properties":{"a":{}},"unevaluatedProperties":{"type":"string"}}`, `{"a":1,"b":2}`, V, "/b"},
		{"unevaluatedProperties opens", `{"type":"object","properties":{"a":{}},"unevaluatedProperties":true}`, `{"a":1,"b":2}`, P, ""},
		{"unevaluatedProperties not through not", `{"type":"object","not":{"properties":{"a":{"const":2}},"required":["a"]},"properties":{"b":{}},"unevaluatedProperties":false}`, `{"a":1,"b":1}`, K, "/a"},
		// unevaluatedItems
		{"unevaluatedItems false", `{"type":"object","properties":{"l":{"prefixItems":[{}],"unevaluatedItems":false}}}`, `{"l":[1,2]}`, V, "/l/1"},
		{"unevaluatedItems through allOf", `{"type":"object","properties":{"l":{"allOf":[{"prefixItems":[{},{}]}],"unevaluatedItems":false}}}`, `{"l":[1,2]}`, P, ""},
		{"unevaluatedItems through contains", `{"type":"object","properties":{"l":{"contains":{"type":"string"},"unevaluatedItems":false}}}`, `{"l":["a",1]}`, V, "/l/1"},
		{"unevaluatedItems items", `{"type":"object","properties":{"l":{"items":{},"unevaluatedItems":false}}}`, `{"l":[1,2]}`, P, ""},
		// references: $anchor, embedded $id, percent-encoded pointers
		{"anchor", `{"type":"object","properties":{"a":{"$ref":"#pos"}},"$defs":{"p":{"$anchor":"pos","minimum":0}}}`, `{"a":-1}`, V, "/a"},
		{"percent-encoded pointer", `{"type":"object","properties":{"r":{"$ref":"#/$defs/Record%3Cstring%2Cnumber%3E"}},"$defs":{"Record<string,number>":{"type":"object","additionalProperties":{"type":"number"}}}}`, `{"r":{"x":"1"}}`, V, "/r/x"},
		{"a%b, not a%25b", `{"type":"object","properties":{"r":{"$ref":"#/$defs/a%25b"}},"$defs":{"a%b":{"type":"integer"},"a%25b":{"type":"string"}}}`, `{"r":"s"}`, V, "/r"},
		{"a%25b", `{"type":"object","properties":{"r":{"$ref":"#/$defs/a%2525b"}},"$defs":{"a%b":{"type":"integer"},"a%25b":{"type":"string"}}}`, `{"r":"s"}`, P, ""},
		{"escaped pointer", `{"type":"object","properties":{"r":{"$ref":"#/$defs/a~1b"}},"$defs":{"a/b":{"type":"integer"}}}`, `{"r":"s"}`, V, "/r"},
		{"embedded $id", `{"$id":"https://x.example/root.json","type":"object","properties":{"a":{"$ref":"item.json"}},"$defs":{"i":{"$id":"item.json","type":"integer"}}}`, `{"a":"s"}`, V, "/a"},
		{"ref inside embedded $id resolves against it", `{"$id":"https://x.example/root.json","type":"object","properties":{"a":{"$ref":"other/inner.json"}},"$defs":{"o":{"$id":"other/inner.json","$ref":"t.json"},"t":{"$id":"other/t.json","type":"string"},"wrong":{"$id":"t.json","type":"integer"}}}`, `{"a":"s"}`, P, ""},
		{"embedded $id without base", `{"type":"object","properties":{"a":{"$ref":"urn:x:item"}},"$defs":{"i":{"$id":"urn:x:item","type":"integer"}}}`, `{"a":1}`, P, ""},
		{"draft 7 fragment $id", `{"type":"object","properties":{"a":{"$ref":"#pos"}},"definitions":{"p":{"$id":"#pos","minimum":0}}}`, `{"a":-1}`, V, "/a"},
		// $dynamicRef: the outermost resource's dynamic anchor wins
		{"dynamicRef overridden", `{"$id":"https://x.example/list.json","type":"object","properties":{"l":{"$ref":"generic.json"}},"$defs":{
			"g":{"$id":"generic.json","type":"array","items":{"$dynamicRef":"#item"},"$defs":{"d":{"$dynamicAnchor":"item"}}},
			"i":{"$dynamicAnchor":"item","type":"string"}}}`, `{"l":["a",1]}`, V, "/l/1"},
		{"dynamicRef overridden ok", `{"$id":"https://x.example/list.json","type":"object","properties":{"l":{"$ref":"generic.json"}},"$defs":{
			"g":{"$id":"generic.json","type":"array","items":{"$dynamicRef":"#item"},"$defs":{"d":{"$dynamicAnchor":"item"}}},
			"i":{"$dynamicAnchor":"item","type":"string"}}}`, `{"l":["a","b"]}`, P, ""},
		{"dynamicRef as ref without dynamic anchor", `{"type":"object","properties":{"a":{"$dynamicRef":"#x"}},"$defs":{"x":{"$anchor":"x","type":"integer"}}}`, `{"a":"s"}`, V, "/a"},
		// fail closed: what cannot be enforced refuses, whatever the value
		{"unresolved ref", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`, `{"a":1}`, U, "/a"},
		{"remote ref", `{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, `{"a":1}`, U, "/a"},
		{"unresolved ref not reached", `{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"},"b":{}}}`, `{"b":1}`, P, ""},
		{"definite failure outranks unchecked", `{"type":"object","properties":{"a":{"$ref":"#/nowhere"},"b":{"type":"integer"}}}`, `{"a":1,"b":"x"}`, V, "/b"},
		{"key failure outranks unchecked", `{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}`, `{"a":1,"c":1}`, K, "/c"},
		{"lookahead pattern", `{"type":"object","properties":{"s":{"type":"string","pattern":"^(?!admin)"}}}`, `{"s":"x"}`, U, "/s"},
		{"lookahead pattern, wrong type", `{"type":"object","properties":{"s":{"type":"string","pattern":"^(?!admin)"}}}`, `{"s":1}`, V, "/s"},
		{"not of unchecked", `{"type":"object","properties":{"s":{"not":{"$ref":"#/nowhere"}}}}`, `{"s":1}`, U, "/s"},
		{"anyOf with an unchecked branch, another passes", `{"type":"object","properties":{"s":{"anyOf":[{"$ref":"#/nowhere"},{"type":"integer"}]}}}`, `{"s":1}`, P, ""},
		{"anyOf with an unchecked branch, none passes", `{"type":"object","properties":{"s":{"anyOf":[{"$ref":"#/nowhere"},{"type":"integer"}]}}}`, `{"s":"x"}`, U, "/s"},
		{"oneOf one passes, one unchecked", `{"type":"object","properties":{"s":{"oneOf":[{"$ref":"#/nowhere"},{"type":"integer"}]}}}`, `{"s":1}`, U, "/s"},
		{"if unchecked, both branches pass", `{"type":"object","properties":{"s":{"if":{"$ref":"#/nowhere"},"then":{"type":"integer"},"else":{"minimum":0}}}}`, `{"s":1}`, P, ""},
		{"if unchecked, branches differ", `{"type":"object","properties":{"s":{"if":{"$ref":"#/nowhere"},"then":{"type":"integer"},"else":{"type":"string"}}}}`, `{"s":1}`, U, "/s"},
		{"unchecked patternProperties key", `{"type":"object","patternProperties":{"^(?=a)":{}}}`, `{"ab":1}`, U, "/ab"},
		{"recursiveRef", `{"type":"object","properties":{"s":{"$recursiveRef":"#"}}}`, `{"s":{}}`, U, "/s"},
		{"bad keyword value", `{"type":"object","properties":{"s":{"maxLength":"3"}}}`, `{"s":"abcd"}`, U, "/s"},
		// patterns are ECMA-262's
		{"\\S excludes NBSP", `{"type":"object","properties":{"s":{"pattern":"^\\S+$"}}}`, `{"s":"a\u00a0b"}`, V, "/s"},
		{"\\s includes U+2028", `{"type":"object","properties":{"s":{"pattern":"^a\\sb$"}}}`, `{"s":"a\u2028b"}`, P, ""},
		{"dot excludes U+2028", `{"type":"object","properties":{"s":{"pattern":"^a.b$"}}}`, `{"s":"a\u2028b"}`, V, "/s"},
		{"other dialects refused", `{"type":"object","properties":{"s":{"pattern":"(?i)^abc$"}}}`, `{"s":"ABC"}`, U, "/s"},
		// numbers at the edge
		{"multipleOf huge quotient", `{"type":"object","properties":{"n":{"multipleOf":0.5}}}`, `{"n":1e308}`, P, ""},
		{"multipleOf huge quotient, not a multiple", `{"type":"object","properties":{"n":{"multipleOf":0.3}}}`, `{"n":1e308}`, V, "/n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			v := parse(t, tt.args)
			got := s.Check(v)
			if got.Kind != tt.want || got.Path != tt.path {
				t.Fatalf("Check = %+v, want kind %d path %q\nunsupported: %v", got, tt.want, tt.path, s.Unsupported())
			}
			if s.Accepts(v) != (tt.want == Pass) {
				t.Fatalf("Accepts disagrees with Check")
			}
			if got.Kind != Pass && got.Reason == "" {
				t.Fatalf("failure without reason")
			}
			if (tt.want == Unchecked) != (s.Enforced() == false && got.Kind == Unchecked) {
				t.Fatalf("Enforced = %v with kind %d", s.Enforced(), got.Kind)
			}
		})
	}
}

// TestUndeclaredOutranksMissing: an undeclared key anywhere is reported
// before a missing required one met earlier (the evidence H5 needs), and
// Result.Undeclared tells the two key failures apart.
func TestUndeclaredOutranksMissing(t *testing.T) {
	const sch = `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{}},"required":["x"]},
		"p":{"type":"object","properties":{"y":{}}},"l":{"type":"array","items":{"type":"object","properties":{"k":{}},"required":["k"]}}},
		"allOf":[{"required":["o"]}]}`
	s := mustCompile(t, sch)
	for _, tc := range []struct {
		args, path string
		undeclared bool
	}{
		{`{"o":{},"p":{"z":1}}`, "/p/z", true},
		{`{"o":{},"bad":1}`, "/bad", true},
		{`{"l":[{},{"k":1,"j":2}],"o":{"x":1}}`, "/l/1/j", true},
		{`{"o":{}}`, "/o/x", false},
		{`{"p":{}}`, "/o", false},
		{`{"o":{"x":1},"p":{"y":1},"q":1}`, "/q", true},
	} {
		r := s.Check(parse(t, tc.args))
		if r.Kind != KeyFail || r.Path != tc.path || r.Undeclared != tc.undeclared {
			t.Errorf("%s: %+v, want path %s undeclared %v", tc.args, r, tc.path, tc.undeclared)
		}
	}
	if r := mustCompile(t, `{"type":"object","additionalProperties":true,"propertyNames":{"maxLength":2}}`).Check(parse(t, `{"abc":1}`)); !r.Undeclared || r.Path != "/abc" {
		t.Errorf("propertyNames: %+v", r)
	}
}

// TestFormatsAssert: with Options.Formats the formats MCP servers use are
// asserted; without it format is an annotation (2020-12's default).
func TestFormatsAssert(t *testing.T) {
	const sch = `{"type":"object","properties":{"url":{"type":"string","format":"uri"},"when":{"format":"date-time"},"x":{"format":"x-unknown"}}}`
	loose := mustCompile(t, sch)
	strict, err := CompileWith([]byte(sch), Options{Formats: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   string
		strict Kind
		path   string
	}{
		{`{"url":"webarena.pdf"}`, ValueFail, "/url"},
		{`{"url":"https://example.com/webarena.pdf"}`, Pass, ""},
		{`{"when":"2026-12-01T10:00:00Z"}`, Pass, ""},
		{`{"when":"yesterday"}`, ValueFail, "/when"},
		{`{"when":5}`, Pass, ""}, // format applies to strings only
		{`{"x":"anything"}`, Pass, ""},
	} {
		if r := loose.Check(parse(t, tc.args)); r.Kind != Pass {
			t.Errorf("annotation: %s: %+v", tc.args, r)
		}
		if r := strict.Check(parse(t, tc.args)); r.Kind != tc.strict || r.Path != tc.path {
			t.Errorf("assert: %s: %+v, want %d at %q", tc.args, r, tc.strict, tc.path)
		}
	}
}
