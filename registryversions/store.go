package registryversions

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// DefaultCacheSize is the default number of compiled signatures kept.
const DefaultCacheSize = 1 << 16

// Issue is something wrong or unenforced in an applied listing. Issues do
// not stop the listing from being applied.
type Issue struct {
	EventID  string
	Registry string
	Server   string
	Tool     string
	Detail   string
}

func (i Issue) String() string {
	return fmt.Sprintf("listing %s (%s/%s) tool %q: %s", i.EventID, i.Registry, i.Server, i.Tool, i.Detail)
}

// Store holds the listing history of every registry. Apply is safe for
// concurrent use with itself and with readers; readers use Snapshot.
type Store struct {
	mu    sync.Mutex // serializes writers
	regs  map[string]*history
	view  atomic.Pointer[Snapshot]
	cache *lru.Cache[string, *signature.Signature]
	// digests maps a tool's definition as listed (the SHA-256 of its name
	// and raw inputSchema) to its digest: a history repeats the same
	// definitions listing after listing (every session's tools/list), and
	// canonicalizing one (JCS) costs far more than hashing it. A
	// cryptographic key, because listings come from servers of every trust
	// level: a definition must not be able to borrow another's digest.
	digests *lru.Cache[[sha256.Size]byte, string]

	compiled atomic.Int64 // signatures compiled (cache misses)
}

// Option configures a Store.
type Option func(*Store)

// WithCacheSize sets how many compiled signatures are kept (default
// DefaultCacheSize). A signature evicted and seen again is recompiled.
func WithCacheSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.cache, _ = lru.New[string, *signature.Signature](n)
		}
	}
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{regs: map[string]*history{}}
	s.cache, _ = lru.New[string, *signature.Signature](DefaultCacheSize)
	s.digests, _ = lru.New[[sha256.Size]byte, string](DefaultCacheSize)
	for _, o := range opts {
		o(s)
	}
	s.view.Store(&Snapshot{timelines: map[string]timelineRef{}})
	return s
}

// Compiled returns how many signatures the store has compiled: a measure
// of the cache's work.
func (s *Store) Compiled() int64 { return s.compiled.Load() }

// Snapshot returns the current immutable view of every registry.
func (s *Store) Snapshot() *Snapshot { return s.view.Load() }

// At is shorthand for s.Snapshot().At.
func (s *Store) At(registry string, t time.Time) *Version {
	return s.Snapshot().At(registry, t)
}

// Apply applies listing events, in any order, and publishes a new view.
// An event whose event_id was already applied to its registry is skipped
// (Kafka redelivers). It returns what it found wrong or unenforced.
func (s *Store) Apply(ls ...*schema.Listing) []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	var issues []Issue
	dirty := map[string]*history{}
	fresh := make([]*schema.Listing, 0, len(ls))
	for _, l := range ls {
		h := s.regs[l.Registry]
		if h == nil {
			h = &history{registry: l.Registry, ids: map[string]bool{}}
			s.regs[l.Registry] = h
		}
		if h.ids[l.EventID] {
			continue
		}
		h.ids[l.EventID] = true
		fresh = append(fresh, l)
	}
	tools := s.tools(fresh)
	for i, l := range fresh {
		e := &entry{l: l}
		for _, t := range tools[i] {
			issues = append(issues, t.issues...)
			if t.tool != nil {
				e.tools = append(e.tools, t.tool)
			}
		}
		h := s.regs[l.Registry]
		h.insert(e)
		dirty[l.Registry] = h
	}
	if len(dirty) == 0 {
		return issues
	}
	old := s.view.Load()
	next := &Snapshot{timelines: maps.Clone(old.timelines)}
	for reg, h := range dirty {
		tl := h.build()
		ref := timelineRef{tl: tl}
		if len(tl.versions) > 0 {
			ref.first = tl.froms[0]
		}
		if len(tl.versions) == 1 {
			ref.only = tl.versions[0]
		}
		next.timelines[reg] = ref
	}
	s.view.Store(next)
	return issues
}

// toolResult is one tool of a listing, prepared for the store.
type toolResult struct {
	tool   *Tool // nil: skipped
	issues []Issue
}

