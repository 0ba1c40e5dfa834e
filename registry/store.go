package registry

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// Applier applies listings: *Store, or anything that keeps more of them
// (the review catalog of package approvals/review). The loaders of
// listings (check's of a file, registry/topic's of the topic) apply to
// one.
type Applier interface {
	Apply(ls ...*schema.Listing) []Issue
}

var _ Applier = (*Store)(nil)

// DefaultCacheSize is the default number of listed definitions remembered
// by their raw bytes.
const DefaultCacheSize = 1 << 16

// DefaultLateWindow is the default of WithLateWindow.
const DefaultLateWindow = 24 * time.Hour

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
	mu   sync.Mutex // serializes writers
	regs map[string]*registry
	view atomic.Pointer[Snapshot] // one per directory: Snapshot does not allocate

	// defs are the distinct tool definitions, by digest; contents the
	// distinct server states (trust and definitions), by key. A relisting
	// finds both and adds nothing.
	defs     map[string]*def
	contents map[[sha256.Size]byte]*content
	// raw maps a definition as listed (its name and raw inputSchema) to
	// its def: canonicalizing (JCS) costs far more than hashing. Listings
	// come from servers of every trust level, so a definition must not be
	// able to borrow another's digest: a hit is confirmed by comparing the
	// bytes, and the seeded hash only finds the entry (cheaper than a
	// cryptographic hash, which a relisting paid on all its bytes).
	raw  *lru.Cache[uint64, listed]
	seed maphash.Seed

	lateWindow int64 // ns; 0: every relisting instant is kept
	sigOpts    signature.Options
	changes    func([]Change) // WithChanges; nil: no event_id is kept

	compiled atomic.Int64
	stats    Stats  // under mu
	n        counts // under mu: all registries
	statsPub atomic.Pointer[Stats]
}

// Option configures a Store.
type Option func(*Store)

// WithCacheSize sets how many listed definitions are remembered by their
// raw bytes (default DefaultCacheSize). A definition evicted and listed
// again is canonicalized again (its signature is not recompiled).
func WithCacheSize(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.raw, _ = lru.New[uint64, listed](n)
		}
	}
}

// WithLateWindow sets how late, in event time, a listing may be and still
// be applied exactly: how far behind the newest listing of its server
// (default DefaultLateWindow). The store keeps the instants of unchanged
// relistings only within that window behind each server's newest listing:
// a listing older than that which changes the server's state holds until
// the server's next retained listing, where with every relisting kept it
// would hold only until the next relisting. d <= 0 keeps every instant
// (memory then grows by 16 bytes per distinct relisting instant).
func WithLateWindow(d time.Duration) Option {
	return func(s *Store) { s.lateWindow = max(int64(d), 0) }
}

// WithSignatureOptions sets how the store compiles signatures (for
// example signature.Options.Formats, which asserts format). Every
// instance that must decide alike needs the same options; the resolver's
// policy stamp names them (resolve.Resolver.Formats).
func WithSignatureOptions(o signature.Options) Option {
	return func(s *Store) { s.sigOpts = o }
}

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		regs:       map[string]*registry{},
		defs:       map[string]*def{},
		contents:   map[[sha256.Size]byte]*content{},
		lateWindow: int64(DefaultLateWindow),
	}
	s.raw, _ = lru.New[uint64, listed](DefaultCacheSize)
	s.seed = maphash.MakeSeed()
	for _, o := range opts {
		o(s)
	}
	s.view.Store(&Snapshot{dir: &directory{main: map[string]*registry{}}})
	s.statsPub.Store(&Stats{})
	return s
}

// Compiled returns how many signatures the store has compiled: one per
// distinct definition.
func (s *Store) Compiled() int64 { return s.compiled.Load() }

// Snapshot returns a view of every registry (see Snapshot).
func (s *Store) Snapshot() *Snapshot { return s.view.Load() }

// At is shorthand for s.Snapshot().At.
func (s *Store) At(registry string, t time.Time) *Version {
	return s.Snapshot().At(registry, t)
}

// Stats is the size of a store.
type Stats struct {
	Listings    int64 // listing events applied, duplicates included
	Duplicates  int64 // listings that changed nothing: same server, observed_at and content as one applied before, or losing a same-instant tie
	Relistings  int64 // listings at a new instant whose content was already the server's
	Points      int64 // relisting instants kept (see WithLateWindow)
	Registries  int64
	Versions    int64 // registry versions, all registries
	States      int64 // server states (one per change of a server)
	Contents    int64 // distinct listed server states
	Definitions int64 // distinct tool definitions
	Bytes       int64 // estimated memory held by the history
}

