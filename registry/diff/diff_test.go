package diff

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDiffSchemas(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		want     SchemaDiff
	}{
		{name: "same", old: `{"type":"object","properties":{"a":{"type":"string"}}}`,
			new: `{"properties":{"a":{"type":"string"}},"type":"object"}`},
		{name: "numbers by value", old: `{"properties":{"n":{"maximum":2.0}}}`, new: `{"properties":{"n":{"maximum":2}}}`},
		{name: "added and removed", old: `{"properties":{"a":{},"b":{}}}`, new: `{"properties":{"b":{},"c":{}}}`,
			want: SchemaDiff{PropsAdded: []string{"/c"}, PropsRemoved: []string{"/a"}}},
		{name: "retyped", old: `{"properties":{"limit":{"type":"string"}}}`, new: `{"properties":{"limit":{"type":"integer"}}}`,
			want: SchemaDiff{PropsRetyped: []string{"/limit: string -> integer"}}},
		{name: "type list order", old: `{"properties":{"x":{"type":["null","string"]}}}`, new: `{"properties":{"x":{"type":["string","null"]}}}`},
		{name: "type dropped", old: `{"properties":{"x":{"type":"string"}}}`, new: `{"properties":{"x":{}}}`,
			want: SchemaDiff{PropsRetyped: []string{"/x: string -> any"}}},
		{name: "required", old: `{"required":["a","b"],"properties":{"a":{},"b":{}}}`, new: `{"required":["b","c"],"properties":{"a":{},"b":{}}}`,
			want: SchemaDiff{RequiredAdded: []string{"/c"}, RequiredRemoved: []string{"/a"}}},
		{name: "enum", old: `{"properties":{"state":{"enum":["open","closed"]}}}`, new: `{"properties":{"state":{"enum":["open","all",1]}}}`,
			want: SchemaDiff{EnumAdded: []string{`/state: "all"`, `/state: 1`}, EnumRemoved: []string{`/state: "closed"`}}},
		{name: "nested and items", old: `{"properties":{"filter":{"type":"object","required":["q"],"properties":{"q":{"type":"string"}}},"ids":{"type":"array","items":{"type":"integer"}}}}`,
			new:  `{"properties":{"filter":{"type":"object","properties":{"q":{"type":"string"},"page":{"type":"integer"}}},"ids":{"type":"array","items":{"type":"string"}}}}`,
			want: SchemaDiff{PropsAdded: []string{"/filter/page"}, PropsRetyped: []string{"/ids/*: integer -> string"}, RequiredRemoved: []string{"/filter/q"}}},
		{name: "array items objects", old: `{"properties":{"rows":{"items":{"properties":{"id":{}}}}}}`, new: `{"properties":{"rows":{"items":{"properties":{"id":{},"name":{}}}}}}`,
			want: SchemaDiff{PropsAdded: []string{"/rows/*/name"}}},
		{name: "other keywords", old: `{"properties":{"n":{"maximum":10,"description":"a"}},"additionalProperties":false}`,
			new:  `{"properties":{"n":{"maximum":5,"minimum":0,"description":"b"}},"additionalProperties":true}`,
			want: SchemaDiff{Other: []string{"(root): additionalProperties false -> true", "/n: description changed", "/n: maximum 10 -> 5", "/n: minimum 0 added"}}},
		{name: "becomes unenforceable", old: `{"properties":{"t":{"type":"object"}}}`, new: `{"properties":{"t":{"$ref":"https://x.example/t.json"}}}`,
			want: SchemaDiff{PropsRetyped: []string{"/t: object -> any"}, Other: []string{
				`#/properties/t: $ref not enforced (reference "https://x.example/t.json" leads outside the schema (https://x.example/t.json): only references within the inp…): calls that reach it are refused`,
				`/t: $ref "https://x.example/t.json" added`}}},
		{name: "enforced again", old: `{"properties":{"s":{"pattern":"^(?!x)"}}}`, new: `{"properties":{"s":{"pattern":"^y"}}}`,
			want: SchemaDiff{Other: []string{"#/properties/s: pattern now enforced", `/s: pattern "^(?!x)" -> "^y"`}}},
		{name: "boolean property schema", old: `{"properties":{"x":true}}`, new: `{"properties":{"x":false}}`,
			want: SchemaDiff{Other: []string{"/x: true -> false"}}},
		{name: "root type", old: `{"type":"object"}`, new: `{"type":"array"}`,
			want: SchemaDiff{PropsRetyped: []string{"(root): object -> array"}}},
		{name: "escaped pointer", old: `{}`, new: `{"properties":{"a/b~c":{}}}`,
			want: SchemaDiff{PropsAdded: []string{"/a~1b~0c"}}},
		{name: "from nothing", old: ``, new: `{"required":["a"],"properties":{"a":{"type":"string"}}}`,
			want: SchemaDiff{PropsAdded: []string{"/a"}, RequiredAdded: []string{"/a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DiffSchemas([]byte(tt.old), []byte(tt.new))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(normalize(got), normalize(tt.want)) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			if got.Empty() != tt.want.Empty() {
				t.Errorf("Empty() = %v", got.Empty())
			}
		})
	}
}

