package signature

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/jsontape"
)

// parse parses JSON text into a tape of its own.
func parse(t testing.TB, s string) jsontape.Value {
	t.Helper()
	tp := new(jsontape.Tape)
	if err := tp.Parse([]byte(s)); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return tp.Root()
}

func mustCompile(t testing.TB, schema string) *Signature {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile(%s): %v", schema, err)
	}
	return s
}

// names16 declares names around the 16 bytes a property keeps of its name.
const names16 = `{"type":"object","properties":{"abcdefghijklmnop":{"type":"integer"},"abcdefghijklmnopX":{"type":"number"},` +
	`"abcdefghijklmnopY":{"type":"string"},"abcdefgh":{},"a":{},"":{"type":"null"}}}`

func TestCheck(t *testing.T) {
	const (
		P = Pass
		V = ValueFail
		K = KeyFail
	)
	tests := []struct {
		name, schema, args string
		want               Kind
		path               string
		coercible          bool
	}{
		// closed world (rule 3)
		{"declared", `{"type":"object","properties":{"a":{"type":"string"}}}`, `{"a":"x"}`, P, "", false},
		{"undeclared top", `{"type":"object","properties":{"a":{}}}`, `{"a":1,"override":true}`, K, "/override", false},
		{"top closed without properties", `{"type":"object"}`, `{"x":1}`, K, "/x", false},
		{"top empty ok", `{"type":"object"}`, `{}`, P, "", false},
		{"top opened by true", `{"type":"object","properties":{},"additionalProperties":true}`, `{"x":1}`, P, "", false},
		{"top opened by schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":1}`, P, "", false},
		{"extra fails its schema", `{"type":"object","additionalProperties":{"type":"integer"}}`, `{"x":"1"}`, V, "/x", true},
		{"nested closed", `{"type":"object","properties":{"o":{"type":"object","properties":{"a":{}}}}}`, `{"o":{"b":1}}`, K, "/o/b", false},
		{"nested free-form", `{"type":"object","properties":{"o":{"type":"object"}}}`, `{"o":{"anything":{"deep":[1]}}}`, P, "", false},
		{"nested explicit false", `{"type":"object","properties":{"o":{"type":"object","additionalProperties":false}}}`, `{"o":{"b":1}}`, K, "/o/b", false},
		{"missing required", `{"type":"object","properties":{"a":{},"b":{}},"required":["a","b"]}`, `{"a":1}`, K, "/b", false},
		{"required nested", `{"type":"object","properties":{"o":{"type":"object","properties":{"x":{}},"required":["x"]}}}`, `{"o":{}}`, K, "/o/x", false},
		{"key beats value", `{"type":"object","properties":{"a":{"type":"string"},"b":{}}}`, `{"a":1,"c":2}`, K, "/c", false},
		{"nested key beats earlier value", `{"type":"object","properties":{"a":{"type":"string"},"o":{"properties":{}}}}`, `{"a":1,"o":{"z":1}}`, K, "/o/z", false},
		{"pointer escaping", `{"type":"object","properties":{}}`, `{"a/b~c":1}`, K, "/a~1b~0c", false},
		// numbers (rule 4)
		{"2.0 is integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":2.0}`, P, "", false},
		{"1e2 is integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":1e2}`, P, "", false},
		{"fraction is not integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":2.5}`, V, "/n", false},
		{"integer is number", `{"type":"object","properties":{"n":{"type":"number"}}}`, `{"n":2}`, P, "", false},
		{"string for integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":"5"}`, V, "/n", true},
		{"fraction string for integer", `{"type":"object","properties":{"n":{"type":"integer"}}}`, `{"n":"5.5"}`, V, "/n", false},
		{"string for number", `{"type":"object","properties":{"n":{"type":"number"}}}`, `{"n":"5.5"}`, V, "/n", true},
		{"string for boolean", `{"type":"object","properties":{"b":{"type":"boolean"}}}`, `{"b":"true"}`, V, "/b", true},
		{"word for boolean", `{"type":"object","properties":{"b":{"type":"boolean"}}}`, `{"b":"yes"}`, V, "/b", false},
		{"number for string", `{"type":"object","properties":{"s":{"type":"string"}}}`, `{"s":5}`, V, "/s", true},
		{"minimum", `{"type":"object","properties":{"n":{"minimum":1}}}`, `{"n":0}`, V, "/n", false},
		{"minimum edge", `{"type":"object","properties":{"n":{"minimum":1}}}`, `{"n":1}`, P, "", false},
		{"maximum", `{"type":"object","properties":{"n":{"maximum":10}}}`, `{"n":10.5}`, V, "/n", false},
		{"exclusiveMinimum", `{"type":"object","properties":{"n":{"exclusiveMinimum":0}}}`, `{"n":0}`, V, "/n", false},
		{"exclusiveMaximum", `{"type":"object","properties":{"n":{"exclusiveMaximum":5}}}`, `{"n":4.99}`, P, "", false},
		{"draft4 exclusive", `{"type":"object","properties":{"n":{"minimum":0,"exclusiveMinimum":true}}}`, `{"n":0}`, V, "/n", false},
		{"multipleOf", `{"type":"object","properties":{"n":{"multipleOf":0.5}}}`, `{"n":1.5}`, P, "", false},
		{"not multipleOf", `{"type":"object","properties":{"n":{"multipleOf":2}}}`, `{"n":3}`, V, "/n", false},
		// null (rule 5)
		{"null rejected", `{"type":"object","properties":{"s":{"type":"string"}}}`, `{"s":null}`, V, "/s", false},
		{"null by type list", `{"type":"object","properties":{"s":{"type":["string","null"]}}}`, `{"s":null}`, P, "", false},
		{"null by anyOf", `{"type":"object","properties":{"s":{"anyOf":[{"type":"string","minLength":1},{"type":"null"}]}}}`, `{"s":null}`, P, "", false},
		{"anyOf none", `{"type":"object","properties":{"s":{"anyOf":[{"type":"string","minLength":1},{"type":"null"}]}}}`, `{"s":""}`, V, "/s", false},
		{"untyped accepts null", `{"type":"object","properties":{"s":{"description":"x"}}}`, `{"s":null}`, P, "", false},
		// strings
		{"enum", `{"type":"object","properties":{"e":{"enum":["a","b"]}}}`, `{"e":"c"}`, V, "/e", false},
		{"enum ok", `{"type":"object","properties":{"e":{"type":"string","enum":["a","b"]}}}`, `{"e":"b"}`, P, "", false},
		{"enum mixed numbers", `{"type":"object","properties":{"e":{"enum":[1,"x",null]}}}`, `{"e":1.0}`, P, "", false},
		{"enum object", `{"type":"object","properties":{"e":{"enum":[{"a":[1]}]}}}`, `{"e":{"a":[1.0]}}`, P, "", false},
		{"const", `{"type":"object","properties":{"c":{"const":"x"}}}`, `{"c":"y"}`, V, "/c", false},
		{"minLength code points", `{"type":"object","properties":{"s":{"minLength":2}}}`, `{"s":"é"}`, V, "/s", false},
		{"maxLength code points", `{"type":"object","properties":{"s":{"maxLength":2}}}`, `{"s":"éé"}`, P, "", false},
		{"maxLength escaped", `{"type":"object","properties":{"s":{"maxLength":1}}}`, `{"s":"\ud83d\ude00"}`, P, "", false},
		{"pattern", `{"type":"object","properties":{"s":{"pattern":"^[a-z]+$"}}}`, `{"s":"abc1"}`, V, "/s", false},
		{"pattern ok", `{"type":"object","properties":{"s":{"pattern":"^[a-z]+$"}}}`, `{"s":"abc"}`, P, "", false},
		{"format is annotation", `{"type":"object","properties":{"u":{"type":"string","format":"uri"}}}`, `{"u":"not a uri"}`, P, "", false},
		// arrays
		{"items", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`, `{"a":["x",2]}`, V, "/a/1", true},
		{"items objects closed", `{"type":"object","properties":{"a":{"items":{"properties":{"k":{}}}}}}`, `{"a":[{"k":1},{"j":1}]}`, K, "/a/1/j", false},
		{"minItems", `{"type":"object","properties":{"a":{"minItems":1}}}`, `{"a":[]}`, V, "/a", false},
		{"maxItems", `{"type":"object","properties":{"a":{"maxItems":1}}}`, `{"a":[1,2]}`, V, "/a", false},
		{"uniqueItems", `{"type":"object","properties":{"a":{"uniqueItems":true}}}`, `{"a":[1,{"x":1},1.0]}`, V, "/a/2", false},
		{"uniqueItems ok", `{"type":"object","properties":{"a":{"uniqueItems":true}}}`, `{"a":[1,"1",[1]]}`, P, "", false},
		{"tuple", `{"type":"object","properties":{"a":{"items":[{"type":"string"},{"type":"integer"}]}}}`, `{"a":["x","y"]}`, V, "/a/1", false},
		{"array without items", `{"type":"object","properties":{"a":{"type":"array"}}}`, `{"a":[1,"x",null,{}]}`, P, "", false},
		// combinators
		{"oneOf exactly one", `{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}`, `{"v":3}`, P, "", false},
		{"oneOf two", `{"type":"object","properties":{"v":{"oneOf":[{"type":"number"},{"type":"integer"}]}}}`, `{"v":3}`, V, "/v", false},
		{"object alternatives open", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","oneOf":[
			{"properties":{"node_id":{"type":"string"}},"required":["node_id"],"additionalProperties":false},
			{"properties":{"item_id":{"type":"integer"}},"required":["item_id"],"additionalProperties":false}]}}}}`,
			`{"items":[{"node_id":"n"},{"item_id":4}]}`, P, "", false},
		{"object alternatives undeclared", `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","oneOf":[
			{"properties":{"node_id":{"type":"string"}},"required":["node_id"],"additionalProperties":false},
			{"properties":{"item_id":{"type":"integer"}},"required":["item_id"],"additionalProperties":false}]}}}}`,
			`{"items":[{"node_id":"n","x":1}]}`, K, "/items/0/x", false},
		{"allOf", `{"type":"object","properties":{"n":{"allOf":[{"minimum":1},{"maximum":3}]}}}`, `{"n":4}`, V, "/n", false},
		{"not", `{"type":"object","properties":{"n":{"not":{"type":"string"}}}}`, `{"n":"x"}`, V, "/n", false},
		{"false schema", `{"type":"object","properties":{"n":false}}`, `{"n":1}`, V, "/n", false},
		{"true schema", `{"type":"object","properties":{"n":true}}`, `{"n":[1]}`, P, "", false},
		{"ref", `{"type":"object","properties":{"p":{"$ref":"#/$defs/P"}},"$defs":{"P":{"type":"object","properties":{"x":{"type":"integer"}}}}}`, `{"p":{"x":"1"}}`, V, "/p/x", true},
		{"recursive ref", `{"type":"object","properties":{"t":{"$ref":"#/$defs/T"}},"$defs":{"T":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/T"}}}}}}`, `{"t":{"kids":[{"kids":[{"bad":1}]}]}}`, K, "/t/kids/0/kids/0/bad", false},
		{"unknown type matches nothing", `{"type":"object","properties":{"d":{"type":"dict"}}}`, `{"d":{}}`, V, "/d", false},
		{"min/maxProperties", `{"type":"object","properties":{"o":{"maxProperties":1}}}`, `{"o":{"a":1,"b":2}}`, V, "/o", false},
		// names matched by their first 16 bytes and length, then the rest
		{"name of 16 bytes", names16, `{"abcdefghijklmnop":1}`, P, "", false},
		{"name past 16 bytes", names16, `{"abcdefghijklmnopY":"s"}`, P, "", false},
		{"name differing past 16 bytes", names16, `{"abcdefghijklmnopZ":1}`, K, "/abcdefghijklmnopZ", false},
		{"name of 8 bytes, a 9th", names16, `{"abcdefghi":1}`, K, "/abcdefghi", false},
		{"a NUL is not padding", names16, `{"a\u0000":1}`, K, "/a\u0000", false},
		{"empty name", names16, `{"":null}`, P, "", false},
		{"empty name, wrong type", names16, `{"":1}`, V, "/", false},
		// a property checking only types is checked in its object
		{"plain property, wrong type", names16, `{"abcdefghijklmnopX":"1"}`, V, "/abcdefghijklmnopX", true},
		{"plain property, any type", names16, `{"a":[{}]}`, P, "", false},
		{"plain property, integer", names16, `{"abcdefghijklmnop":2.5}`, V, "/abcdefghijklmnop", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			v := parse(t, tt.args)
			got := s.Check(v)
			if got.Kind != tt.want || got.Path != tt.path || got.Coercible != tt.coercible {
				t.Fatalf("Check = %+v, want kind %d path %q coercible %v", got, tt.want, tt.path, tt.coercible)
			}
			if s.Accepts(v) != (tt.want == Pass) {
				t.Fatalf("Accepts disagrees with Check")
			}
			if got.Kind != Pass && got.Reason == "" {
				t.Fatalf("failure without reason")
			}
		})
	}
}