// tools prepares every tool of ls, listing by listing. The digests (JSON
// canonicalization) and the compiled signatures are most of the cost of
// applying a listing, and a new instance applies the whole listings
// history before it decides any call: both are spread over up to
// GOMAXPROCS goroutines when there are enough tools. Each distinct digest
// missing from the cache is compiled once.
func (s *Store) tools(ls []*schema.Listing) [][]toolResult {
	var jobs []toolJob
	for i, l := range ls {
		for j := range l.Tools {
			jobs = append(jobs, toolJob{l: l, t: &l.Tools[j], listing: i})
		}
	}
	par.For(len(jobs), minPerWorker, func(k int) {
		j := &jobs[k]
		j.digest, j.err = s.digest(j.t.Name, j.t.InputSchema)
	})
	// The signatures to compile: one job per digest not in the cache.
	first := map[string]int{}
	var compile []int
	for k := range jobs {
		j := &jobs[k]
		if j.err != nil {
			continue
		}
		if sig, ok := s.cache.Get(j.digest); ok {
			j.sig = sig
			continue
		}
		if _, ok := first[j.digest]; ok {
			continue
		}
		first[j.digest] = k
		compile = append(compile, k)
	}
	par.For(len(compile), minPerWorker, func(i int) {
		j := &jobs[compile[i]]
		j.sig, j.sigErr = signature.Compile(j.t.InputSchema)
	})
	for _, k := range compile {
		if j := &jobs[k]; j.sigErr == nil {
			s.compiled.Add(1)
			s.cache.Add(j.digest, j.sig)
		}
	}

	out := make([][]toolResult, len(ls))
	for i, l := range ls {
		out[i] = make([]toolResult, 0, len(l.Tools))
	}
	for k := range jobs {
		j := &jobs[k]
		if j.err == nil && j.sig == nil {
			f := &jobs[first[j.digest]]
			j.sig, j.sigErr = f.sig, f.sigErr
		}
		out[j.listing] = append(out[j.listing], j.result())
	}
	return out
}

// digest is Digest, remembered by the definition's raw bytes.
func (s *Store) digest(name string, inputSchema []byte) (string, error) {
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.Write([]byte(name))
	h.Write(inputSchema)
	var key [sha256.Size]byte
	h.Sum(key[:0])
	if d, ok := s.digests.Get(key); ok {
		return d, nil
	}
	d, err := Digest(name, inputSchema)
	if err == nil {
		s.digests.Add(key, d)
	}
	return d, err
}

// minPerWorker keeps a small apply (a live listing change) on the
// caller's goroutine.
const minPerWorker = 32

// toolJob is one tool of a listing being prepared.
type toolJob struct {
	l       *schema.Listing
	t       *schema.Tool
	listing int // index of l in the applied batch
	digest  string
	err     error // from Digest
	sig     *signature.Signature
	sigErr  error
}

// result is the tool as the store keeps it, or the issue that skips it.
func (j *toolJob) result() toolResult {
	l, t := j.l, j.t
	issue := func(detail string) Issue {
		return Issue{EventID: l.EventID, Registry: l.Registry, Server: l.Server, Tool: t.Name, Detail: detail}
	}
	if err := cmp.Or(j.err, j.sigErr); err != nil {
		return toolResult{issues: []Issue{issue("tool skipped: " + err.Error())}}
	}
	sig, d := j.sig, j.digest
	var issues []Issue
	for _, u := range sig.Unsupported() {
		issues = append(issues, issue("inputSchema"+u.String()))
	}
	return toolResult{&Tool{Server: l.Server, Name: t.Name, Trust: l.Trust, Digest: d, Description: t.Description, Sig: sig}, issues}
}

// entry is one applied listing with its tools compiled.
type entry struct {
	l     *schema.Listing
	tools []*Tool
}

// history is the writer-side record of one registry.
type history struct {
	registry string
	ids      map[string]bool
	events   []*entry // sorted by (observed_at, event_id)
}

func (h *history) insert(e *entry) {
	i, _ := slices.BinarySearchFunc(h.events, e, func(a, b *entry) int {
		return cmp.Or(a.l.ObservedAt.Compare(b.l.ObservedAt), cmp.Compare(a.l.EventID, b.l.EventID))
	})
	h.events = slices.Insert(h.events, i, e)
}

// stateAt is one server's state from a moment on; nil state: not connected.
type stateAt struct {
	at    time.Time
	state *ServerState
}

// timeline is the immutable, read-side history of one registry.
type timeline struct {
	versions []*Version           // sorted by From; consecutive IDs differ
	froms    []int64              // versions[i].From in Unix nanoseconds, for search
	servers  map[string][]stateAt // per server, changes only
}

// build replays the registry's events in event time. Events that share an
// observed_at are applied together (in event_id order) and make one version.
func (h *history) build() *timeline {
	tl := &timeline{servers: map[string][]stateAt{}}
	cur := map[string]*ServerState{}
	for i := 0; i < len(h.events); {
		at := h.events[i].l.ObservedAt
		for ; i < len(h.events) && h.events[i].l.ObservedAt.Equal(at); i++ {
			e := h.events[i]
			name := e.l.Server
			var st *ServerState
			if e.l.Op == schema.OpSnapshot {
				st = newServerState(name, e.l.Trust, e.tools)
			}
			prev := cur[name]
			if sameState(prev, st) {
				continue
			}
			if st == nil {
				delete(cur, name)
			} else {
				cur[name] = st
			}
			tl.servers[name] = append(tl.servers[name], stateAt{at: at, state: st})
		}
		v := newVersion(h.registry, at, cur)
		if n := len(tl.versions); n > 0 && tl.versions[n-1].ID == v.ID {
			continue
		}
		tl.versions = append(tl.versions, v)
		tl.froms = append(tl.froms, at.UnixNano())
	}
	for _, chain := range tl.servers {
		markDrift(chain)
	}
	return tl
}

