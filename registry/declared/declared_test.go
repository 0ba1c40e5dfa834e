package declared

import (
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

var weather = [][]byte{
	[]byte(`{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`),
	[]byte(`{"name":"search","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`),
}

// TestCache: one set is compiled once and its version is the one the
// registry gives the same listing read from a file (as resolverd check
// reads it), whenever it was observed; another set is another version;
// tools that are no listing are refused; the cache keeps at most its
// bound.
func TestCache(t *testing.T) {
	c := NewCache(2, signature.Options{})
	a, err := c.Get("fleet:tools-1", weather)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Get("fleet:tools-1", weather); b != a {
		t.Fatal("the same set compiled twice")
	}
	if a.Version == "" || len(a.Issues) != 0 {
		t.Fatalf("version %q, issues %v", a.Version, a.Issues)
	}
	// The same tools as a listing observed at some time, in a store of
	// its own: the same version ID (a content hash).
	l := &schema.Listing{EventID: "l-1", ObservedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Registry: "fleet:tools-1", Op: schema.OpSnapshot}
	dec, err := schema.DecodeListing(schema.AppendListing(nil, l, weather))
	if err != nil {
		t.Fatal(err)
	}
	st := registry.New()
	st.Apply(dec)
	if v := st.Snapshot().At("fleet:tools-1", l.ObservedAt.Add(time.Hour)); v == nil || v.ID != a.Version {
		t.Fatalf("store's version %v, cache's %q", v, a.Version)
	}
	if v := a.Snap.At("fleet:tools-1", time.Now()); v == nil || v.ID != a.Version {
		t.Fatalf("the set's snapshot has no version now: %v", v)
	}
	other, err := c.Get("fleet:tools-1", weather[:1])
	if err != nil || other.Version == a.Version {
		t.Fatalf("another set: %v, %v", other, err)
	}
	if _, err := c.Get("fleet:tools-1", [][]byte{weather[0], weather[0]}); err == nil {
		t.Fatal("two tools of one name made a set")
	}
	if _, err := c.Get("fleet:tools-2", weather); err != nil {
		t.Fatal(err)
	}
	if n := len(c.m); n > 2 {
		t.Fatalf("%d sets kept, bound 2", n)
	}
}
