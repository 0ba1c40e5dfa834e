package registry

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/schema"
)

// fleetLines: sessions host sessions relisting the corpus's 14 real MCP
// manifests, 3 servers each, one session every 130 s, 1% of listings
// changing a definition.
func fleetLines(b testing.TB, sessions int) [][]byte {
	ms, err := fleet.ReadManifests(corpus("mcp", "listings.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	evs := fleet.Generate(fleet.Config{Sessions: sessions, ChangeRate: 0.01, Seed: 11}, ms)
	lines := make([][]byte, len(evs))
	for i, e := range evs {
		lines[i] = e.Line
	}
	return lines
}

func decodeAll(b testing.TB, lines [][]byte) []*schema.Listing {
	ls := make([]*schema.Listing, len(lines))
	for i, l := range lines {
		var err error
		if ls[i], err = schema.DecodeListing(l); err != nil {
			b.Fatal(err)
		}
	}
	return ls
}

// BenchmarkFleet: 10,000 host sessions (30,000 listings of the real
// manifests, 1% changing a definition) applied one listing at a time, as
// the stream applies a trickle: in order, and with 10% late (up to 300
// listings, about 3 hours of event time) and 10% redelivered. Reports the
// store's time per listing (decoding excluded: see decode-ns/listing)
// and its memory per distinct version, after a GC; -changes, the same
// with the registry history on (WithChanges).
func BenchmarkFleet(b *testing.B) {
	lines := fleetLines(b, 10000)
	ls := decodeAll(b, lines)
	start := time.Now()
	decodeAll(b, lines)
	decodeNs := float64(time.Since(start).Nanoseconds()) / float64(len(lines))
	for _, a := range []struct {
		name  string
		order []int
	}{
		{"in-order", identity(len(ls))},
		{"late-redelivered", fleet.Arrival(len(ls), 0.1, 0.1, 300, 3)},
	} {
		for _, history := range []bool{false, true} {
			name := a.name
			if history {
				// With the registry history on: the changes reported (and
				// counted, as a writer that keeps up would take them).
				name += "-changes"
			}
			b.Run(name, func(b *testing.B) {
				var s *Store
				var opts []Option
				n := 0
				if history {
					opts = append(opts, WithChanges(func(cs []Change) { n += len(cs) }))
				}
				for b.Loop() {
					s = New(opts...)
					for _, i := range a.order {
						s.Apply(ls[i])
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(a.order))/1e3, "µs/listing")
				b.ReportMetric(decodeNs/1e3, "decode-µs/listing")
				st := s.Stats()
				b.ReportMetric(float64(st.Versions), "versions")
				b.ReportMetric(float64(st.Bytes)/float64(st.Versions), "est-B/version")
				if history {
					b.ReportMetric(float64(n)/float64(b.N), "changes")
				}
			})
		}
	}
}

// TestFleetMemory measures the heap the store holds for the fleet of
// BenchmarkFleet, decoding and applying one listing at a time (nothing
// else kept): the figure behind "memory per distinct version".
func TestFleetMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	lines := fleetLines(t, 10000)
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"plain", nil},
		// The registry history on: an event_id per point.
		{"changes", []Option{WithChanges(func([]Change) {})}},
	} {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		s := New(tc.opts...)
		for _, l := range lines {
			li, err := schema.DecodeListing(l)
			if err != nil {
				t.Fatal(err)
			}
			s.Apply(li)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		st := s.Stats()
		held := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
		t.Logf("%s: %d listings: %d versions, %d definitions, %d points; heap held %.1f MiB (%.0f KiB per version), estimated %.1f MiB",
			tc.name, len(lines), st.Versions, st.Definitions, st.Points, float64(held)/(1<<20), float64(held)/1024/float64(st.Versions), float64(st.Bytes)/(1<<20))
		if perVersion := held / st.Versions; perVersion > 1<<20 {
			t.Fatalf("%d bytes per version", perVersion)
		}
		runtime.KeepAlive(s)
	}
	runtime.KeepAlive(lines)
}

