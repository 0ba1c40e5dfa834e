package sink

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
)

// storeRows returns a registry store and the function that applies
// listings to it and returns the rows of what it reports.
func storeRows() func(ls ...*schema.Listing) []diff.Change {
	var reported []registry.Change
	s := registry.New(registry.WithChanges(func(cs []registry.Change) { reported = cs }))
	return func(ls ...*schema.Listing) []diff.Change {
		reported = nil
		s.Apply(ls...)
		var out []diff.Change
		for _, c := range reported {
			out = append(out, diff.Describe(c))
		}
		return out
	}
}

// TestRegistryChanges: the registry store's rows round-trip through the table;
// a late listing's rewrite replaces the next listing's rows, its deleted
// rows vanish under FINAL, and a second write of the same rows is one row
// per change; the filter selects by server, tool and time.
func TestRegistryChanges(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	listing := func(id string, s int, trust int, schemaJSON string) *schema.Listing {
		return &schema.Listing{EventID: id, ObservedAt: at(s), Registry: "fleet", Server: "github", Trust: trust, Op: schema.OpSnapshot,
			Tools: []schema.Tool{{Name: "create_issue", InputSchema: []byte(schemaJSON)}, {Name: "search", InputSchema: []byte(`{"type":"object"}`)}}}
	}
	const v1 = `{"type":"object","properties":{"title":{"type":"string"}}}`
	const v2 = `{"type":"object","properties":{"title":{"type":"integer"},"body":{"type":"string"}},"required":["body"]}`
	apply := storeRows()
	write := func(ls ...*schema.Listing) []diff.Change {
		cs := apply(ls...)
		for i := range cs {
			cs[i].RecordedAt = time.Now() // as registry/history stamps them
		}
		if err := w.WriteRegistryChanges(ctx, cs); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // a later write has a later RecordedAt
		return cs
	}
	write(listing("l1", 0, 1, v1))
	write(listing("l3", 20, 1, v2)) // changed at 20
	write(listing("l2", 10, 1, v2)) // late: changed at 10, nothing at 20 any more
	// The same rows again (another instance, a restart): still one each.
	write2 := storeRows()(listing("l1", 0, 1, v1), listing("l2", 10, 1, v2), listing("l3", 20, 1, v2))
	if err := w.WriteRegistryChanges(ctx, write2); err != nil {
		t.Fatal(err)
	}

	got, err := w.RegistryChanges(ctx, ChangeFilter{Registry: "fleet"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		sec        int
		tool, kind string
		diff       diff.SchemaDiff
	}
	var rows []row
	for _, c := range got {
		rows = append(rows, row{int(c.ObservedAt.Sub(base).Seconds()), c.Tool, string(c.Kind), c.Diff})
	}
	wantRows := []row{
		{0, "create_issue", "added", diff.SchemaDiff{PropsAdded: []string{"/title"}}},
		{0, "search", "added", diff.SchemaDiff{}},
		{10, "create_issue", "changed", diff.SchemaDiff{PropsAdded: []string{"/body"}, PropsRetyped: []string{"/title: string -> integer"}, RequiredAdded: []string{"/body"}}},
	}
	for i := range rows {
		rows[i].diff = nonNil(rows[i].diff)
	}
	for i := range wantRows {
		wantRows[i].diff = nonNil(wantRows[i].diff)
	}
	if !reflect.DeepEqual(rows, wantRows) {
		t.Fatalf("history:\n got %+v\nwant %+v", rows, wantRows)
	}
	c := got[2]
	if c.EventID != "l2" || c.DigestBefore == "" || c.DigestAfter == "" || c.DigestBefore == c.DigestAfter || c.TrustAfter != 1 || c.Summary == "" {
		t.Errorf("change row %+v", c)
	}

	for _, tt := range []struct {
		f    ChangeFilter
		want int
	}{
		{ChangeFilter{Registry: "fleet", Tool: "search"}, 1},
		{ChangeFilter{Registry: "fleet", Server: "gitlab"}, 0},
		{ChangeFilter{Registry: "fleet", From: at(5)}, 1},
		{ChangeFilter{Registry: "fleet", To: at(5)}, 2},
		{ChangeFilter{Registry: "other"}, 0},
	} {
		got, err := w.RegistryChanges(ctx, tt.f, 0)
		if err != nil || len(got) != tt.want {
			t.Errorf("%+v: %d rows (%v), want %d", tt.f, len(got), err, tt.want)
		}
	}
}

// nonNil makes a diff's nil lists empty, as they read back.
func nonNil(d diff.SchemaDiff) diff.SchemaDiff {
	for _, l := range []*[]string{&d.PropsAdded, &d.PropsRemoved, &d.PropsRetyped, &d.RequiredAdded,
		&d.RequiredRemoved, &d.EnumAdded, &d.EnumRemoved, &d.Other} {
		if *l == nil {
			*l = []string{}
		}
	}
	return d
}
