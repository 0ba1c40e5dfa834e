package registry

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/schema"
)

// fleetListings generates a fleet relisting the corpus's real manifests,
// with changed definitions, removes, and conflicting listings at the same
// instant as another of their server.
func fleetListings(t testing.TB, sessions int, changeRate float64, seed uint64, extras bool) []*schema.Listing {
	t.Helper()
	ms, err := fleet.ReadManifests(corpus("mcp", "listings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	evs := fleet.Generate(fleet.Config{Sessions: sessions, ChangeRate: changeRate, Seed: seed}, ms)
	var ls []*schema.Listing
	for _, e := range evs {
		l, err := schema.DecodeListing(e.Line)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	if !extras {
		return ls
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	n := len(ls)
	for k := range n / 30 {
		a, b := ls[rng.IntN(n)], ls[rng.IntN(n)]
		switch k % 3 {
		case 0: // the server leaves for a while
			ls = append(ls, &schema.Listing{EventID: "rm-" + a.EventID, ObservedAt: a.ObservedAt.Add(time.Second), Registry: a.Registry, Server: a.Server, Op: schema.OpRemove})
		case 1: // another server's tools under this server's name, at the same instant
			c := *b
			c.EventID, c.ObservedAt, c.Server, c.Trust = "cf-"+a.EventID, a.ObservedAt, a.Server, a.Trust
			ls = append(ls, &c)
		case 2: // a listing in a second registry
			c := *a
			c.EventID, c.Registry = "r2-"+a.EventID, "fleet-2"
			ls = append(ls, &c)
		}
	}
	return ls
}

// TestDifferentialFleet: the incremental store and a from-scratch rebuild
// give identical versions, ids, digests and drift flags over random
// arrival orders of the corpus's listings plus generated relistings,
// changes, removes, redeliveries and same-instant conflicts; made
// WithChanges, the same versions, and the changes it reports, kept last
// per key, are the history in event time (changesReference).
func TestDifferentialFleet(t *testing.T) {
	ls := readListings(t, corpus("sample", "listings.jsonl"))
	ls = append(ls, readListings(t, corpus("mcp", "listings.jsonl"))...)
	ls = append(ls, readListings(t, corpus("mcp", "history.jsonl"))...)
	ls = append(ls, fleetListings(t, 200, 0.05, 1, true)...)
	want := reference(t, ls)
	nv := 0
	for _, vs := range want {
		nv += len(vs)
	}
	if nv < 150 {
		t.Fatalf("the reference has only %d versions: too few changes to test", nv)
	}
	wantChanges := changesReference(t, ls)
	if len(wantChanges) < 1000 {
		t.Fatalf("the reference has only %d changes", len(wantChanges))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	orders := []struct {
		name  string
		order func() []int
		batch int
	}{
		{"in order", func() []int { return identity(len(ls)) }, 1},
		{"reversed", func() []int { o := identity(len(ls)); slices.Reverse(o); return o }, 1},
		{"shuffled", func() []int { return rng.Perm(len(ls)) }, 1},
		{"shuffled, batches", func() []int { return rng.Perm(len(ls)) }, 37},
		{"late and redelivered", func() []int { return fleet.Arrival(len(ls), 0.2, 0.1, 200, 5) }, 1},
		{"late and redelivered, batches", func() []int { return fleet.Arrival(len(ls), 0.3, 0.3, 50, 6) }, 16},
	}
	for _, o := range orders {
		t.Run(strings.ReplaceAll(o.name, " ", "_"), func(t *testing.T) {
			reported := map[ChangeKey]Change{}
			s := New(WithLateWindow(0))
			if o.batch > 1 || strings.Contains(o.name, "late") {
				s = New(WithLateWindow(0), WithChanges(func(cs []Change) { keepLast(reported, cs) }))
			}
			order := o.order()
			for k := 0; k < len(order); k += o.batch {
				var batch []*schema.Listing
				for _, i := range order[k:min(k+o.batch, len(order))] {
					batch = append(batch, ls[i])
				}
				s.Apply(batch...)
			}
			if d := diffStore(s, want); d != "" {
				t.Fatal(d)
			}
			// Everything again: nothing changes.
			s.Apply(ls...)
			if d := diffStore(s, want); d != "" {
				t.Fatalf("after redelivering everything: %s", d)
			}
			if s.ReportsChanges() {
				if got := materialized(reported); !slices.EqualFunc(got, wantChanges, sameChange) {
					t.Fatalf("changes: %d, want %d", len(got), len(wantChanges))
				}
			}
		})
	}
}

// TestLateWindow: with the default late window, listings late by less
// than the window are applied exactly, while unchanged relistings older
// than it are forgotten (bounded memory).
func TestLateWindow(t *testing.T) {
	ls := fleetListings(t, 1500, 0.01, 2, false)
	want := reference(t, ls)
	// 4,500 listings, 3 per 130 s: 50 positions late is under 40 minutes.
	reported := map[ChangeKey]Change{}
	s := New(WithLateWindow(time.Hour), WithChanges(func(cs []Change) { keepLast(reported, cs) }))
	for _, i := range fleet.Arrival(len(ls), 0.2, 0.1, 50, 9) {
		s.Apply(ls[i])
	}
	if d := diffStore(s, want); d != "" {
		t.Fatal(d)
	}
	if got, want := materialized(reported), changesReference(t, ls); !slices.EqualFunc(got, want, sameChange) {
		t.Fatalf("changes: %d, want %d", len(got), len(want))
	}
	st := s.Stats()
	if st.Points > int64(len(ls))/4 {
		t.Fatalf("%d relisting instants kept of %d listings: the window does not bound them", st.Points, len(ls))
	}
	t.Logf("%+v", st)
}

func keepLast(store map[ChangeKey]Change, cs []Change) {
	for _, c := range cs {
		store[c.Key()] = c
	}
}

// sameChange compares changes; their schemas are the first listed with
// the digest, so the digests compare them.
func sameChange(a, b Change) bool {
	a.SchemaBefore, a.SchemaAfter, b.SchemaBefore, b.SchemaAfter = nil, nil, nil, nil
	return reflect.DeepEqual(a, b)
}

func identity(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	return o
}