// BenchmarkManyRegistries: one more listing applied with 50,000
// registries in the store: a change in an existing registry, and a
// registry's first listing. Neither may grow with the number of
// registries.
func BenchmarkManyRegistries(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		s := New()
		var batch []*schema.Listing
		for i := range n {
			batch = append(batch, listing(fmt.Sprint("l", i), "2026-01-01T00:00:00Z", fmt.Sprint("reg-", i), "s", 0, schema.OpSnapshot,
				tool("t", `{"type":"object","properties":{"q":{"type":"string"}}}`, "")))
		}
		s.Apply(batch...)
		b.Run(fmt.Sprintf("registries=%d/change", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				s.Apply(listing(fmt.Sprint("c", i), time.Date(2026, 1, 2, 0, 0, 0, i, time.UTC).Format(time.RFC3339Nano), "reg-7", "s", 0, schema.OpSnapshot,
					tool("t", fmt.Sprintf(`{"type":"object","properties":{"q":{"type":"string","maxLength":%d}}}`, i%2+1), "")))
			}
		})
		b.Run(fmt.Sprintf("registries=%d/new", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				s.Apply(listing(fmt.Sprint("n", i), "2026-01-02T00:00:00Z", fmt.Sprint("new-", n, "-", i), "s", 0, schema.OpSnapshot,
					tool("t", `{"type":"object","properties":{"q":{"type":"string"}}}`, "")))
			}
		})
	}
}

// millionListings applies n relistings of the 14 real manifests (3 per
// session, one session every 130 s, 1% changing a definition) to s,
// without JSON: the listings share the decoded tools, so n can be a
// million. Returns the number of changes.
func millionListings(b testing.TB, s *Store, n int) int {
	base := readListings(b, corpus("mcp", "listings.jsonl"))
	cur := make([][]schema.Tool, len(base))
	for i, l := range base {
		cur[i] = l.Tools
	}
	rng := rand.New(rand.NewPCG(1, 1))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	changes := 0
	batch := make([]*schema.Listing, 0, 3000)
	for k := range n {
		i := rng.IntN(len(base))
		if rng.IntN(100) == 0 {
			tools := slices.Clone(cur[i])
			j := rng.IntN(len(tools))
			if is := tools[j].InputSchema; bytes.Contains(is, []byte(`"properties":{`)) {
				tools[j].InputSchema = bytes.Replace(is, []byte(`"properties":{`), fmt.Appendf(nil, `"properties":{"fleet_option_%d":{"type":"string"},`, k), 1)
				cur[i] = tools
				changes++
			}
		}
		l := base[i]
		batch = append(batch, &schema.Listing{EventID: fmt.Sprint("m-", k), ObservedAt: start.Add(time.Duration(k) * 130 * time.Second / 3),
			Registry: "fleet", Server: l.Server, Trust: l.Trust, Op: schema.OpSnapshot, Tools: cur[i]})
		if len(batch) == cap(batch) || k == n-1 {
			s.Apply(batch...)
			batch = batch[:0]
		}
	}
	return changes
}

// BenchmarkStartupMillion: start-up with a million listing events in the
// topic. With a checkpoint, an instance loads the store's state (what
// AppendCheckpoint wrote after the million) and reads the tail: the load
// is what grows with the history. Without, it replays the million (see
// BenchmarkFleet for the cost per listing, decode included). Reports the
// checkpoint's size for the default late window and for keeping every
// relisting instant.
func BenchmarkStartupMillion(b *testing.B) {
	n := 1000000
	for _, w := range []struct {
		name   string
		window time.Duration
	}{{"window=24h", DefaultLateWindow}, {"window=all", 0}} {
		s := New(WithLateWindow(w.window))
		changes := millionListings(b, s, n)
		var data []byte
		b.Run(w.name+"/write", func(b *testing.B) {
			for b.Loop() {
				data = s.AppendCheckpoint(data[:0])
			}
			b.ReportMetric(float64(len(data))/(1<<20), "MiB")
		})
		b.Run(w.name+"/load", func(b *testing.B) {
			for b.Loop() {
				if err := New(WithLateWindow(w.window)).LoadCheckpoint(data); err != nil {
					b.Fatal(err)
				}
			}
			st := s.Stats()
			b.ReportMetric(float64(st.Versions), "versions")
			b.ReportMetric(float64(st.Points), "points")
			b.ReportMetric(float64(changes), "changes")
		})
	}
}
