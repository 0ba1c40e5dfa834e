package registry

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/schema"
)

// The reference: the registry history rebuilt from scratch from every
// listing, the way the store worked before it was incremental (sort the
// events, replay them, mark drift along each server's chain), written
// independently of the store's code. The differential tests compare the
// store against it.

type refState struct {
	trust   int
	digests map[string]string // name -> digest
	key     [32]byte
}

type refVersion struct {
	from    int64
	id      string
	servers map[string]*refState
	drift   map[string]bool // server+"\x00"+tool -> drift
}

func refKey(trust int, digests map[string]string) [32]byte {
	names := make([]string, 0, len(digests))
	for n := range digests {
		names = append(names, n)
	}
	slices.Sort(names)
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(int64(trust)))
	h.Write(b[:])
	for _, n := range names {
		binary.LittleEndian.PutUint64(b[:], uint64(len(n)))
		h.Write(b[:])
		h.Write([]byte(n))
		h.Write([]byte(digests[n]))
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// refDigests memoizes Digest by the exact definition (tests only: the
// generated fleets list the same definitions thousands of times).
var refDigests = map[string]string{}

func refContent(t testing.TB, l *schema.Listing) *refState {
	if l.Op == schema.OpRemove {
		return nil
	}
	st := &refState{trust: l.Trust, digests: map[string]string{}}
	for _, tl := range l.Tools {
		key := tl.Name + "\x00" + string(tl.InputSchema)
		d, ok := refDigests[key]
		if !ok {
			var err error
			if d, err = schema.Digest(tl.Name, tl.InputSchema); err != nil {
				t.Fatal(err)
			}
			refDigests[key] = d
		}
		st.digests[tl.Name] = d
	}
	st.key = refKey(st.trust, st.digests)
	return st
}

func refSame(a, b *refState) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.key == b.key
}

// refWins is the same-instant rule: a remove beats a snapshot, else the
// greater content key.
func refWins(a, b *refState) bool {
	if a == nil || b == nil {
		return a == nil && b != nil
	}
	return string(a.key[:]) > string(b.key[:])
}

func refID(registry string, servers map[string]*refState) string {
	h := sha256.New()
	h.Write([]byte(registry))
	names := make([]string, 0, len(servers))
	for n := range servers {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s := servers[n]
		h.Write([]byte{0})
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write([]byte(strconv.Itoa(s.trust)))
		tools := make([]string, 0, len(s.digests))
		for tn := range s.digests {
			tools = append(tools, tn)
		}
		slices.Sort(tools)
		for _, tn := range tools {
			h.Write([]byte{1})
			h.Write([]byte(tn))
			h.Write([]byte{1})
			h.Write([]byte(s.digests[tn]))
		}
	}
	return "rv-" + hex.EncodeToString(h.Sum(nil)[:10])
}

