package schema

import (
	"io/fs"
	"reflect"
	"regexp"
	"slices"
	"testing"
	"time"
)

// leafFields returns the paths of Row's fields, Decision's promoted ones
// included, by their index in reflect.Value.FieldByIndex.
func leafFields(t reflect.Type, prefix []int) [][]int {
	var out [][]int
	for i := range t.NumField() {
		idx := append(append([]int(nil), prefix...), i)
		if f := t.Field(i); f.Anonymous {
			out = append(out, leafFields(f.Type, idx)...)
			continue
		}
		out = append(out, idx)
	}
	return out
}

// TestColumns: the table names every field of Row exactly once, each
// through the one accessor of its Go type and a column type that stores
// it, under distinct names in the order of the DDL that creates them.
func TestColumns(t *testing.T) {
	cols := Columns()
	fields := leafFields(reflect.TypeOf(Row{}), nil)
	if len(cols) != len(fields) {
		t.Fatalf("%d columns for %d fields of Row", len(cols), len(fields))
	}
	seen := map[string]string{} // field -> column
	names := map[string]bool{}
	for _, c := range cols {
		if names[c.Name] {
			t.Errorf("column %s twice", c.Name)
		}
		names[c.Name] = true
		// Write through the accessor into a zero row; exactly one field
		// must change.
		var r Row
		set := 0
		for _, a := range []struct {
			ok    bool
			set   func()
			types []ColumnType
		}{
			{c.Str != nil, func() { *c.Str(&r) = "x" }, []ColumnType{TypeString, TypeLowCardinality}},
			{c.Bool != nil, func() { *c.Bool(&r) = true }, []ColumnType{TypeBool}},
			{c.Time != nil, func() { *c.Time(&r) = time.Unix(1, 0) }, []ColumnType{TypeTime}},
			{c.Int32 != nil, func() { *c.Int32(&r) = 1 }, []ColumnType{TypeInt32}},
			{c.Int64 != nil, func() { *c.Int64(&r) = 1 }, []ColumnType{TypeInt64}},
		} {
			if !a.ok {
				continue
			}
			set++
			a.set()
			if !slices.Contains(a.types, c.Type) {
				t.Errorf("%s: the field's Go type does not go in a %s column", c.Name, c.Type)
			}
		}
		if set != 1 {
			t.Errorf("%s: %d accessors, want 1", c.Name, set)
			continue
		}
		v := reflect.ValueOf(r)
		var changed []string
		for _, idx := range fields {
			if !v.FieldByIndex(idx).IsZero() {
				changed = append(changed, reflect.TypeOf(r).FieldByIndex(idx).Name)
			}
		}
		if len(changed) != 1 {
			t.Errorf("%s sets fields %v, want one", c.Name, changed)
			continue
		}
		if other, ok := seen[changed[0]]; ok {
			t.Errorf("field %s stored by %s and %s", changed[0], other, c.Name)
		}
		seen[changed[0]] = c.Name
	}

	// The columns in the order the migrations create them: 0001's, then
	// each later ADD COLUMN at its AFTER (the later migrations' type
	// changes are checked against a real table by package sink).
	ddl, err := Migrations.ReadFile("ddl/0001_decisions.sql")
	if err != nil {
		t.Fatal(err)
	}
	var created []string
	for _, m := range regexp.MustCompile(`(?m)^    ([a-z_]+) +[A-Z]`).FindAllSubmatch(ddl, -1) {
		created = append(created, string(m[1]))
	}
	files, err := fs.Glob(Migrations, "ddl/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	addCol := regexp.MustCompile(`ADD COLUMN (?:IF NOT EXISTS )?([a-z_]+) .* AFTER ([a-z_]+)`)
	for _, f := range files[1:] {
		b, err := Migrations.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range addCol.FindAllSubmatch(b, -1) {
			i := slices.Index(created, string(m[2]))
			if i < 0 {
				t.Fatalf("%s adds %s after %s, which no earlier migration created", f, m[1], m[2])
			}
			created = slices.Insert(created, i+1, string(m[1]))
		}
	}
	var want []string
	for _, c := range cols {
		want = append(want, c.Name)
	}
	if !reflect.DeepEqual(created, want) {
		t.Errorf("0001 creates\n%v\nthe table lists\n%v", created, want)
	}
}
