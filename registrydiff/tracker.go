package registrydiff

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/schema"
)

// Tracker turns listing events, applied in any order, into the registry
// history: for every listing, what it changed about each tool of its
// server against the server's previous listing in event time. It keeps
// every server's listings as points in time and every distinct
// definition once. A relisting that changes nothing costs one point
// (about 40 bytes) only while it is within the late window behind its
// server's newest listing (registryversions.DefaultLateWindow, as the
// registry store): older ones are dropped, so that memory grows with
// changes, not with routine relistings. A listing later than that which
// changes its server's state holds until the server's next retained
// listing, the registry store's rule; the two compact at their own
// moments, so for such a listing they may retain different relistings.
//
// A listing that arrives after a later one of its server (Kafka delivers
// the listings topic's partitions in any order, and hosts send late) is
// put in its place: the changes at its time are computed, and those of
// the server's next listing, whose predecessor it now is, are computed
// again. Apply returns the rows to write for both, and marks Deleted the
// rows of the next listing that no longer change anything, so that a
// store keeping the last write of each key holds the history of every
// listing applied so far, whatever the arrival order.
//
// Two listings of one server with the same observed_at: the one with the
// greater event_id stands (registryversions on main applies them in
// event_id order). A repeated event is ignored.
//
// A Tracker is not safe for concurrent use.
type Tracker struct {
	servers map[serverKey]*timeline
	// defs interns definitions by name and raw inputSchema: a map
	// compares whole keys, so no definition can pass for another.
	defs map[string]*definition
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker {
	return &Tracker{servers: map[serverKey]*timeline{}, defs: map[string]*definition{}}
}

type serverKey struct{ registry, server string }

// definition is one tool definition as listed (name and raw inputSchema),
// its digest computed when a change needs it.
type definition struct {
	name   string
	schema []byte
	digest string
	done   bool
}

func (d *definition) Digest() string {
	if !d.done {
		d.done = true
		if dg, err := schema.Digest(d.name, d.schema); err == nil {
			d.digest = dg
		}
	}
	return d.digest
}

// state is a server's tool set as one snapshot listed it.
type state struct {
	trust int
	tools map[string]*definition
}

func (s *state) equal(o *state) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.trust != o.trust || len(s.tools) != len(o.tools) {
		return false
	}
	for name, d := range s.tools {
		if o.tools[name] != d { // definitions are interned
			return false
		}
	}
	return true
}

type point struct {
	at    int64  // observed_at, Unix nanoseconds
	event string // event_id
	st    *state // nil: the server was removed
}

type timeline struct {
	points  []point // sorted by at
	compact int     // compact the points when there are this many
}

// minCompact is the fewest points a timeline compacts at: compaction is
// a pass over the points, done when their number has doubled.
const minCompact = 64

// maybeCompact drops the points that repeat their predecessor's state
// and are older than the late window behind the newest point.
func (tl *timeline) maybeCompact(window int64) {
	if len(tl.points) < max(tl.compact, minCompact) {
		return
	}
	horizon := tl.points[len(tl.points)-1].at - window
	kept := tl.points[:1]
	for _, p := range tl.points[1:] {
		if p.at < horizon && p.st == kept[len(kept)-1].st {
			continue // an unchanged relisting outside the window
		}
		kept = append(kept, p)
	}
	clear(tl.points[len(kept):])
	tl.points = kept
	tl.compact = 2 * len(kept)
}

type pointKey struct {
	sk serverKey
	at int64
}

// Apply applies listings and returns the rows of the registry history to
// write: the changes at every listing the batch added or whose
// predecessor it changed, in SortChanges order.
func (t *Tracker) Apply(ls ...*schema.Listing) []Change {
	before := map[pointKey]map[string]Change{}
	var touched []pointKey
	mark := func(k pointKey) {
		if _, ok := before[k]; !ok {
			before[k] = t.changesAt(k)
			touched = append(touched, k)
		}
	}
	for _, l := range ls {
		sk := serverKey{l.Registry, l.Server}
		tl := t.servers[sk]
		if tl == nil {
			tl = &timeline{}
			t.servers[sk] = tl
		}
		at := l.ObservedAt.UnixNano()
		i, found := slices.BinarySearchFunc(tl.points, at, func(p point, at int64) int { return cmp.Compare(p.at, at) })
		if found && l.EventID <= tl.points[i].event {
			continue // a repeat, or the loser of a same-time conflict
		}
		mark(pointKey{sk, at})
		next := i
		if found {
			next = i + 1
		}
		if next < len(tl.points) {
			mark(pointKey{sk, tl.points[next].at})
		}
		var prev *state
		if i > 0 {
			prev = tl.points[i-1].st
		}
		p := point{at: at, event: l.EventID, st: t.state(l, prev)}
		if found {
			tl.points[i] = p
		} else {
			tl.points = slices.Insert(tl.points, i, p)
		}
		tl.maybeCompact(int64(registryversions.DefaultLateWindow))
	}
	var out []Change
	for _, k := range touched {
		after := t.changesAt(k)
		for _, c := range after {
			out = append(out, c)
		}
		for tool, c := range before[k] {
			if _, ok := after[tool]; !ok {
				c.Deleted = true
				out = append(out, c)
			}
		}
	}
	SortChanges(out)
	return out
}