// normalize makes nil and empty slices equal.
func normalize(d SchemaDiff) SchemaDiff {
	v := reflect.ValueOf(&d).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Len() == 0 {
			f.Set(reflect.Zero(f.Type()))
		}
	}
	return d
}

func TestDiffSchemasErrors(t *testing.T) {
	for _, tt := range []struct{ old, new string }{
		{`[]`, `{}`}, {`{}`, `"x"`}, {`{`, `{}`}, {`{}`, `{"a":1} x`},
		// the strict parser's refusals: a repeated member, too deep
		{`{}`, `{"type":"object","type":"string"}`},
		{strings.Repeat(`{"a":`, 200) + `1` + strings.Repeat(`}`, 200), `{}`},
	} {
		_, err := DiffSchemas([]byte(tt.old), []byte(tt.new))
		if err == nil {
			t.Errorf("%s -> %s: no error", tt.old, tt.new)
		}
		if strings.HasPrefix(tt.old, "[") && !errors.Is(err, ErrNotObject) {
			t.Errorf("%s: %v, want ErrNotObject", tt.old, err)
		}
	}
}

// TestDiffSchemasDeepAndLarge: nesting past the depth bound is one entry,
// and a large schema costs time linear in its size.
func TestDiffSchemasDeepAndLarge(t *testing.T) {
	deep := func(leaf string) string {
		// 60 properties deep: past maxDepth, within jsontape.MaxDepth.
		return strings.Repeat(`{"properties":{"x":`, 60) + leaf + strings.Repeat(`}}`, 60)
	}
	d, err := DiffSchemas([]byte(deep(`{"type":"string"}`)), []byte(deep(`{"type":"integer"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Other) != 1 || !strings.Contains(d.Other[0], "nested deeper than") || len(d.PropsRetyped) != 0 {
		t.Fatalf("deep diff = %+v", d)
	}

	// Cost linear in the size: allocations (deterministic, unlike time on
	// a shared machine) grow as the properties do. BenchmarkDiffSchemas
	// measures the time.
	allocs := func(n int) float64 {
		a, b := propsSchema(n, "string"), propsSchema(n, "integer")
		d, err := DiffSchemas(a, b)
		if err != nil || len(d.PropsRetyped) != n {
			t.Fatalf("n=%d: %d retyped, %v", n, len(d.PropsRetyped), err)
		}
		return testing.AllocsPerRun(2, func() { DiffSchemas(a, b) })
	}
	small, large := allocs(1000), allocs(16000)
	if ratio := large / small; ratio > 17 {
		t.Errorf("16x the properties made %.1fx the allocations (%.0f, %.0f)", ratio, small, large)
	}
}

func TestSummary(t *testing.T) {
	d := SchemaDiff{PropsAdded: []string{"/a"}, PropsRemoved: []string{"/b"}, PropsRetyped: []string{"/c: string -> integer"},
		RequiredAdded: []string{"/a"}, EnumRemoved: []string{`/s: "x"`}, Other: []string{"/n: maximum 1 -> 2"}}
	want := `+/a -/b /c: string -> integer required+/a enum-/s: "x" /n: maximum 1 -> 2`
	if got := d.Summary(); got != want {
		t.Errorf("Summary() = %q, want %q", got, want)
	}
	long := SchemaDiff{PropsAdded: []string{strings.Repeat("é", 400)}}
	if s := long.Summary(); len(s) > 304 || !strings.HasSuffix(s, "…") {
		t.Errorf("long summary: %d bytes, %q...", len(s), s[:20])
	}
}
