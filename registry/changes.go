package registry

import (
	"cmp"
	"errors"
	"slices"
	"time"
)

// Change is what a listing changed about one tool of its server, against
// the server's previous listing in event time: the tool's definition
// (digest) or presence, or only the server's trust. A store made
// WithChanges reports them.
type Change struct {
	Registry, Server, Tool string
	ObservedAt             time.Time
	// EventID is the listing that stands at ObservedAt: of the listings
	// of the server at that instant with the content that stands (see
	// Store), the greatest event_id.
	EventID string
	// TrustBefore and TrustAfter are the server's trust before and at
	// ObservedAt (0 where it was not connected).
	TrustBefore, TrustAfter int
	// DigestBefore and DigestAfter are the tool's digests ("" where it
	// was not listed); SchemaBefore and SchemaAfter its inputSchema as
	// first listed with that digest (nil where it was not listed), shared
	// with the store: not to be modified.
	DigestBefore, DigestAfter string
	SchemaBefore, SchemaAfter []byte
	// Deleted: a change reported before at this key (registry, server,
	// tool, observed_at) no longer happens there (a late listing landed
	// before it); a store of the last report per key drops it.
	Deleted bool
}

// ChangeKey is what identifies a Change: a later report of a key
// replaces the earlier one.
type ChangeKey struct {
	Registry, Server, Tool string
	ObservedAt             time.Time
}

// Key returns c's key.
func (c *Change) Key() ChangeKey {
	return ChangeKey{Registry: c.Registry, Server: c.Server, Tool: c.Tool, ObservedAt: c.ObservedAt}
}

// SortChanges orders changes by registry, server, time and tool.
func SortChanges(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Server, b.Server),
			a.ObservedAt.Compare(b.ObservedAt), cmp.Compare(a.Tool, b.Tool))
	})
}

// WithChanges makes the store report, after each Apply, what the listings
// it applied changed, to f: the changes at every listing the call added,
// and at the next listing of each server whose predecessor it changed
// (recomputed, with Deleted set on what no longer happens there), in
// SortChanges order. A store that keeps the last report of each key
// (ChangeKey) and drops deleted ones then holds the history of every
// listing applied so far, whatever their arrival order
// (TestChangesAnyOrder); table registry_changes is one (package
// registry/history writes it).
//
// f is called with the store's lock held, so in the order the changes
// were made: it must not block, and must not call the store's writers.
// The store then keeps every retained point's event_id (a string per
// point). Such a store needs every listing: LoadCheckpoint refuses, as a
// checkpoint holds the store's state but not the listings before it.
func WithChanges(f func([]Change)) Option {
	return func(s *Store) { s.changes = f }
}

// ReportsChanges tells whether the store was made WithChanges.
func (s *Store) ReportsChanges() bool { return s.changes != nil }

// ErrReportsChanges is LoadCheckpoint's refusal on a store made
// WithChanges.
var ErrReportsChanges = errors.New("registry: a store that reports changes needs every listing, not a checkpoint")

// changeSet gathers, during one Apply, the state before the call of every
// listing instant whose changes the call may alter.
type changeSet struct {
	before map[pointKey]pointState
	keys   []pointKey
}

type pointKey struct {
	r  *registry
	sv *server
	at int64
}

// pointState is a listing instant of a server: its content, its
// predecessor's and its event_id; ok is false where there is no point.
type pointState struct {
	prev, cur *content
	event     string
	ok        bool
}

// mark records, before sv changes at instant at, the state of the point
// at at and of the next point after it: the two whose changes it alters.
func (cs *changeSet) mark(r *registry, sv *server, at int64) {
	if cs == nil {
		return
	}
	i, found := slices.BinarySearchFunc(sv.points, at, func(p point, at int64) int { return cmp.Compare(p.at, at) })
	cs.note(pointKey{r, sv, at})
	if found {
		i++
	}
	if i < len(sv.points) {
		cs.note(pointKey{r, sv, sv.points[i].at})
	}
}

func (cs *changeSet) note(k pointKey) {
	if _, ok := cs.before[k]; ok {
		return
	}
	if cs.before == nil {
		cs.before = map[pointKey]pointState{}
	}
	cs.before[k] = k.sv.pointAt(k.at)
	cs.keys = append(cs.keys, k)
}

// pointAt is the point at instant at.
func (sv *server) pointAt(at int64) pointState {
	i, found := slices.BinarySearchFunc(sv.points, at, func(p point, at int64) int { return cmp.Compare(p.at, at) })
	if !found {
		return pointState{}
	}
	ps := pointState{cur: sv.points[i].c, event: sv.events[i], ok: true}
	if i > 0 {
		ps.prev = sv.points[i-1].c
	}
	return ps
}

// changes is what the marked points change now, and what they changed
// before and no longer do, deleted.
func (cs *changeSet) changes() []Change {
	var out []Change
	for _, k := range cs.keys {
		before, after := cs.before[k], k.sv.pointAt(k.at)
		n := len(out)
		if after.ok {
			out = diffContents(out, k, after)
		}
		if before.ok {
			// Both are in tool order (diffContents walks by name).
			now, j := out[n:], 0
			for _, c := range diffContents(nil, k, before) {
				for j < len(now) && now[j].Tool < c.Tool {
					j++
				}
				if j == len(now) || now[j].Tool != c.Tool {
					c.Deleted = true
					out = append(out, c)
				}
			}
		}
	}
	SortChanges(out)
	return out
}

// diffContents appends what the point p of k changed, by tool.
func diffContents(out []Change, k pointKey, p pointState) []Change {
	if p.prev == p.cur {
		return out
	}
	var pt, ct int
	var pdefs, cdefs []*def
	if p.prev != nil {
		pt, pdefs = p.prev.trust, p.prev.defs
	}
	if p.cur != nil {
		ct, cdefs = p.cur.trust, p.cur.defs
	}
	at := time.Unix(0, k.at).UTC()
	row := func(name string, before, after *def) {
		c := Change{Registry: k.r.name, Server: k.sv.name, Tool: name, ObservedAt: at, EventID: p.event, TrustBefore: pt, TrustAfter: ct}
		if before != nil {
			c.DigestBefore, c.SchemaBefore = before.digest, before.sig.Schema()
		}
		if after != nil {
			c.DigestAfter, c.SchemaAfter = after.digest, after.sig.Schema()
		}
		out = append(out, c)
	}
	// Both are sorted by name (intern), names unique within a content.
	i, j := 0, 0
	for i < len(pdefs) || j < len(cdefs) {
		switch {
		case j == len(cdefs) || i < len(pdefs) && pdefs[i].name < cdefs[j].name:
			row(pdefs[i].name, pdefs[i], nil)
			i++
		case i == len(pdefs) || cdefs[j].name < pdefs[i].name:
			row(cdefs[j].name, nil, cdefs[j])
			j++
		default:
			if pdefs[i] != cdefs[j] || pt != ct { // defs are interned by digest
				row(cdefs[j].name, pdefs[i], cdefs[j])
			}
			i++
			j++
		}
	}
	return out
}
