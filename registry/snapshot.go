package registry

import (
	"maps"
	"math"
	"time"
)

// Snapshot is a view of every registry, for readers: they never lock.
// Each registry's history is published whole and read atomically (a
// version is never torn), per registry: applying a listing publishes its
// registry alone, whatever the number of registries. A Snapshot follows
// the listings applied after it was taken for the registries it knows;
// registries first listed after it are unknown to it.
type Snapshot struct {
	dir *directory
}

// directory maps registry names to their histories. It only grows: new
// registries go to recent, which is folded into main once it holds about
// the square root of main's size, so adding a registry copies O(√n)
// entries on average, and a lookup is one or two map reads.
type directory struct {
	main, recent map[string]*registry
	n            int
}

func (d *directory) get(name string) *registry {
	if r, ok := d.main[name]; ok {
		return r
	}
	return d.recent[name]
}

// with returns a directory that also holds regs.
func (d *directory) with(regs map[string]*registry) *directory {
	n := &directory{main: d.main, n: d.n + len(regs)}
	if limit := max(64, int(math.Sqrt(float64(len(d.main))))); len(d.recent)+len(regs) > limit {
		n.main = make(map[string]*registry, n.n)
		maps.Copy(n.main, d.main)
		maps.Copy(n.main, d.recent)
		maps.Copy(n.main, regs)
		return n
	}
	n.recent = make(map[string]*registry, len(d.recent)+len(regs))
	maps.Copy(n.recent, d.recent)
	maps.Copy(n.recent, regs)
	return n
}

// At returns the version of the registry current at t, or nil when no
// listing of that registry was observed at or before t.
func (s *Snapshot) At(registry string, t time.Time) *Version {
	r := s.dir.get(registry)
	if r == nil {
		return nil
	}
	tl := r.view.Load()
	ns := t.UnixNano()
	if len(tl.versions) == 0 || ns < tl.first {
		return nil
	}
	if tl.only != nil {
		return tl.only
	}
	// The first version that begins after t; the one before it is current.
	froms := tl.froms
	i, j := 0, len(froms)
	for i < j {
		h := int(uint(i+j) >> 1)
		if froms[h] <= ns {
			i = h + 1
		} else {
			j = h
		}
	}
	return tl.versions[i-1]
}

// Drift reports whether a listing observed after t changed the digest of
// that server's tool, or dropped it (snapshot without it, or remove).
func (s *Snapshot) Drift(registry, server, tool, digest string, t time.Time) bool {
	v := s.At(registry, t)
	if v == nil || v.Server(server) == nil || v.Server(server).Tool(tool) == nil {
		return false
	}
	tt := v.Server(server).Tool(tool)
	return tt.Digest != digest || tt.Drift()
}

// Registries returns the number of registries known.
func (s *Snapshot) Registries() int { return s.dir.n }

// Versions returns how many distinct versions the registry has had.
func (s *Snapshot) Versions(registry string) int {
	if r := s.dir.get(registry); r != nil {
		return len(r.view.Load().versions)
	}
	return 0
}
