package registry

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// A registry's history is kept per server as points, the instants at which
// the server was listed with the content listed then (one per instant),
// and spans, the maximal runs of equal content, each with its own
// ServerState. Versions are the registry's instants (where any server's
// span starts, and the registry's first listing) with every server's
// state then. A listing changes at most the span it lands in and the next
// one's start, so applying it rebuilds only the versions of that interval:
// none for an unchanged relisting, one for a change at the end.

type point struct {
	at int64
	c  *content // nil: removed
}

type span struct {
	from int64
	st   *ServerState // nil: not connected
}

type server struct {
	name      string
	points    []point  // sorted by at
	events    []string // points[i]'s event_id, kept only WithChanges
	spans     []span   // sorted by from; consecutive spans differ in content
	compacted int      // len(points) after the last compaction
}

// registry is the writer's record of one registry; readers see view.
type registry struct {
	name     string
	servers  map[string]*server
	born     bool
	birth    int64 // the first listing's observed_at, whatever it did
	versions []*Version
	froms    []int64
	view     atomic.Pointer[timeline]
	n        counts
}

func newRegistry(name string) *registry {
	r := &registry{name: name, servers: map[string]*server{}}
	r.view.Store(&timeline{})
	return r
}

// outcome of applying one listing.
type outcome uint8

const (
	noop     outcome = iota // duplicate, or lost a same-instant tie
	relisted                // a new instant, content unchanged
	changed                 // the server's state changed
)

const forever = math.MaxInt64

// apply records that server was listed with content c at instant at, by
// event ev; changes, when the store reports them, learns what it alters.
func (r *registry) apply(s *Store, name string, at int64, c *content, ev string, changes *changeSet) outcome {
	sv := r.servers[name]
	if sv == nil {
		sv = &server{name: name}
		r.servers[name] = sv
	}
	ps := sv.points
	i := len(ps)
	if i > 0 && ps[i-1].at >= at {
		i, _ = slices.BinarySearchFunc(ps, at, func(p point, at int64) int { return cmp.Compare(p.at, at) })
	}
	if i < len(ps) && ps[i].at == at {
		if ps[i].c == c {
			if changes != nil && ev > sv.events[i] {
				// The greatest event_id of the content that stands names
				// the changes there, whatever the arrival order.
				changes.mark(r, sv, at)
				sv.events[i] = ev
			}
			return noop
		}
		if !wins(c, ps[i].c) {
			return noop
		}
		// Another content at an existing instant: rare (two listings of
		// one server in the same nanosecond), rebuilt whole.
		changes.mark(r, sv, at)
		ps[i].c = c
		if changes != nil {
			sv.events[i] = ev
		}
		r.rebuild()
		return changed
	}
	changes.mark(r, sv, at)
	sv.points = slices.Insert(ps, i, point{at, c})
	if changes != nil {
		sv.events = slices.Insert(sv.events, i, ev)
	}
	r.n.points++
	if !r.born || at < r.birth {
		r.born, r.birth = true, at
		r.rebuild()
		return changed
	}
	var pred *content
	if i > 0 {
		pred = sv.points[i-1].c
	}
	if c == pred {
		sv.compact(r, s.lateWindow)
		return relisted
	}
	r.change(sv, i)
	sv.compact(r, s.lateWindow)
	return changed
}