func TestUnsupportedReported(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
		"a":{"type":"string","pattern":"^(?=x)"},
		"b":{"type":"object","patternProperties":{"^x":{}}},
		"c":{"$ref":"https://example.com/s.json"},
		"d":{"type":"float"},
		"e":{"if":{"type":"string"},"then":{"minLength":1}},
		"f":{"$recursiveRef":"#"},
		"g":{"type":"string","nullable":true}}}`)
	var got []string
	for _, u := range s.Unsupported() {
		got = append(got, fmt.Sprintf("%s %s %v", u.Path, u.Keyword, u.Unchecked))
	}
	want := []string{"/properties/a pattern true", "/properties/c $ref true", "/properties/d type false",
		"/properties/f $recursiveRef true", "/properties/g nullable false"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("unsupported = %q\nwant %q", got, want)
	}
	if s.Enforced() {
		t.Fatal("Enforced with unchecked parts")
	}
	for _, clean := range []string{
		`{"type":"object","properties":{"a":{"type":"string","format":"uri","title":"A","default":"x","x-vendor":1}}}`,
		`{"type":"object","properties":{"d":{"type":"dict"}}}`, // matches nothing: stricter, not open
	} {
		if !mustCompile(t, clean).Enforced() {
			t.Errorf("%s: not Enforced", clean)
		}
	}
	if u := mustCompile(t, `{"type":"object","properties":{"a":{"type":"string","format":"uri","title":"A","default":"x","x-vendor":1}}}`).Unsupported(); len(u) != 0 {
		t.Fatalf("annotations reported as unsupported: %v", u)
	}
}

func TestCompileRejectsNonObjects(t *testing.T) {
	for _, s := range []string{`[]`, `"x"`, `{`, ``, `true`} {
		if _, err := Compile([]byte(s)); err == nil {
			t.Errorf("Compile(%q) succeeded", s)
		}
	}
}

func TestCheckDoesNotAllocateOnPass(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"owner":{"type":"string","minLength":1},"n":{"type":"integer","minimum":1},
		"labels":{"type":"array","items":{"type":"string","enum":["a","b"]}},"o":{"type":"object","properties":{"x":{"type":["number","null"]}}},
		"t":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["owner"]}`)
	v := parse(t, `{"owner":"o","n":3,"labels":["a","b"],"o":{"x":null},"t":"s"}`)
	if n := testing.AllocsPerRun(100, func() {
		if s.Check(v).Kind != Pass {
			t.Fatal("want pass")
		}
	}); n != 0 {
		t.Fatalf("Check allocates %.1f times per passing call", n)
	}
}

// TestAcceptsDoesNotAllocate: H5 and M5 scan every tool of a version with
// Accepts, so failing must be as cheap as passing.
func TestAcceptsDoesNotAllocate(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"},"o":{"anyOf":[{"type":"string"},{"type":"null"}]},
		"l":{"type":"array","items":{"type":"object","properties":{"k":{"enum":["x"]}}}}},"required":["a"]}`)
	for _, args := range []string{`{"a":"5"}`, `{"b":1}`, `{}`, `{"a":1,"o":3}`, `{"a":1,"l":[{"k":"y"}]}`, `{"a":1,"l":[{"j":1}]}`} {
		v := parse(t, args)
		if n := testing.AllocsPerRun(50, func() {
			if s.Accepts(v) {
				t.Fatalf("%s accepted", args)
			}
		}); n != 0 {
			t.Errorf("Accepts(%s) allocates %.0f times", args, n)
		}
		if s.Check(v).Kind == Pass {
			t.Fatalf("%s passes Check", args)
		}
	}
}
