// Package declared keeps the registry versions of tool sets that arrive
// whole with the calls they govern: the tools a model API request
// declares (package modelproxy), the tool definitions a trace records
// beside the model's answer (the stream's OpenTelemetry topics). Such a
// set is a listing of one registry and one unnamed server, observed at
// schema.MinTime, so that every call decided against the same set is
// decided against the same version, whose ID is the content hash package
// registry gives any listing: a fleet sends the same few sets over and
// over, and each is compiled once.
package declared

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// Set is the registry version of one declared tool set.
type Set struct {
	// Snap holds the one version, at schema.MinTime.
	Snap *registry.Snapshot
	// Version is the version's ID ("" when the set made none).
	Version string
	// Listing is the set as a listing event, as `resolverd check` reads it.
	Listing []byte
	// Issues are what the registry found in the set (a tool it could not
	// compile): calls to such a tool are rejected.
	Issues []registry.Issue
}

// DefaultSets is how many sets a Cache keeps compiled by default.
const DefaultSets = 1024

// Cache keeps the sets seen lately, up to a bound; safe for concurrent
// use.
type Cache struct {
	opts signature.Options
	max  int
	mu   sync.Mutex
	m    map[[32]byte]*Set
}

// NewCache returns a cache of at most max sets (0: DefaultSets) compiled
// with opts.
func NewCache(max int, opts signature.Options) *Cache {
	if max <= 0 {
		max = DefaultSets
	}
	return &Cache{opts: opts, max: max}
}

// keyBufs hold the listing a set's key is the hash of: every request
// hashes its set, and a set is a few KB.
var keyBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxKeyBuf is the largest buffer keyBufs keeps.
const maxKeyBuf = 64 << 10

// Get returns the version of tools (listing tool objects, compact JSON) in
// registry reg; an error says why they are not a usable listing (two
// tools of one name, a tool without a name or an object schema).
func (c *Cache) Get(reg string, tools [][]byte) (*Set, error) {
	l := &schema.Listing{ObservedAt: schema.MinTime, Registry: reg, Op: schema.OpSnapshot}
	buf := keyBufs.Get().(*[]byte)
	*buf = schema.AppendListing((*buf)[:0], l, tools)
	key := sha256.Sum256(*buf)
	if cap(*buf) <= maxKeyBuf {
		keyBufs.Put(buf)
	}
	c.mu.Lock()
	s := c.m[key]
	c.mu.Unlock()
	if s != nil {
		return s, nil
	}
	l.EventID = "declared-" + hex.EncodeToString(key[:8])
	ev := schema.AppendListing(nil, l, tools)
	dec, err := schema.DecodeListing(ev)
	if err != nil {
		return nil, fmt.Errorf("declared tools: %w", err)
	}
	st := registry.New(registry.WithSignatureOptions(c.opts))
	s = &Set{Listing: ev, Issues: st.Apply(dec)}
	s.Snap = st.Snapshot()
	if v := s.Snap.At(reg, schema.MinTime); v != nil {
		s.Version = v.ID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*Set{}
	}
	if len(c.m) >= c.max {
		for k := range c.m { // any one: a set evicted is compiled again when it returns
			delete(c.m, k)
			break
		}
	}
	c.m[key] = s
	return s, nil
}
