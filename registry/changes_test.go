package registry

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

var c0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func chListing(id string, sec int, server string, trust int, tools ...string) *schema.Listing {
	l := &schema.Listing{EventID: id, ObservedAt: c0.Add(time.Duration(sec) * time.Second), Registry: "fleet", Server: server, Trust: trust, Op: schema.OpSnapshot}
	for i := 0; i+1 < len(tools); i += 2 {
		l.Tools = append(l.Tools, schema.Tool{Name: tools[i], InputSchema: []byte(tools[i+1])})
	}
	return l
}

func chRemoval(id string, sec int, server string) *schema.Listing {
	return &schema.Listing{EventID: id, ObservedAt: c0.Add(time.Duration(sec) * time.Second), Registry: "fleet", Server: server, Op: schema.OpRemove}
}

const (
	issueV1 = `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`
	issueV2 = `{"type":"object","properties":{"title":{"type":"string"},"labels":{"type":"array"}},"required":["title","labels"]}`
	search  = `{"type":"object","properties":{"q":{"type":"string"}}}`
)

// changeLog is a store made WithChanges and what it reported, call by
// call.
type changeLog struct {
	s     *Store
	calls [][]Change
}

func newChangeLog(opts ...Option) *changeLog {
	cl := &changeLog{}
	cl.s = New(append(opts, WithChanges(func(cs []Change) { cl.calls = append(cl.calls, cs) }))...)
	return cl
}

// apply applies ls and returns what the store reported for them.
func (cl *changeLog) apply(t testing.TB, ls ...*schema.Listing) []Change {
	t.Helper()
	n := len(cl.calls)
	if issues := cl.s.Apply(ls...); len(issues) != 0 {
		t.Fatalf("issues: %v", issues)
	}
	switch len(cl.calls) - n {
	case 0:
		return nil
	case 1:
		if len(cl.calls[n]) == 0 {
			t.Fatal("reported an empty slice")
		}
		return cl.calls[n]
	}
	t.Fatalf("%d reports for one Apply", len(cl.calls)-n)
	return nil
}

