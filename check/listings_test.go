package check

import (
	"bytes"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// TestLoadListingsBatches: a fleet's listings file larger than a batch,
// with bad lines, blank lines and the fleet's events in reverse order,
// loads to the same versions as every good line applied at once, and bad
// lines are reported by line number.
func TestLoadListingsBatches(t *testing.T) {
	ms, err := fleet.ReadManifests(corpus("mcp", "listings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	evs := fleet.Generate(fleet.Config{Sessions: 300, ChangeRate: 0.05, Seed: 1}, ms)
	var in bytes.Buffer
	var good []*schema.Listing
	bad := 0
	for i := len(evs) - 1; i >= 0; i-- {
		in.Write(evs[i].Line)
		in.WriteByte('\n')
		l, err := schema.DecodeListing(evs[i].Line)
		if err != nil {
			t.Fatal(err)
		}
		good = append(good, l)
		if i%100 == 0 {
			in.WriteString("{\"type\":\"listing\"}\n\n")
			bad++
		}
	}
	if in.Len() < 2*loadBatchBytes {
		t.Fatalf("input of %d bytes: not several batches", in.Len())
	}
	s := registry.New()
	st, err := LoadListings(&in, s, nil)
	if err != nil || st.Bad != bad || st.Applied != len(good) || st.Issues != 0 {
		t.Fatalf("LoadListings = %+v, %v; want %d bad, %d applied", st, err, bad, len(good))
	}
	all := registry.New()
	all.Apply(good...)
	if got, want := s.Snapshot().Versions("fleet"), all.Snapshot().Versions("fleet"); got != want || got < 10 {
		t.Fatalf("%d versions, want %d (and more than 10)", got, want)
	}
	for _, e := range evs {
		at := e.ObservedAt.Add(time.Millisecond / 2)
		if g, w := s.At("fleet", at), all.At("fleet", at); g.ID != w.ID {
			t.Fatalf("at %v: %s, want %s", at, g.ID, w.ID)
		}
	}
}
