package signature

import (
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/oracle"
)

// TestClosedWorld: which objects are closed, for every combination of the
// object keywords (contract rule 3: the top level, and every object node
// that declares properties, rejects undeclared keys unless
// additionalProperties is true or a schema; a node without properties is
// open, as JSON Schema reads it). Nested schemas sit under "o" of a root
// that declares it. Each case is also run through the closed-world rewrite
// of internal/testkit/oracle, which must agree: it is the differential
// oracle of the fuzz tests.
func TestClosedWorld(t *testing.T) {
	const (
		P = Pass
		V = ValueFail
		K = KeyFail
	)
	nested := func(s string) string { return `{"type":"object","properties":{"o":` + s + `}}` }
	tests := []struct {
		name, schema, args string
		want               Kind
		path               string
	}{
		// properties only: closed.
		{"nested properties: undeclared", nested(`{"type":"object","properties":{"id":{}}}`), `{"o":{"id":1,"note":1}}`, K, "/o/note"},
		{"nested empty properties: closed", nested(`{"type":"object","properties":{}}`), `{"o":{"note":1}}`, K, "/o/note"},

		// patternProperties only: open, matching keys checked.
		{"nested patterns: key matching none is free", nested(`{"type":"object","patternProperties":{"^env_":{"type":"string"}}}`), `{"o":{"region":1}}`, P, ""},
		{"nested patterns: deep value of a free key", nested(`{"type":"object","patternProperties":{"^env_":{"type":"string"}}}`), `{"o":{"region":{"zone":[1,{"k":null}]}}}`, P, ""},
		{"nested patterns: matching key checked", nested(`{"type":"object","patternProperties":{"^env_":{"type":"string"}}}`), `{"o":{"region":1,"env_home":2}}`, V, "/o/env_home"},
		{"nested patterns: case sensitive, unanchored", nested(`{"type":"object","patternProperties":{"[0-9]{3}":{"type":"boolean"},"Q_":{"type":"string"}}}`), `{"o":{"q_1":1,"v 12":"x"}}`, P, ""},
		{"nested patterns: unanchored match checked", nested(`{"type":"object","patternProperties":{"[0-9]{3}":{"type":"boolean"}}}`), `{"o":{"id-123-b":"x"}}`, V, "/o/id-123-b"},
		{"nested patterns: false schema refuses a match", nested(`{"type":"object","patternProperties":{"^tmp":false}}`), `{"o":{"keep":1,"tmpdir":1}}`, V, "/o/tmpdir"},
		{"nested patterns: required still applies", nested(`{"type":"object","patternProperties":{"^env_":{}},"required":["name"]}`), `{"o":{"env_a":1}}`, K, "/o/name"},
		{"patterns in items: open", `{"type":"object","properties":{"l":{"type":"array","items":{"patternProperties":{"^n":{"type":"integer"}}}}}}`, `{"l":[{"n1":1,"tag":"x"}]}`, P, ""},
		{"patterns behind $ref: open", `{"type":"object","properties":{"o":{"$ref":"#/$defs/labels"}},"$defs":{"labels":{"patternProperties":{"^l_":{"type":"string"}}}}}`, `{"o":{"other":1}}`, P, ""},
		{"patterns in additionalProperties' schema: open", `{"type":"object","additionalProperties":{"patternProperties":{"^l_":{"type":"string"}}}}`, `{"any":{"other":1}}`, P, ""},

		// properties and patternProperties: closed, a match is declared.
		{"nested both: match declared", nested(`{"type":"object","properties":{"id":{}},"patternProperties":{"^env_":{"type":"string"}}}`), `{"o":{"id":1,"env_a":"x"}}`, P, ""},
		{"nested both: no match undeclared", nested(`{"type":"object","properties":{"id":{}},"patternProperties":{"^env_":{"type":"string"}}}`), `{"o":{"id":1,"region":"x"}}`, K, "/o/region"},
		{"nested empty properties and patterns: closed", nested(`{"type":"object","properties":{},"patternProperties":{"^env_":{}}}`), `{"o":{"env_a":1,"region":1}}`, K, "/o/region"},
		{"nested both: property and pattern both apply", nested(`{"type":"object","properties":{"env_a":{"type":"string"}},"patternProperties":{"^env_":{"maxLength":2}}}`), `{"o":{"env_a":"xyz"}}`, V, "/o/env_a"},

		// additionalProperties replaces the default, with or without properties.
		{"nested patterns, additional false: closed", nested(`{"type":"object","patternProperties":{"^env_":{}},"additionalProperties":false}`), `{"o":{"env_a":1,"region":1}}`, K, "/o/region"},
		{"nested patterns, additional true: open", nested(`{"type":"object","patternProperties":{"^env_":{}},"additionalProperties":true}`), `{"o":{"region":1}}`, P, ""},
		{"nested patterns, additional schema: applies to no match", nested(`{"type":"object","patternProperties":{"^env_":{}},"additionalProperties":{"type":"string"}}`), `{"o":{"env_a":1,"region":1}}`, V, "/o/region"},
		{"nested properties, additional schema: open", nested(`{"type":"object","properties":{"id":{}},"additionalProperties":{"type":"integer"}}`), `{"o":{"id":"x","n":2}}`, P, ""},
		{"nested additional false alone: closed", nested(`{"type":"object","additionalProperties":false}`), `{"o":{"n":1}}`, K, "/o/n"},

		// unevaluatedProperties replaces the default too.
		{"nested patterns, unevaluated false: closed", nested(`{"type":"object","patternProperties":{"^env_":{}},"unevaluatedProperties":false}`), `{"o":{"env_a":1,"region":1}}`, K, "/o/region"},
		{"nested properties, unevaluated true: open", nested(`{"type":"object","properties":{"id":{}},"unevaluatedProperties":true}`), `{"o":{"region":1}}`, P, ""},
		{"nested properties, unevaluated schema", nested(`{"type":"object","properties":{"id":{}},"unevaluatedProperties":{"type":"string"}}`), `{"o":{"region":1}}`, V, "/o/region"},

		// propertyNames neither declares nor opens.
		{"nested propertyNames alone: open", nested(`{"type":"object","propertyNames":{"maxLength":4}}`), `{"o":{"abc":1}}`, P, ""},
		{"nested propertyNames alone: refused name", nested(`{"type":"object","propertyNames":{"maxLength":4}}`), `{"o":{"abcdef":1}}`, K, "/o/abcdef"},
		{"nested propertyNames and patterns: open", nested(`{"type":"object","propertyNames":{"maxLength":6},"patternProperties":{"^env_":{"type":"string"}}}`), `{"o":{"region":1}}`, P, ""},
		{"nested propertyNames and properties: closed", nested(`{"type":"object","propertyNames":{"maxLength":6},"properties":{"id":{}}}`), `{"o":{"region":1}}`, K, "/o/region"},

		// The top level is closed whatever it declares.
		{"top patterns: no match undeclared", `{"type":"object","patternProperties":{"^env_":{"type":"string"}}}`, `{"env_a":"x","region":"x"}`, K, "/region"},
		{"top patterns: match declared", `{"type":"object","patternProperties":{"^env_":{"type":"string"}}}`, `{"env_a":"x"}`, P, ""},
		{"top patterns, additional true: open", `{"type":"object","patternProperties":{"^env_":{}},"additionalProperties":true}`, `{"region":1}`, P, ""},
		{"top propertyNames alone: closed", `{"type":"object","propertyNames":{"maxLength":4}}`, `{"abc":1}`, K, "/abc"},
		{"top unevaluated true: open", `{"type":"object","properties":{"id":{}},"unevaluatedProperties":true}`, `{"region":1}`, P, ""},

		// if, then, else and dependentSchemas declare their keys for the
		// node they belong to: by name they close it, by pattern alone not.
		{"nested then patterns alone: open", nested(`{"type":"object","if":{"required":["kind"]},"then":{"patternProperties":{"^env_":{"type":"string"}}}}`), `{"o":{"kind":1,"region":1}}`, P, ""},
		{"nested then patterns alone: match checked", nested(`{"type":"object","if":{"required":["kind"]},"then":{"patternProperties":{"^env_":{"type":"string"}}}}`), `{"o":{"kind":1,"env_a":1}}`, V, "/o/env_a"},
		{"nested dependentSchemas patterns alone: open", nested(`{"type":"object","dependentSchemas":{"kind":{"patternProperties":{"^env_":{}}}}}`), `{"o":{"kind":1,"region":1}}`, P, ""},
		{"nested then properties: closed", nested(`{"type":"object","if":{"required":["kind"]},"then":{"properties":{"kind":{}}}}`), `{"o":{"kind":1,"region":1}}`, K, "/o/region"},
		{"nested closed, a branch's pattern declares", nested(`{"type":"object","properties":{"kind":{}},"if":{"required":["kind"]},"then":{"patternProperties":{"^env_":{}}}}`), `{"o":{"kind":1,"env_a":1}}`, P, ""},
		{"nested closed, no match in a branch's pattern", nested(`{"type":"object","properties":{"kind":{}},"if":{"required":["kind"]},"then":{"patternProperties":{"^env_":{}}}}`), `{"o":{"kind":1,"region":1}}`, K, "/o/region"},

		// allOf, anyOf and oneOf branches are nodes like any other.
		{"allOf branch patterns alone: open", nested(`{"allOf":[{"patternProperties":{"^env_":{"type":"string"}}}]}`), `{"o":{"region":1}}`, P, ""},
		{"allOf branch patterns alone: match checked", nested(`{"allOf":[{"patternProperties":{"^env_":{"type":"string"}}}]}`), `{"o":{"env_a":1}}`, V, "/o/env_a"},
		{"anyOf branches patterns alone: open", nested(`{"anyOf":[{"patternProperties":{"^a":{"type":"string"}}},{"patternProperties":{"^b":{"type":"string"}}}]}`), `{"o":{"a1":1,"c":1}}`, P, ""},
		{"oneOf branch with properties: closed", nested(`{"oneOf":[{"properties":{"a":{}}},{"type":"string"}]}`), `{"o":{"b":1}}`, K, "/o/b"},
		{"not of patterns alone", nested(`{"not":{"patternProperties":{"^a":{"type":"string"}}}}`), `{"o":{"b":1}}`, V, "/o"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.schema)
			if u := s.Unsupported(); len(u) > 0 {
				t.Fatalf("unsupported: %v", u)
			}
			v := parse(t, tt.args)
			got := s.Check(v)
			if got.Kind != tt.want || got.Path != tt.path {
				t.Errorf("Check = %+v, want kind %d path %q", got, tt.want, tt.path)
			}
			if s.Accepts(v) != (tt.want == Pass) {
				t.Errorf("Accepts disagrees with Check")
			}
			theirs, err := oracle.Compile([]byte(tt.schema))
			if err != nil {
				t.Fatal(err)
			}
			if ok := theirs.Validate(oracle.Instance(v)) == nil; ok != (tt.want == Pass) {
				t.Errorf("the oracle's rewrite says valid=%v, want %v", ok, tt.want == Pass)
			}
		})
	}
}