// Stats returns the store's size after the last Apply.
func (s *Store) Stats() Stats { return *s.statsPub.Load() }

// def is one tool definition: a name and an inputSchema, known by digest.
// The schema's text, as first listed, is sig.Schema() (checkpoints write
// it).
type def struct {
	name, digest, description string
	sig                       *signature.Signature
}

// addDef installs a new definition.
func (s *Store) addDef(d *def) {
	s.defs[d.digest] = d
	s.compiled.Add(1)
	s.n.defBytes += int64(10*len(d.sig.Schema()) + len(d.description) + len(d.name) + 200)
}

// content is one server state as listed: trust and definitions, sorted
// by name. Interned by key, so that equal states are one pointer.
type content struct {
	key   [sha256.Size]byte
	trust int
	defs  []*def
}

// wins orders two different listings of one server at the same instant:
// a remove beats a snapshot, else the greater content key wins. It depends
// on the contents only, so the outcome does not depend on which arrived
// first, and the store need not remember event ids.
func wins(a, b *content) bool {
	if a == nil || b == nil {
		return a == nil && b != nil
	}
	return string(a.key[:]) > string(b.key[:])
}

// Apply applies listing events, in any order, and publishes what changed.
// A listing whose server already has the same content at the same
// observed_at changes nothing (Kafka redelivers; hosts relist). It returns
// what it found wrong or unenforced in definitions new to the store.
func (s *Store) Apply(ls ...*schema.Listing) []Issue {
	if len(ls) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, issues := s.prepare(ls)
	// In event time order, most listings extend their server's history at
	// its end, the cheapest case; the outcome does not depend on the order.
	order := make([]int, len(ls))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return ls[a].ObservedAt.Compare(ls[b].ObservedAt) })
	var changes *changeSet
	if s.changes != nil {
		changes = &changeSet{}
	}
	newRegs := map[string]*registry{}
	for _, i := range order {
		l := ls[i]
		r := s.regs[l.Registry]
		if r == nil {
			r = newRegistry(l.Registry)
			s.regs[l.Registry] = r
			newRegs[l.Registry] = r
			s.stats.Registries++
		}
		s.stats.Listings++
		before := r.n
		res := r.apply(s, l.Server, l.ObservedAt.UnixNano(), cs[i], l.EventID, changes)
		s.n.add(r.n, before)
		switch res {
		case noop:
			s.stats.Duplicates++
		case relisted:
			s.stats.Relistings++
		}
	}
	if len(newRegs) > 0 {
		s.view.Store(&Snapshot{dir: s.view.Load().dir.with(newRegs)})
	}
	s.publishStats()
	if changes != nil {
		if out := changes.changes(); len(out) > 0 {
			s.changes(out)
		}
	}
	return issues
}

func (s *Store) publishStats() {
	st := s.stats
	st.Points, st.States, st.Versions = s.n.points, s.n.states, s.n.versions
	st.Definitions, st.Contents = int64(len(s.defs)), int64(len(s.contents))
	st.Bytes = s.bytes()
	s.statsPub.Store(&st)
}

