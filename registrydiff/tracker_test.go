package registrydiff

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

func listing(id string, sec int, server string, trust int, tools ...string) *schema.Listing {
	l := &schema.Listing{EventID: id, ObservedAt: t0.Add(time.Duration(sec) * time.Second), Registry: "fleet", Server: server, Trust: trust, Op: schema.OpSnapshot}
	for i := 0; i+1 < len(tools); i += 2 {
		l.Tools = append(l.Tools, schema.Tool{Name: tools[i], InputSchema: []byte(tools[i+1])})
	}
	return l
}

func removal(id string, sec int, server string) *schema.Listing {
	return &schema.Listing{EventID: id, ObservedAt: t0.Add(time.Duration(sec) * time.Second), Registry: "fleet", Server: server, Op: schema.OpRemove}
}

const (
	issueV1 = `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`
	issueV2 = `{"type":"object","properties":{"title":{"type":"string"},"labels":{"type":"array"}},"required":["title","labels"]}`
	search  = `{"type":"object","properties":{"q":{"type":"string"}}}`
)

func digest(t *testing.T, name, s string) string {
	t.Helper()
	d, err := schema.Digest(name, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestTrackerHistory: a server's life, listing by listing.
func TestTrackerHistory(t *testing.T) {
	tr := NewTracker()
	type row struct {
		sec  int
		tool string
		kind Kind
		sum  string
	}
	rows := func(cs []Change) []row {
		var out []row
		for _, c := range cs {
			if c.Deleted {
				t.Errorf("unexpected deleted row %+v", c)
			}
			out = append(out, row{int(c.ObservedAt.Sub(t0).Seconds()), c.Tool, c.Kind, c.Summary})
		}
		return out
	}
	steps := []struct {
		l    *schema.Listing
		want []row
	}{
		{listing("l1", 0, "github", 2, "create_issue", issueV1, "search", search), []row{
			{0, "create_issue", Added, "added: +/title required+/title"},
			{0, "search", Added, "added: +/q"},
		}},
		{listing("l2", 10, "github", 2, "create_issue", issueV1, "search", search), nil}, // relisting
		{listing("l3", 20, "github", 2, "create_issue", issueV2), []row{
			{20, "create_issue", Changed, "changed: +/labels required+/labels"},
			{20, "search", Removed, "removed"},
		}},
		{listing("l4", 30, "github", 1, "create_issue", issueV2), []row{{30, "create_issue", Trust, "trust 2 -> 1"}}},
		{listing("l4", 30, "github", 1, "create_issue", issueV2), nil}, // redelivered
		{removal("l5", 40, "github"), []row{{40, "create_issue", Removed, "removed"}}},
	}
	for i, s := range steps {
		got := tr.Apply(s.l)
		if !reflect.DeepEqual(rows(got), s.want) {
			t.Fatalf("step %d: got %+v, want %+v", i, rows(got), s.want)
		}
		for _, c := range got {
			if c.EventID != s.l.EventID || c.Registry != "fleet" || c.Server != "github" {
				t.Errorf("step %d: row %+v", i, c)
			}
		}
	}
	// Digests and trust on the change rows.
	got := tr.Apply(listing("l6", 50, "github", 3, "create_issue", issueV1))
	if len(got) != 1 {
		t.Fatalf("re-add: %+v", got)
	}
	c := got[0]
	if c.Kind != Added || c.DigestBefore != "" || c.DigestAfter != digest(t, "create_issue", issueV1) || c.TrustBefore != 0 || c.TrustAfter != 3 {
		t.Errorf("re-add row %+v", c)
	}
}

// TestTrackerLate: a listing that arrives after a later one is put in its
// place, and the later listing's rows are recomputed (a change that no
// longer happens there is deleted).
func TestTrackerLate(t *testing.T) {
	tr := NewTracker()
	tr.Apply(listing("a", 0, "s", 0, "t", issueV1))
	tr.Apply(listing("c", 20, "s", 0, "t", issueV2)) // changed at 20
	got := tr.Apply(listing("b", 10, "s", 0, "t", issueV2))
	// At 10: changed v1->v2. At 20: nothing changes any more: deleted.
	if len(got) != 2 {
		t.Fatalf("got %+v", got)
	}
	if c := got[0]; c.ObservedAt != t0.Add(10*time.Second) || c.Kind != Changed || c.Deleted || c.EventID != "b" {
		t.Errorf("row at 10: %+v", c)
	}
	if c := got[1]; c.ObservedAt != t0.Add(20*time.Second) || !c.Deleted || c.EventID != "c" {
		t.Errorf("row at 20: %+v", c)
	}
}

// TestTrackerAnyOrder: whatever order and batches the listings arrive
// in, redelivered or not, the store of the last write per key (deleted
// rows dropped) holds the history computed from the listings in event
// time.
func TestTrackerAnyOrder(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 7))
		ls := history(r, 60)
		want := reference(ls)
		for trial := range 5 {
			order := slices.Clone(ls)
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			if trial%2 == 1 { // redeliveries
				for range 10 {
					order = append(order, ls[r.IntN(len(ls))])
				}
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			tr := NewTracker()
			store := map[Key]Change{}
			for len(order) > 0 {
				n := min(len(order), 1+r.IntN(8))
				for _, c := range tr.Apply(order[:n]...) {
					store[c.Key()] = c
				}
				order = order[n:]
			}
			got := materialize(store)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("seed %d trial %d: %d rows, want %d\ngot  %v\nwant %v", seed, trial, len(got), len(want), keys(got), keys(want))
			}
		}
	}
}