func dg(t testing.TB, name, s string) string {
	t.Helper()
	d, err := schema.Digest(name, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestChangesHistory: a server's life, listing by listing: the digests
// and trust before and after each change, nothing for a relisting or a
// redelivery.
func TestChangesHistory(t *testing.T) {
	cl := newChangeLog()
	type row struct {
		sec           int
		tool          string
		before, after string // digests
		tb, ta        int
		schemaBefore  string
		schemaAfter   string
	}
	rows := func(cs []Change) []row {
		var out []row
		for _, c := range cs {
			if c.Deleted {
				t.Errorf("unexpected deleted row %+v", c)
			}
			out = append(out, row{int(c.ObservedAt.Sub(c0).Seconds()), c.Tool, c.DigestBefore, c.DigestAfter, c.TrustBefore, c.TrustAfter,
				string(c.SchemaBefore), string(c.SchemaAfter)})
		}
		return out
	}
	v1, v2, q := dg(t, "create_issue", issueV1), dg(t, "create_issue", issueV2), dg(t, "search", search)
	steps := []struct {
		l    *schema.Listing
		want []row
	}{
		{chListing("l1", 0, "github", 2, "create_issue", issueV1, "search", search), []row{
			{0, "create_issue", "", v1, 0, 2, "", issueV1},
			{0, "search", "", q, 0, 2, "", search},
		}},
		{chListing("l2", 10, "github", 2, "create_issue", issueV1, "search", search), nil}, // relisting
		{chListing("l3", 20, "github", 2, "create_issue", issueV2), []row{
			{20, "create_issue", v1, v2, 2, 2, issueV1, issueV2},
			{20, "search", q, "", 2, 2, search, ""},
		}},
		{chListing("l4", 30, "github", 1, "create_issue", issueV2), []row{{30, "create_issue", v2, v2, 2, 1, issueV2, issueV2}}},
		{chListing("l4", 30, "github", 1, "create_issue", issueV2), nil}, // redelivered
		{chRemoval("l5", 40, "github"), []row{{40, "create_issue", v2, "", 1, 0, issueV2, ""}}},
		{chRemoval("l6", 50, "github"), nil}, // removed again: nothing to change
		{chListing("l7", 60, "github", 3, "create_issue", issueV1), []row{{60, "create_issue", "", v1, 0, 3, "", issueV1}}},
	}
	for i, s := range steps {
		got := cl.apply(t, s.l)
		if !reflect.DeepEqual(rows(got), s.want) {
			t.Fatalf("step %d: got %+v, want %+v", i, rows(got), s.want)
		}
		for _, c := range got {
			if c.EventID != s.l.EventID || c.Registry != "fleet" || c.Server != "github" {
				t.Errorf("step %d: row %+v", i, c)
			}
		}
	}
}

// TestChangesLate: a listing that arrives after a later one is put in its
// place, and the later listing's changes are reported again, recomputed
// (a change that no longer happens there, deleted).
func TestChangesLate(t *testing.T) {
	cl := newChangeLog()
	cl.apply(t, chListing("a", 0, "s", 0, "t", issueV1))
	cl.apply(t, chListing("c", 20, "s", 0, "t", issueV2)) // changed at 20
	got := cl.apply(t, chListing("b", 10, "s", 0, "t", issueV2))
	// At 10: changed v1->v2. At 20: nothing changes any more: deleted.
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	if c := got[0]; c.ObservedAt != c0.Add(10*time.Second) || c.DigestBefore != dg(t, "t", issueV1) || c.DigestAfter != dg(t, "t", issueV2) || c.Deleted || c.EventID != "b" {
		t.Errorf("row at 10: %+v", c)
	}
	if c := got[1]; c.ObservedAt != c0.Add(20*time.Second) || !c.Deleted || c.EventID != "c" {
		t.Errorf("row at 20: %+v", c)
	}
}

// TestChangesSameInstant: two listings of one server at one instant: the
// content that stands is the store's (a remove, else the greater content
// key), whatever the order; the event_id is the greatest of that content.
func TestChangesSameInstant(t *testing.T) {
	base := chListing("a", 0, "s", 1, "t", issueV1)
	x := chListing("x1", 10, "s", 1, "t", issueV2)
	x2 := chListing("x3", 10, "s", 1, "t", issueV2) // same content, greater id
	y := chListing("x2", 10, "s", 1, "t", search)
	rm := chRemoval("x0", 10, "s")
	for _, tc := range []struct {
		name  string
		ls    []*schema.Listing
		event string
		after string
	}{
		{"redelivered content, greater id", []*schema.Listing{x, x2}, "x3", dg(t, "t", issueV2)},
		{"greater id first", []*schema.Listing{x2, x}, "x3", dg(t, "t", issueV2)},
		{"remove wins", []*schema.Listing{x2, rm, y}, "x0", ""},
		{"remove wins, first", []*schema.Listing{rm, x, y}, "x0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var final map[ChangeKey]Change
			reversed := identity(len(tc.ls))
			slices.Reverse(reversed)
			for _, order := range [][]int{identity(len(tc.ls)), reversed} {
				cl := newChangeLog()
				store := map[ChangeKey]Change{}
				keep := func(cs []Change) {
					for _, c := range cs {
						store[c.Key()] = c
					}
				}
				keep(cl.apply(t, base))
				for _, i := range order {
					keep(cl.apply(t, tc.ls[i]))
				}
				for _, i := range order { // all of them, in one call
					keep(cl.apply(t, tc.ls[i]))
				}
				c, ok := store[ChangeKey{"fleet", "s", "t", c0.Add(10 * time.Second)}]
				if !ok || c.Deleted || c.EventID != tc.event || c.DigestAfter != tc.after {
					t.Fatalf("order %v: row %+v, want event %s, digest %q", order, c, tc.event, tc.after)
				}
				if final != nil && !reflect.DeepEqual(materialized(store), materialized(final)) {
					t.Fatalf("order %v: another history", order)
				}
				final = store
			}
		})
	}
}

// TestChangesAnyOrder: whatever order and batches the listings arrive
// in, redelivered or not, the store of the last report per key (deleted
// ones dropped) holds the history computed from the listings in event
// time.
func TestChangesAnyOrder(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		ls := changeHistory(r, 60)
		want := changesReference(t, ls)
		for trial := range 5 {
			order := slices.Clone(ls)
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			if trial%2 == 1 { // redeliveries
				for range 10 {
					order = append(order, ls[r.IntN(len(ls))])
				}
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			cl := newChangeLog()
			store := map[ChangeKey]Change{}
			for len(order) > 0 {
				n := min(len(order), 1+r.IntN(8))
				for _, c := range cl.apply(t, order[:n]...) {
					store[c.Key()] = c
				}
				order = order[n:]
			}
			got := materialized(store)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d trial %d: %d rows, want %d\ngot  %v\nwant %v", seed, trial, len(got), len(want), changeKeys(got), changeKeys(want))
			}
		}
	}
}

