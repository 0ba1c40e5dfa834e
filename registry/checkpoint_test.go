package registry

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/schema"
)

// TestCheckpointRoundTrip: a store loaded from a checkpoint has the
// writer's versions, ids, digests and drift, and applying the remaining
// listings (many of them older, in event time, than what the checkpoint
// holds, and some already in it) gives the from-scratch rebuild of all of
// them, on the loaded store as on the writer.
func TestCheckpointRoundTrip(t *testing.T) {
	ls := readListings(t, corpus("sample", "listings.jsonl"))
	ls = append(ls, readListings(t, corpus("mcp", "listings.jsonl"))...)
	ls = append(ls, readListings(t, corpus("mcp", "history.jsonl"))...)
	ls = append(ls, fleetListings(t, 300, 0.05, 4, true)...)
	order := fleet.Arrival(len(ls), 0.3, 0.1, 400, 8)
	cut := len(order) * 2 / 3
	var first, all []*schema.Listing
	for k, i := range order {
		if k < cut {
			first = append(first, ls[i])
		}
		all = append(all, ls[i])
	}
	for _, window := range []time.Duration{0, DefaultLateWindow} {
		a := New(WithLateWindow(window))
		a.Apply(first...)
		data := a.AppendCheckpoint(nil)
		b := New(WithLateWindow(window))
		if err := b.LoadCheckpoint(data); err != nil {
			t.Fatal(err)
		}
		if d := diffStore(b, reference(t, first)); d != "" && window == 0 {
			t.Fatalf("loaded: %s", d)
		}
		if again := b.AppendCheckpoint(nil); !bytes.Equal(again, data) {
			t.Fatalf("window %v: a loaded store's checkpoint differs from the one it loaded", window)
		}
		if as, bs := a.Stats(), b.Stats(); as.Versions != bs.Versions || as.Points != bs.Points || as.Definitions != bs.Definitions {
			t.Fatalf("stats differ: %+v, loaded %+v", as, bs)
		}
		want := reference(t, all)
		for _, i := range order[cut-100:] { // 100 already applied, then the rest
			a.Apply(ls[i])
			b.Apply(ls[i])
		}
		if window == 0 {
			if d := diffStore(a, want); d != "" {
				t.Fatalf("writer: %s", d)
			}
		}
		if d := diffStore(b, want); d != "" && window == 0 {
			t.Fatalf("loaded, then the rest: %s", d)
		}
		if !bytes.Equal(a.AppendCheckpoint(nil), b.AppendCheckpoint(nil)) {
			t.Fatalf("window %v: the writer and the loaded store differ after the same listings", window)
		}
	}
}

// TestCheckpointCorrupt: truncated or altered checkpoints are errors (or
// load something valid), never a crash, and a failed load leaves the
// store empty.
func TestCheckpointCorrupt(t *testing.T) {
	a := New()
	a.Apply(readListings(t, corpus("sample", "listings.jsonl"))[:12]...)
	data := a.AppendCheckpoint(nil)
	rng := rand.New(rand.NewPCG(1, 1))
	try := func(b []byte) {
		s := New()
		if err := s.LoadCheckpoint(b); err != nil && (s.Snapshot().Registries() != 0 || len(s.defs) != 0) {
			t.Fatalf("failed load left %d registries", s.Snapshot().Registries())
		}
	}
	for n := 0; n < len(data); n += 1 + rng.IntN(97) {
		try(data[:n])
	}
	for range 300 {
		b := bytes.Clone(data)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		try(b)
	}
	if err := New().LoadCheckpoint([]byte("not a checkpoint")); err == nil {
		t.Fatal("garbage loaded")
	}
	if err := a.LoadCheckpoint(data); err == nil {
		t.Fatal("loaded into a store that is not empty")
	}
}

func FuzzLoadCheckpoint(f *testing.F) {
	s := New()
	s.Apply(listing("l1", "2026-01-01T00:00:01Z", "r", "s", 2, schema.OpSnapshot, tool("a", `{"type":"object","properties":{"x":{"type":"string"}}}`, "d")),
		listing("l2", "2026-01-01T00:00:03Z", "r", "s", 2, schema.OpRemove))
	f.Add(s.AppendCheckpoint(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := New()
		if err := s.LoadCheckpoint(data); err == nil {
			s.AppendCheckpoint(nil)
		}
	})
}