// history is n random listings of two servers: states from a small pool
// (so relistings repeat a state), trust changes, removals, and listings
// that share an observed_at.
func history(r *rand.Rand, n int) []*schema.Listing {
	pool := []string{issueV1, issueV2, search, `{"type":"object"}`}
	var ls []*schema.Listing
	for i := range n {
		server := []string{"a", "b"}[r.IntN(2)]
		sec := r.IntN(40)
		id := fmt.Sprintf("e%03d", i)
		if r.IntN(8) == 0 {
			ls = append(ls, removal(id, sec, server))
			continue
		}
		var tools []string
		for _, name := range []string{"x", "y", "z"} {
			if r.IntN(3) > 0 {
				tools = append(tools, name, pool[r.IntN(len(pool))])
			}
		}
		ls = append(ls, listing(id, sec, server, r.IntN(2), tools...))
	}
	return ls
}

// reference is the history from the listings in event time, each
// server's listings sorted, the greatest event_id standing at a shared
// time, and each compared with the one before: the definition, written
// without the Tracker's ordering machinery.
func reference(ls []*schema.Listing) []Change {
	by := map[serverKey][]*schema.Listing{}
	for _, l := range ls {
		k := serverKey{l.Registry, l.Server}
		by[k] = append(by[k], l)
	}
	var out []Change
	for k, sl := range by {
		slices.SortFunc(sl, func(a, b *schema.Listing) int {
			return cmp.Or(a.ObservedAt.Compare(b.ObservedAt), cmp.Compare(a.EventID, b.EventID))
		})
		var kept []*schema.Listing
		for i, l := range sl {
			if i+1 < len(sl) && sl[i+1].ObservedAt.Equal(l.ObservedAt) {
				continue
			}
			kept = append(kept, l)
		}
		tr := NewTracker() // only for its definitions and states
		var prev *state
		for _, l := range kept {
			cur := tr.state(l, prev)
			for tool, c := range diffStates(prev, cur) {
				c.Registry, c.Server, c.Tool, c.ObservedAt, c.EventID = k.registry, k.server, tool, l.ObservedAt, l.EventID
				out = append(out, c)
			}
			prev = cur
		}
	}
	SortChanges(out)
	return out
}

func materialize(store map[Key]Change) []Change {
	var out []Change
	for _, c := range store {
		if !c.Deleted {
			out = append(out, c)
		}
	}
	SortChanges(out)
	return out
}

func keys(cs []Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s@%d:%s", c.Server+"/"+c.Tool, int(c.ObservedAt.Sub(t0).Seconds()), c.Kind))
	}
	return out
}

// TestTrackerRelistingsBounded: routine relistings do not grow the
// Tracker: unchanged relistings older than the late window are dropped,
// and a change after ten thousand of them is still one row.
func TestTrackerRelistingsBounded(t *testing.T) {
	tr := NewTracker()
	const n = 10000
	for i := range n { // one relisting every 10 minutes: 69 days
		if cs := tr.Apply(listing(fmt.Sprintf("r-%d", i), 600*i, "gh", 1, "create_issue", issueV1)); i > 0 && len(cs) != 0 {
			t.Fatalf("relisting %d changed %v", i, cs)
		}
	}
	tl := tr.servers[serverKey{"fleet", "gh"}]
	// The window holds 24 h / 10 min = 144 relistings; compaction runs
	// when the points have doubled.
	if got := len(tl.points); got > 2*(144+2)+minCompact {
		t.Fatalf("%d points kept after %d unchanged relistings", got, n)
	}
	cs := tr.Apply(listing("change", 600*n, "gh", 1, "create_issue", issueV2))
	if len(cs) != 1 || cs[0].Tool != "create_issue" || cs[0].Deleted {
		t.Fatalf("the change: %+v", cs)
	}
	// A late relisting inside the window is placed and changes nothing.
	if cs := tr.Apply(listing("late", 600*(n-3)+1, "gh", 1, "create_issue", issueV1)); len(cs) != 0 {
		t.Fatalf("late relisting: %+v", cs)
	}
}
