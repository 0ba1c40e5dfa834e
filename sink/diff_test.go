package sink

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// TestDiff: two analyses compared call by call, with FINAL: every call in
// the group of its (before, after) outcome, a call absent from one side
// in a group with an empty outcome there, a side's later decision when it
// has two, API decisions left out; the window and registry filters; the
// first examples by call key.
func TestDiff(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	t0 := base
	row := func(analysis, key string, class schema.Class, src schema.Source, decided time.Duration) schema.Row {
		r := schema.Row{CallKey: key, AnalysisID: analysis, Source: src, Registry: "reg-a", Tool: "tool-" + key,
			EmittedAt: t0.Add(time.Minute), DecidedAt: t0.Add(time.Hour + decided)}
		r.EventID = key
		r.Set(class, fmt.Sprintf("%s says %s", analysis, class))
		return r
	}
	var rows []schema.Row
	add := func(key string, before, after schema.Class) {
		if before != "" {
			rows = append(rows, row("old", key, before, schema.SourceStream, 0))
		}
		if after != "" {
			rows = append(rows, row("new", key, after, schema.SourceReanalysis, 0))
		}
	}
	for i := range 10 {
		add(fmt.Sprintf("ok-%02d", i), schema.OK, schema.OK)
	}
	for i := range 4 {
		add(fmt.Sprintf("m2-%02d", i), schema.M2, schema.OK)
	}
	add("h2-00", schema.H2, schema.H3)
	add("gone", schema.OK, "")
	add("new-only", "", schema.H1)
	// "new" has a stream row and a later reanalysis row of late-00: the
	// later counts; and an API decision, which is never compared.
	rows = append(rows, row("new", "late-00", schema.H1, schema.SourceStream, -time.Minute),
		row("new", "late-00", schema.OK, schema.SourceReanalysis, 0),
		row("old", "late-00", schema.H1, schema.SourceStream, 0),
		row("new", "ok-00", schema.M3, schema.SourceAPI, time.Hour))
	// Another registry and another time, for the filters.
	other := row("old", "other", schema.OK, schema.SourceStream, 0)
	other.Registry = "reg-b"
	later := row("new", "other", schema.H5, schema.SourceReanalysis, 0)
	later.Registry = "reg-b"
	early := row("old", "early", schema.OK, schema.SourceStream, 0)
	early.EmittedAt = t0.Add(-time.Hour)
	early2 := row("new", "early", schema.H4, schema.SourceReanalysis, 0)
	early2.EmittedAt = early.EmittedAt
	rows = append(rows, other, later, early, early2)
	mustWrite(t, w, rows)
	mustWrite(t, w, rows[:8]) // a redelivery: FINAL keeps one of each

	type g struct {
		before, after schema.Class
		calls         int64
		examples      []string // call keys
	}
	for _, tc := range []struct {
		name string
		q    DiffQuery
		want []g
	}{
		{"all", DiffQuery{Analysis: "new", Against: "old", Examples: 2}, []g{
			{schema.OK, schema.OK, 10, []string{"ok-00", "ok-01"}},
			{schema.M2, schema.OK, 4, []string{"m2-00", "m2-01"}},
			{"", schema.H1, 1, []string{"new-only"}},
			{schema.H1, schema.OK, 1, []string{"late-00"}},
			{schema.H2, schema.H3, 1, []string{"h2-00"}},
			{schema.OK, "", 1, []string{"gone"}},
			{schema.OK, schema.H4, 1, []string{"early"}},
			{schema.OK, schema.H5, 1, []string{"other"}},
		}},
		{"window and registry", DiffQuery{Analysis: "new", Against: "old", From: t0, To: t0.Add(time.Hour), Registries: []string{"reg-b"}, Examples: 1}, []g{
			{schema.OK, schema.H5, 1, []string{"other"}},
		}},
		{"no examples", DiffQuery{Analysis: "new", Against: "old", Registries: []string{"reg-a", "reg-b"}, From: t0}, []g{
			{schema.OK, schema.OK, 10, nil},
			{schema.M2, schema.OK, 4, nil},
			{"", schema.H1, 1, nil},
			{schema.H1, schema.OK, 1, nil},
			{schema.H2, schema.H3, 1, nil},
			{schema.OK, "", 1, nil},
			{schema.OK, schema.H5, 1, nil},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			groups, err := w.Diff(ctx, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []g
			for _, x := range groups {
				if x.Before.Class != "" && x.Before.Verdict != schema.VerdictOf(x.Before.Class) || x.After.Class != "" && x.After.Verdict != schema.VerdictOf(x.After.Class) {
					t.Errorf("group %+v: verdicts do not follow the classes", x)
				}
				var keys []string
				for _, e := range x.Examples {
					keys = append(keys, e.CallKey)
					if e.EventID != e.CallKey || e.Tool != "tool-"+e.CallKey {
						t.Errorf("example %+v", e)
					}
					if x.Before.Class != "" && e.ReasonBefore != "old says "+string(x.Before.Class) || x.After.Class != "" && e.ReasonAfter != "new says "+string(x.After.Class) {
						t.Errorf("example %+v of %v -> %v: reasons", e, x.Before, x.After)
					}
				}
				got = append(got, g{x.Before.Class, x.After.Class, x.Calls, keys})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("groups\n%v\nwant\n%v", got, tc.want)
			}
		})
	}

	srcs, err := w.Sources(ctx, "new")
	if err != nil || !slices.Equal(srcs, []schema.Source{schema.SourceAPI, schema.SourceReanalysis, schema.SourceStream}) {
		t.Errorf("Sources(new) = %v, %v", srcs, err)
	}
	if srcs, err := w.Sources(ctx, "none"); err != nil || len(srcs) != 0 {
		t.Errorf("Sources(none) = %v, %v", srcs, err)
	}
}