// markDrift sets Tool.Drift along one server's chain of states, last to
// first: a tool has drifted when the next state drops it, changes its
// digest, or drifts it later. Drift is a property of the version current
// at emission: every listing after emitted_at is after that version began.
func markDrift(chain []stateAt) {
	for k := len(chain) - 2; k >= 0; k-- {
		if chain[k].state == nil {
			continue
		}
		next := chain[k+1].state
		for _, t := range chain[k].state.list {
			var n *Tool
			if next != nil {
				n = next.tools[t.Name]
			}
			t.Drift = n == nil || n.Digest != t.Digest || n.Drift
		}
	}
}

// newServerState copies the tools: each build owns its Tool values, so it
// can set Drift without touching what readers of an older view hold.
func newServerState(name string, trust int, tools []*Tool) *ServerState {
	s := &ServerState{Name: name, Trust: trust, tools: make(map[string]*Tool, len(tools))}
	s.list = make([]*Tool, len(tools))
	slab := make([]Tool, len(tools)) // one allocation, adjacent in memory
	for i, t := range tools {
		slab[i] = *t
		s.list[i] = &slab[i]
	}
	slices.SortFunc(s.list, func(a, b *Tool) int { return cmp.Compare(a.Name, b.Name) })
	for _, t := range s.list {
		s.tools[t.Name] = t
	}
	return s
}

// sameState reports whether two states have the same trust and digests; a
// description-only change is the same state.
func sameState(a, b *ServerState) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Trust != b.Trust || len(a.list) != len(b.list) {
		return false
	}
	for i := range a.list {
		if a.list[i].Name != b.list[i].Name || a.list[i].Digest != b.list[i].Digest {
			return false
		}
	}
	return true
}

func newVersion(registry string, from time.Time, cur map[string]*ServerState) *Version {
	v := &Version{
		Registry: registry,
		From:     from,
		servers:  slices.SortedFunc(maps.Values(cur), func(a, b *ServerState) int { return cmp.Compare(a.Name, b.Name) }),
		byServer: maps.Clone(cur),
		byName:   map[string][]*Tool{},
	}
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
			v.byName[t.Name] = append(v.byName[t.Name], t)
			v.all = append(v.all, t)
		}
	}
	v.ID = "rv-" + hex.EncodeToString(h.Sum(nil)[:10])
	if len(v.byName) <= smallVersion {
		var b strings.Builder
		for _, name := range slices.Sorted(maps.Keys(v.byName)) {
			v.nameRefs = append(v.nameRefs, nameRef{off: uint32(b.Len()), len: uint32(len(name)), tools: v.byName[name]})
			b.WriteString(name)
		}
		v.names = b.String()
		if v.nameRefs == nil {
			v.nameRefs = []nameRef{} // empty version: still scanned, never the map
		}
	}
	return v
}

// Snapshot is an immutable view of every registry's history.
type Snapshot struct {
	timelines map[string]timelineRef
}

// timelineRef is held by value in the snapshot's map: most registries have
// one version, and their lookups then end in the map's own slot instead of
// following three more pointers (resolution is bound by memory latency).
type timelineRef struct {
	first int64    // froms[0]
	only  *Version // the version, when there is exactly one
	tl    *timeline
}

// At returns the version of the registry current at t, or nil when no
// listing of that registry was observed at or before t.
func (s *Snapshot) At(registry string, t time.Time) *Version {
	ref, ok := s.timelines[registry]
	ns := t.UnixNano()
	if !ok || ns < ref.first || ref.tl == nil || len(ref.tl.versions) == 0 {
		return nil
	}
	if ref.only != nil {
		return ref.only
	}
	// The first version that begins after t; the one before it is current.
	froms := ref.tl.froms
	i, j := 0, len(froms)
	for i < j {
		h := int(uint(i+j) >> 1)
		if froms[h] <= ns {
			i = h + 1
		} else {
			j = h
		}
	}
	return ref.tl.versions[i-1]
}

// Drift reports whether a listing observed after t changed the digest of
// that server's tool, or dropped it (snapshot without it, or remove).
func (s *Snapshot) Drift(registry, server, tool, digest string, t time.Time) bool {
	v := s.At(registry, t)
	if v == nil || v.Server(server) == nil || v.Server(server).Tool(tool) == nil {
		return false
	}
	tt := v.Server(server).Tool(tool)
	return tt.Digest != digest || tt.Drift
}

// Registries returns the number of registries known.
func (s *Snapshot) Registries() int { return len(s.timelines) }

// Versions returns how many distinct versions the registry has had.
func (s *Snapshot) Versions(registry string) int {
	if ref, ok := s.timelines[registry]; ok {
		return len(ref.tl.versions)
	}
	return 0
}