// reference rebuilds every registry's versions from all the listings.
func reference(t testing.TB, ls []*schema.Listing) map[string][]*refVersion {
	type ev struct {
		at     int64
		server string
		c      *refState
	}
	byReg := map[string][]ev{}
	for _, l := range ls {
		byReg[l.Registry] = append(byReg[l.Registry], ev{l.ObservedAt.UnixNano(), l.Server, refContent(t, l)})
	}
	out := map[string][]*refVersion{}
	for reg, evs := range byReg {
		// One content per (server, instant): the winner of the tie rule.
		type si struct {
			server string
			at     int64
		}
		win := map[si]*refState{}
		seen := map[si]bool{}
		for _, e := range evs {
			k := si{e.server, e.at}
			if !seen[k] || refWins(e.c, win[k]) {
				win[k], seen[k] = e.c, true
			}
		}
		keys := make([]si, 0, len(win))
		for k := range win {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b si) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.server, b.server)) })
		cur := map[string]*refState{}
		chains := map[string][]int64{} // server -> instants where its state changed
		var vs []*refVersion
		for i := 0; i < len(keys); {
			at := keys[i].at
			for ; i < len(keys) && keys[i].at == at; i++ {
				k := keys[i]
				c := win[k]
				if refSame(cur[k.server], c) {
					continue
				}
				if c == nil {
					delete(cur, k.server)
				} else {
					cur[k.server] = c
				}
				chains[k.server] = append(chains[k.server], at)
			}
			id := refID(reg, cur)
			if len(vs) > 0 && vs[len(vs)-1].id == id {
				continue
			}
			servers := map[string]*refState{}
			for n, s := range cur {
				servers[n] = s
			}
			vs = append(vs, &refVersion{from: at, id: id, servers: servers, drift: map[string]bool{}})
		}
		// Drift: a tool of a server's state drifts when any later version
		// lacks it or has another digest, that is when the last instant at
		// which its digest (or presence) changed is after the version began.
		digest := func(v *refVersion, key string) string {
			n, tn, _ := strings.Cut(key, "\x00")
			if s := v.servers[n]; s != nil {
				return s.digests[tn]
			}
			return ""
		}
		keysOf := func(v *refVersion) []string {
			var ks []string
			for n, s := range v.servers {
				for tn := range s.digests {
					ks = append(ks, n+"\x00"+tn)
				}
			}
			return ks
		}
		lastChange := map[string]int64{}
		for k := 1; k < len(vs); k++ {
			for _, key := range append(keysOf(vs[k-1]), keysOf(vs[k])...) {
				if digest(vs[k-1], key) != digest(vs[k], key) {
					lastChange[key] = vs[k].from
				}
			}
		}
		for _, v := range vs {
			for _, key := range keysOf(v) {
				lc, ok := lastChange[key]
				v.drift[key] = ok && lc > v.from
			}
		}
		out[reg] = vs
	}
	return out
}

// diffStore returns the first difference between the store's published
// histories and the reference, or "".
func diffStore(s *Store, want map[string][]*refVersion) string {
	snap := s.Snapshot()
	if snap.Registries() != len(want) {
		return fmt.Sprintf("%d registries, want %d", snap.Registries(), len(want))
	}
	for reg, wvs := range want {
		r := snap.dir.get(reg)
		if r == nil {
			return "missing registry " + reg
		}
		got := r.view.Load().versions
		if len(got) != len(wvs) {
			return fmt.Sprintf("%s: %d versions, want %d", reg, len(got), len(wvs))
		}
		for i, w := range wvs {
			g := got[i]
			if g.From.UnixNano() != w.from || g.ID != w.id {
				return fmt.Sprintf("%s version %d: %s from %d, want %s from %d", reg, i, g.ID, g.From.UnixNano(), w.id, w.from)
			}
			if len(g.servers) != len(w.servers) {
				return fmt.Sprintf("%s version %d: %d servers, want %d", reg, i, len(g.servers), len(w.servers))
			}
			n := 0
			for _, st := range g.servers {
				ws := w.servers[st.Name]
				if ws == nil || ws.trust != st.Trust || len(ws.digests) != len(st.list) {
					return fmt.Sprintf("%s version %d: server %q differs", reg, i, st.Name)
				}
				for _, tl := range st.list {
					n++
					if ws.digests[tl.Name] != tl.Digest {
						return fmt.Sprintf("%s version %d: %s/%s digest %s, want %s", reg, i, st.Name, tl.Name, tl.Digest, ws.digests[tl.Name])
					}
					if wd := w.drift[st.Name+"\x00"+tl.Name]; tl.Drift() != wd {
						return fmt.Sprintf("%s version %d (from %d): %s/%s drift %v, want %v", reg, i, w.from, st.Name, tl.Name, tl.Drift(), wd)
					}
				}
			}
			if n != len(g.Tools()) {
				return fmt.Sprintf("%s version %d: %d tools listed, %d in servers", reg, i, len(g.Tools()), n)
			}
		}
	}
	return ""
}