// prepare finds the content of every listing: digests (remembered by raw
// bytes), definitions (compiled once each, on every core when a batch
// brings many) and the interned state. A remove's content is nil.
func (s *Store) prepare(ls []*schema.Listing) ([]*content, []Issue) {
	type job struct {
		l       *schema.Listing
		t       *schema.Tool
		listing int
		key     uint64
		d       *def
		digest  string
		err     error
		sigErr  error
		sig     *signature.Signature
	}
	var jobs []job
	for i, l := range ls {
		if l.Op != schema.OpSnapshot {
			continue
		}
		for j := range l.Tools {
			jobs = append(jobs, job{l: l, t: &l.Tools[j], listing: i})
		}
	}
	// Hashing every listed schema is most of a relisting's cost.
	par.For(len(jobs), minPerWorker, func(k int) {
		j := &jobs[k]
		j.key = s.rawKey(j.t.Name, j.t.InputSchema)
	})
	var misses []int
	for k := range jobs {
		j := &jobs[k]
		if e, ok := s.raw.Get(j.key); ok && e.name == j.t.Name && bytes.Equal(e.schema, j.t.InputSchema) {
			j.d = e.d
			continue
		}
		misses = append(misses, k)
	}
	par.For(len(misses), minPerWorker, func(i int) {
		j := &jobs[misses[i]]
		j.digest, j.err = schema.Digest(j.t.Name, j.t.InputSchema)
	})
	// Distinct new digests are compiled once each.
	first := map[string]int{}
	var compile []int
	for _, k := range misses {
		j := &jobs[k]
		if j.err != nil {
			continue
		}
		if d := s.defs[j.digest]; d != nil {
			j.d = d
			s.raw.Add(j.key, listed{j.t.Name, j.t.InputSchema, d})
			continue
		}
		if _, ok := first[j.digest]; !ok {
			first[j.digest] = k
			compile = append(compile, k)
		}
	}
	par.For(len(compile), minPerWorker, func(i int) {
		j := &jobs[compile[i]]
		j.sig, j.sigErr = signature.CompileWith(j.t.InputSchema, s.sigOpts)
	})
	var issues []Issue
	issue := func(j *job, detail string) {
		issues = append(issues, Issue{EventID: j.l.EventID, Registry: j.l.Registry, Server: j.l.Server, Tool: j.t.Name, Detail: detail})
	}
	for _, k := range compile {
		j := &jobs[k]
		if j.sigErr != nil {
			continue
		}
		d := &def{name: j.t.Name, digest: j.digest, description: j.t.Description, sig: j.sig}
		s.addDef(d)
		j.d = d
		for _, u := range j.sig.Unsupported() {
			issue(j, "inputSchema"+u.String())
		}
	}
	for _, k := range misses {
		j := &jobs[k]
		if j.d == nil && j.err == nil {
			f := &jobs[first[j.digest]]
			j.d, j.sigErr = f.d, f.sigErr
		}
		if j.d != nil {
			s.raw.Add(j.key, listed{j.t.Name, j.t.InputSchema, j.d})
		}
	}

	cs := make([]*content, len(ls))
	var defs []*def
	k := 0
	for i, l := range ls {
		if l.Op != schema.OpSnapshot {
			continue
		}
		defs = defs[:0]
		for range l.Tools {
			j := &jobs[k]
			k++
			if err := cmp.Or(j.err, j.sigErr); err != nil {
				issue(j, "tool skipped: "+err.Error())
				continue
			}
			defs = append(defs, j.d)
		}
		cs[i] = s.intern(l.Trust, defs)
	}
	return cs, issues
}

// listed is a definition as listed, the raw cache's entry: its bytes
// confirm a hit.
type listed struct {
	name   string
	schema []byte
	d      *def
}

// rawKey is the seeded hash of a definition as listed.
func (s *Store) rawKey(name string, inputSchema []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	h.WriteString(name)
	h.Write(inputSchema)
	return h.Sum64()
}

// intern returns the content of a snapshot with these definitions (in any
// order; the slice is not kept).
func (s *Store) intern(trust int, defs []*def) *content {
	slices.SortFunc(defs, func(a, b *def) int { return cmp.Compare(a.name, b.name) })
	h := sha256.New()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(int64(trust)))
	h.Write(n[:])
	for _, d := range defs {
		binary.LittleEndian.PutUint64(n[:], uint64(len(d.name)))
		h.Write(n[:])
		h.Write([]byte(d.name))
		h.Write([]byte(d.digest))
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	if c := s.contents[key]; c != nil {
		return c
	}
	c := &content{key: key, trust: trust, defs: slices.Clone(defs)}
	s.contents[key] = c
	s.n.defBytes += int64(8*len(c.defs) + 80)
	return c
}

// minPerWorker keeps a small apply (a live listing change) on the
// caller's goroutine.
const minPerWorker = 32

// bytes estimates the memory the history holds: definitions (schema,
// description, compiled signature about 4x the schema), contents, points,
// server states and versions. Constants are Go's sizes of the structures.
func (s *Store) bytes() int64 {
	b := s.n.defBytes
	// A state copies its tools (Tool and map entry); a version holds a
	// server list, a name map entry and a slot of Tools() per tool.
	b += 16*s.n.points + 150*s.n.states + 300*s.n.versions + 250*s.n.stateTools + 60*s.n.versionTools
	if s.changes != nil {
		b += 24 * s.n.points // an event_id per point
	}
	return b
}

// counts are the sizes a registry's history adds to the store's.
type counts struct {
	points, states, stateTools, versions, versionTools int64
	defBytes                                           int64 // definitions and contents, store-wide only
}

func (c *counts) add(now, before counts) {
	c.points += now.points - before.points
	c.states += now.states - before.states
	c.stateTools += now.stateTools - before.stateTools
	c.versions += now.versions - before.versions
	c.versionTools += now.versionTools - before.versionTools
}