// change updates the spans and versions after the point at index i of sv
// made a change: its content differs from its predecessor's, which held
// until the next point before.
func (r *registry) change(sv *server, i int) {
	p := sv.points[i]
	at, c := p.at, p.c
	// j: the span that held at before (the last one starting before it).
	j := spanIndex(sv.spans, at) - 1
	var L *ServerState
	if j >= 0 {
		L = sv.spans[j].st
	}
	end := int64(forever) // where the versions to rebuild end
	var X *ServerState
	switch {
	case i+1 == len(sv.points):
		// Newest listing of the server: it holds from now on.
		X = r.newState(sv.name, c)
		sv.spans = slices.Insert(sv.spans, j+1, span{at, X})
	case j+1 < len(sv.spans) && sv.spans[j+1].from == sv.points[i+1].at:
		// The next point starts a span of its own.
		next := sv.spans[j+1]
		end = next.from
		if next.st.content() == c {
			X = next.st // the next span now starts here
			sv.spans[j+1].from = at
		} else {
			X = r.newState(sv.name, c)
			X.driftFrom(next.st)
			sv.spans = slices.Insert(sv.spans, j+1, span{at, X})
		}
	default:
		// The next point repeats what held before: from it on, that
		// content holds again, in a state of its own (L's drift is about
		// to change, Y's is L's as it was), until L's span ended.
		nextAt := sv.points[i+1].at
		var Y *ServerState
		end = nextAt + 1 // the server's absence from nextAt on is a new instant
		if L != nil {
			Y = r.cloneState(L)
			end = forever
			if j+1 < len(sv.spans) {
				end = sv.spans[j+1].from
			}
		}
		X = r.newState(sv.name, c)
		X.driftFrom(Y)
		sv.spans = slices.Insert(sv.spans, j+1, span{at, X}, span{nextAt, Y})
	}
	r.rebuildVersions(sv, at, end)
	// Published first: versions after the change must not see L's new
	// drift. Then the earlier states' drift, newest first, until one does
	// not change (the ones before it depend only on it).
	r.publish()
	succ := X
	for k := j; k >= 0; k-- {
		st := sv.spans[k].st
		if st == nil || !st.driftFrom(succ) {
			break
		}
		succ = st
	}
}

// spanIndex returns the index of the first span starting at or after at.
func spanIndex(spans []span, at int64) int {
	i, _ := slices.BinarySearchFunc(spans, at, func(s span, at int64) int { return cmp.Compare(s.from, at) })
	return i
}

// stateAt returns sv's state at instant t.
func (sv *server) stateAt(t int64) *ServerState {
	i, found := slices.BinarySearchFunc(sv.spans, t, func(s span, at int64) int { return cmp.Compare(s.from, at) })
	if found {
		return sv.spans[i].st
	}
	if i == 0 {
		return nil
	}
	return sv.spans[i-1].st
}

// rebuildVersions remakes the versions of instants in [a, b), where only
// sv's states changed: the instants there are the other servers' (every
// existing version's From in the interval) and sv's span starts.
func (r *registry) rebuildVersions(sv *server, a, b int64) {
	lo := sortInt(r.froms, a)
	hi := sortInt(r.froms, b)
	var instants []int64
	instants = append(instants, r.froms[lo:hi]...)
	for k := spanIndex(sv.spans, a); k < len(sv.spans) && sv.spans[k].from < b; k++ {
		instants = append(instants, sv.spans[k].from)
	}
	slices.Sort(instants)
	instants = slices.Compact(instants)
	var prev *Version
	if lo > 0 {
		prev = r.versions[lo-1]
	}
	var vs []*Version
	cur := map[string]*ServerState{}
	cover := lo - 1 // the old version covering the instant being built
	for _, t := range instants {
		for cover+1 < len(r.froms) && r.froms[cover+1] <= t {
			cover++
		}
		clear(cur)
		if cover >= 0 {
			for _, st := range r.versions[cover].servers {
				cur[st.Name] = st
			}
		}
		delete(cur, sv.name)
		if st := sv.stateAt(t); st != nil {
			cur[sv.name] = st
		}
		v := newVersion(r.name, t, cur)
		if prev != nil && prev.ID == v.ID {
			continue
		}
		vs = append(vs, v)
		prev = v
	}
	if hi < len(r.versions) && prev != nil && r.versions[hi].ID == prev.ID {
		hi++ // the next version was sv's span start only, now merged
	}
	r.splice(lo, hi, vs)
}

func sortInt(s []int64, x int64) int {
	i, _ := slices.BinarySearch(s, x)
	return i
}