// changeHistory is n random listings of two servers: states from a small
// pool (so relistings repeat a state), trust changes, removals, and
// listings that share an observed_at.
func changeHistory(r *rand.Rand, n int) []*schema.Listing {
	pool := []string{issueV1, issueV2, search, `{"type":"object"}`}
	var ls []*schema.Listing
	for i := range n {
		server := []string{"a", "b"}[r.IntN(2)]
		sec := r.IntN(40)
		id := fmt.Sprintf("e%03d", i)
		if r.IntN(8) == 0 {
			ls = append(ls, chRemoval(id, sec, server))
			continue
		}
		var tools []string
		for _, name := range []string{"x", "y", "z"} {
			if r.IntN(3) > 0 {
				tools = append(tools, name, pool[r.IntN(len(pool))])
			}
		}
		ls = append(ls, chListing(id, sec, server, r.IntN(2), tools...))
	}
	return ls
}

// changesReference is the history from the listings in event time: each
// server's listings sorted, at a shared instant the content that wins
// (a remove, else the greater content key) with the greatest event_id
// among its listings, each compared with the one before: the definition,
// written without the store's points, spans and marks.
func changesReference(t testing.TB, ls []*schema.Listing) []Change {
	contents, issues := New().prepare(ls) // only for the interned contents
	if len(issues) != 0 {
		t.Fatal(issues)
	}
	type listed struct {
		l *schema.Listing
		c *content
	}
	type serverKey struct{ registry, server string }
	by := map[serverKey][]listed{}
	for i, l := range ls {
		k := serverKey{l.Registry, l.Server}
		by[k] = append(by[k], listed{l, contents[i]})
	}
	var out []Change
	for sk, sl := range by {
		slices.SortFunc(sl, func(a, b listed) int { return a.l.ObservedAt.Compare(b.l.ObservedAt) })
		k := pointKey{r: &registry{name: sk.registry}, sv: &server{name: sk.server}}
		var prev *content
		for i := 0; i < len(sl); {
			j := i
			win := sl[i]
			for ; j < len(sl) && sl[j].l.ObservedAt.Equal(sl[i].l.ObservedAt); j++ {
				if wins(sl[j].c, win.c) {
					win = sl[j]
				}
			}
			event := ""
			for _, x := range sl[i:j] {
				if x.c == win.c {
					event = max(event, x.l.EventID)
				}
			}
			k.at = win.l.ObservedAt.UnixNano()
			out = diffContents(out, k, pointState{prev: prev, cur: win.c, event: event, ok: true})
			prev = win.c
			i = j
		}
	}
	SortChanges(out)
	return out
}

func materialized(store map[ChangeKey]Change) []Change {
	var out []Change
	for _, c := range store {
		if !c.Deleted {
			out = append(out, c)
		}
	}
	SortChanges(out)
	return out
}

func changeKeys(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%s@%d:%s>%s(%s)", c.Server, c.Tool, int(c.ObservedAt.Sub(c0).Seconds()), c.DigestBefore, c.DigestAfter, c.EventID))
	}
	return out
}