// state is l's tool set, interned: prev itself when l lists the same.
func (t *Tracker) state(l *schema.Listing, prev *state) *state {
	if l.Op == schema.OpRemove {
		return nil
	}
	s := &state{trust: l.Trust, tools: make(map[string]*definition, len(l.Tools))}
	for i := range l.Tools {
		tool := &l.Tools[i]
		s.tools[tool.Name] = t.definition(tool.Name, tool.InputSchema)
	}
	if s.equal(prev) {
		return prev
	}
	return s
}

func (t *Tracker) definition(name string, inputSchema []byte) *definition {
	prefix := strconv.Itoa(len(name)) + ":" + name // length-prefixed: no two pairs make one key
	key := prefix + string(inputSchema)
	if d, ok := t.defs[key]; ok {
		return d
	}
	d := &definition{name: name, schema: []byte(key[len(prefix):])}
	t.defs[key] = d
	return d
}

// changesAt is what the listing at k changed against the server's
// previous listing, by tool; nothing when there is no listing at k.
func (t *Tracker) changesAt(k pointKey) map[string]Change {
	tl := t.servers[k.sk]
	if tl == nil {
		return nil
	}
	i, found := slices.BinarySearchFunc(tl.points, k.at, func(p point, at int64) int { return cmp.Compare(p.at, at) })
	if !found {
		return nil
	}
	var prev *state
	if i > 0 {
		prev = tl.points[i-1].st
	}
	cur := tl.points[i]
	changes := diffStates(prev, cur.st)
	for tool, c := range changes {
		c.Registry, c.Server, c.Tool = k.sk.registry, k.sk.server, tool
		c.ObservedAt = time.Unix(0, k.at).UTC()
		c.EventID = cur.event
		changes[tool] = c
	}
	return changes
}

// diffStates is what changed from one state of a server to the next, by
// tool (registry, server, time and event left to the caller).
func diffStates(prev, cur *state) map[string]Change {
	if prev == cur {
		return nil
	}
	var pt, ct int
	var ptools, ctools map[string]*definition
	if prev != nil {
		pt, ptools = prev.trust, prev.tools
	}
	if cur != nil {
		ct, ctools = cur.trust, cur.tools
	}
	out := map[string]Change{}
	for _, name := range slices.Sorted(maps.Keys(ctools)) {
		d := ctools[name]
		c := Change{TrustBefore: pt, TrustAfter: ct, DigestAfter: d.Digest()}
		old, ok := ptools[name]
		switch {
		case !ok:
			c.Kind = Added
			c.Diff, _ = DiffSchemas(emptyObject, d.schema)
			c.Summary = join("added", c.Diff.Summary())
		case old == d || old.Digest() == d.Digest():
			if pt == ct {
				continue
			}
			c.Kind, c.DigestBefore = Trust, old.Digest()
			c.Summary = "trust " + strconv.Itoa(pt) + " -> " + strconv.Itoa(ct)
		default:
			c.Kind, c.DigestBefore = Changed, old.Digest()
			diff, err := DiffSchemas(old.schema, d.schema)
			if err != nil {
				c.Summary = "changed (" + err.Error() + ")"
			} else {
				c.Diff, c.Summary = diff, join("changed", diff.Summary())
			}
			if pt != ct {
				c.Summary += ", trust " + strconv.Itoa(pt) + " -> " + strconv.Itoa(ct)
			}
		}
		out[name] = c
	}
	for name, d := range ptools {
		if _, ok := ctools[name]; !ok {
			out[name] = Change{Kind: Removed, TrustBefore: pt, TrustAfter: ct, DigestBefore: d.Digest(), Summary: "removed"}
		}
	}
	return out
}

// emptyObject is what an added tool's schema is compared with: its
// properties show as added, its object type as no change.
var emptyObject = []byte(`{"type":"object"}`)

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + ": " + b
}