// splice replaces versions[lo:hi] with vs. Appending at the end reuses
// the arrays: a published timeline holds its own length, and elements
// below it are never written again. Anything else copies.
func (r *registry) splice(lo, hi int, vs []*Version) {
	for _, v := range r.versions[lo:hi] {
		r.n.versions--
		r.n.versionTools -= int64(v.numTools())
	}
	for _, v := range vs {
		r.n.versions++
		r.n.versionTools += int64(v.numTools())
	}
	if lo == len(r.versions) {
		for _, v := range vs {
			r.versions = append(r.versions, v)
			r.froms = append(r.froms, v.From.UnixNano())
		}
		return
	}
	n := len(r.versions) - (hi - lo) + len(vs)
	versions := make([]*Version, 0, n+n/4)
	froms := make([]int64, 0, cap(versions))
	versions = append(versions, r.versions[:lo]...)
	froms = append(froms, r.froms[:lo]...)
	for _, v := range vs {
		versions = append(versions, v)
		froms = append(froms, v.From.UnixNano())
	}
	versions = append(versions, r.versions[hi:]...)
	froms = append(froms, r.froms[hi:]...)
	r.versions, r.froms = versions, froms
}

// rebuild remakes every span and version of the registry from its points:
// for a conflicting listing at an instant already listed, and for a new
// first listing.
func (r *registry) rebuild() {
	r.n.states, r.n.stateTools = 0, 0
	instants := []int64{r.birth}
	names := make([]string, 0, len(r.servers))
	for name, sv := range r.servers {
		names = append(names, name)
		sv.spans = sv.spans[:0]
		var last *content
		for _, p := range sv.points {
			if p.c == last {
				continue
			}
			last = p.c
			var st *ServerState
			if p.c != nil {
				st = r.newState(name, p.c)
			}
			sv.spans = append(sv.spans, span{p.at, st})
			instants = append(instants, p.at)
		}
		for k := len(sv.spans) - 2; k >= 0; k-- {
			if st := sv.spans[k].st; st != nil {
				st.driftFrom(sv.spans[k+1].st)
			}
		}
	}
	slices.Sort(names)
	slices.Sort(instants)
	instants = slices.Compact(instants)
	var vs []*Version
	cur := map[string]*ServerState{}
	for _, t := range instants {
		clear(cur)
		for _, name := range names {
			if st := r.servers[name].stateAt(t); st != nil {
				cur[name] = st
			}
		}
		v := newVersion(r.name, t, cur)
		if len(vs) > 0 && vs[len(vs)-1].ID == v.ID {
			continue
		}
		vs = append(vs, v)
	}
	r.versions, r.froms = nil, nil
	r.n.versions, r.n.versionTools = 0, 0
	r.splice(0, 0, vs)
	r.publish()
}

// compact drops, once a server's points have doubled since the last time,
// the unchanged relistings older than the late window behind its newest:
// they matter only to a listing that lands just before them.
func (sv *server) compact(r *registry, window int64) {
	if window <= 0 || len(sv.points) < 2*max(sv.compacted, 64) {
		return
	}
	horizon := sv.points[len(sv.points)-1].at - window
	kept := sv.points[:0]
	var last *content
	for k, p := range sv.points {
		if p.at < horizon && k > 0 && p.c == last {
			continue
		}
		last = p.c
		if sv.events != nil {
			sv.events[len(kept)] = sv.events[k]
		}
		kept = append(kept, p)
	}
	clear(sv.points[len(kept):])
	if sv.events != nil {
		clear(sv.events[len(kept):])
		sv.events = sv.events[:len(kept)]
	}
	r.n.points -= int64(len(sv.points) - len(kept))
	sv.points = kept
	sv.compacted = len(kept)
}