// TestChangesRelistingsBounded: with changes reported, routine
// relistings still do not grow the store: unchanged relistings older
// than the late window are dropped with their event_ids, and a change
// after ten thousand of them is one change.
func TestChangesRelistingsBounded(t *testing.T) {
	cl := newChangeLog()
	const n = 10000
	for i := range n { // one relisting every 10 minutes: 69 days
		if cs := cl.apply(t, chListing(fmt.Sprintf("r-%d", i), 600*i, "gh", 1, "create_issue", issueV1)); i > 0 && len(cs) != 0 {
			t.Fatalf("relisting %d changed %v", i, cs)
		}
	}
	sv := cl.s.regs["fleet"].servers["gh"]
	// The window holds 24 h / 10 min = 144 relistings; compaction runs
	// when the points have doubled.
	if got := len(sv.points); got > 4*(144+2) || len(sv.events) != got {
		t.Fatalf("%d points and %d event_ids kept after %d unchanged relistings", got, len(sv.events), n)
	}
	for i, p := range sv.points {
		if want := fmt.Sprintf("r-%d", int(time.Unix(0, p.at).Sub(c0)/(600*time.Second))); sv.events[i] != want {
			t.Fatalf("point %d: event %s, want %s", i, sv.events[i], want)
		}
	}
	cs := cl.apply(t, chListing("change", 600*n, "gh", 1, "create_issue", issueV2))
	if len(cs) != 1 || cs[0].Tool != "create_issue" || cs[0].Deleted || cs[0].EventID != "change" {
		t.Fatalf("the change: %+v", cs)
	}
	// A late relisting inside the window is placed and changes nothing
	// (the change after it is reported again, as it was).
	cs = cl.apply(t, chListing("late", 600*(n-3)+1, "gh", 1, "create_issue", issueV1))
	if len(cs) != 0 {
		t.Fatalf("late relisting: %+v", cs)
	}
}

// TestChangesNeedEveryListing: a store that reports changes loads no
// checkpoint (it holds the state, not the listings before it), and a
// store that does not keeps no event_id.
func TestChangesNeedEveryListing(t *testing.T) {
	plain := New()
	plain.Apply(chListing("a", 0, "s", 0, "t", issueV1), chListing("b", 10, "s", 0, "t", issueV2))
	if plain.ReportsChanges() || plain.regs["fleet"].servers["s"].events != nil {
		t.Fatal("a plain store keeps event_ids")
	}
	data := plain.AppendCheckpoint(nil)
	cl := newChangeLog()
	if !cl.s.ReportsChanges() {
		t.Fatal("ReportsChanges false")
	}
	if err := cl.s.LoadCheckpoint(data); !errors.Is(err, ErrReportsChanges) {
		t.Fatalf("LoadCheckpoint: %v, want ErrReportsChanges", err)
	}
	// Same versions either way.
	cl.apply(t, chListing("a", 0, "s", 0, "t", issueV1), chListing("b", 10, "s", 0, "t", issueV2))
	for _, sec := range []int{0, 5, 10, 20} {
		at := c0.Add(time.Duration(sec) * time.Second)
		if a, b := plain.At("fleet", at), cl.s.At("fleet", at); cmp.Compare(a.ID, b.ID) != 0 {
			t.Errorf("at %ds: %s and %s", sec, a.ID, b.ID)
		}
	}
}

// TestChangesSkippedTool: a tool the store skips (an unusable
// inputSchema, reported as an issue) is in no change: the history is the
// registry the resolver decides on.
func TestChangesSkippedTool(t *testing.T) {
	cl := newChangeLog()
	if issues := cl.s.Apply(chListing("a", 0, "s", 1, "good", search, "bad", `[1]`)); len(issues) != 1 {
		t.Fatalf("issues %v", issues)
	}
	if len(cl.calls) != 1 || len(cl.calls[0]) != 1 || cl.calls[0][0].Tool != "good" {
		t.Fatalf("reported %+v", cl.calls)
	}
	// Listed again without it: nothing changed.
	if got := cl.apply(t, chListing("b", 10, "s", 1, "good", search)); len(got) != 0 {
		t.Fatalf("reported %+v", got)
	}
}
