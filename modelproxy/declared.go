package modelproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// declared is the registry version of one set of declared tools: a
// registry history of one listing (the request's registry, one unnamed
// server, observed at schema.MinTime), so that every call of every
// request declaring the same tools is decided against the same version,
// whose ID is the content hash registryversions gives any listing: the
// digest of the declared definitions. Listing is that listing event, as
// resolverd check reads it.
type declared struct {
	snap    *registry.Snapshot
	version string
	listing []byte
	issues  []registry.Issue
}

// declaredCache keeps the versions of the declared tool sets seen
// lately: a fleet sends the same few sets over and over, and each costs
// one compilation.
type declaredCache struct {
	formats bool
	max     int
	mu      sync.Mutex
	m       map[[32]byte]*declared
}

// DefaultDeclaredSets is how many declared tool sets the proxy keeps
// compiled.
const DefaultDeclaredSets = 1024

// get returns the version of tools (listing tool objects) in registry;
// an error says why the declared tools are not a usable listing (two
// tools of one name, a tool without a name or an object schema).
func (c *declaredCache) get(reg string, tools [][]byte) (*declared, error) {
	l := &schema.Listing{ObservedAt: schema.MinTime, Registry: reg, Op: schema.OpSnapshot}
	content := schema.AppendListing(nil, l, tools)
	key := sha256.Sum256(content)
	c.mu.Lock()
	d := c.m[key]
	c.mu.Unlock()
	if d != nil {
		return d, nil
	}
	l.EventID = "declared-" + hex.EncodeToString(key[:8])
	ev := schema.AppendListing(nil, l, tools)
	dec, err := schema.DecodeListing(ev)
	if err != nil {
		return nil, fmt.Errorf("declared tools: %w", err)
	}
	st := registry.New(registry.WithSignatureOptions(signature.Options{Formats: c.formats}))
	d = &declared{listing: ev, issues: st.Apply(dec)}
	d.snap = st.Snapshot()
	if v := d.snap.At(reg, schema.MinTime); v != nil {
		d.version = v.ID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[[32]byte]*declared{}
	}
	if len(c.m) >= c.max {
		for k := range c.m { // any one: a set evicted is compiled again when it returns
			delete(c.m, k)
			break
		}
	}
	c.m[key] = d
	return d, nil
}