// newState makes the state of server name with content c: its own Tool
// values (their drift is this state's), sharing definitions.
func (r *registry) newState(name string, c *content) *ServerState {
	if c == nil {
		return nil
	}
	st := &ServerState{Name: name, Trust: c.trust, c: c, tools: make(map[string]*Tool, len(c.defs)), list: make([]*Tool, len(c.defs))}
	slab := make([]Tool, len(c.defs)) // one allocation, adjacent in memory
	for i, d := range c.defs {
		t := &slab[i]
		t.Server, t.Name, t.Trust, t.Digest, t.Description, t.Sig = name, d.name, c.trust, d.digest, d.description, d.sig
		st.list[i] = t
		st.tools[t.Name] = t
	}
	r.n.states++
	r.n.stateTools += int64(len(c.defs))
	return st
}

// cloneState is newState with st's drift.
func (r *registry) cloneState(st *ServerState) *ServerState {
	n := r.newState(st.Name, st.c)
	for i, t := range st.list {
		n.list[i].drift.Store(t.drift.Load())
	}
	return n
}

// driftFrom sets the drift of st's tools (st may be nil: no tools) from
// the server's next state (nil: the server was removed): a tool has
// drifted when the next state drops it, changes its digest, or it drifts
// there. It reports whether any flag changed.
func (st *ServerState) driftFrom(next *ServerState) bool {
	if st == nil {
		return false
	}
	changed := false
	for _, t := range st.list {
		var n *Tool
		if next != nil {
			n = next.tools[t.Name]
		}
		d := n == nil || n.Digest != t.Digest || n.drift.Load()
		if t.drift.Load() != d {
			t.drift.Store(d)
			changed = true
		}
	}
	return changed
}

func (st *ServerState) content() *content {
	if st == nil {
		return nil
	}
	return st.c
}

// timeline is what readers see of one registry.
type timeline struct {
	first    int64    // froms[0]
	only     *Version // the version, when there is exactly one
	versions []*Version
	froms    []int64 // versions[i].From in Unix nanoseconds, for search
}

// publish makes the registry's versions visible to readers.
func (r *registry) publish() {
	tl := &timeline{versions: r.versions[:len(r.versions):len(r.versions)], froms: r.froms[:len(r.froms):len(r.froms)]}
	if len(tl.versions) > 0 {
		tl.first = tl.froms[0]
	}
	if len(tl.versions) == 1 {
		tl.only = tl.versions[0]
	}
	r.view.Store(tl)
}

func newVersion(registry string, from int64, cur map[string]*ServerState) *Version {
	v := &Version{
		Registry: registry,
		From:     time.Unix(0, from).UTC(),
		servers:  make([]*ServerState, 0, len(cur)),
		byServer: make(map[string]*ServerState, len(cur)),
	}
	n := 0
	for _, st := range cur {
		v.servers = append(v.servers, st)
		v.byServer[st.Name] = st
		n += len(st.list)
	}
	slices.SortFunc(v.servers, func(a, b *ServerState) int { return cmp.Compare(a.Name, b.Name) })
	h := sha256.New()
	h.Write([]byte(registry))
	for _, s := range v.servers {
		h.Write([]byte{0})
		h.Write([]byte(s.Name))
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(s.Trust)))
		for _, t := range s.list {
			h.Write([]byte{1})
			h.Write([]byte(t.Name))
			h.Write([]byte{1})
			h.Write([]byte(t.Digest))
		}
	}
	v.ID = "rv-" + hex.EncodeToString(h.Sum(nil)[:10])
	if n > smallVersion {
		return v // indexed on first use
	}
	byName := map[string][]*Tool{}
	for _, s := range v.servers {
		for _, t := range s.list {
			byName[t.Name] = append(byName[t.Name], t)
			v.all = append(v.all, t)
		}
	}
	names := make([]string, 0, len(byName))
	for name := range byName {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	v.nameRefs = make([]nameRef, 0, len(names)) // never nil: scanned, never the map
	for _, name := range names {
		v.nameRefs = append(v.nameRefs, nameRef{off: uint32(b.Len()), len: uint32(len(name)), tools: byName[name]})
		b.WriteString(name)
	}
	v.names = b.String()
	return v
}
