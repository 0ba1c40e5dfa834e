package suggest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

var (
	verbs       = []string{"get", "list", "create", "update", "delete", "search", "read", "write", "send", "fetch", "sync", "merge", "close", "open", "run"}
	nouns       = []string{"issue", "file", "branch", "commit", "user", "message", "channel", "table", "query", "record", "page", "event", "invoice", "ticket", "report", "image", "job", "secret"}
	quals       = []string{"", "_by_id", "_async", "_batch", "_v2", "_details", "_history", "_metadata"}
	benchSchema = `{"type":"object","properties":{"id":{"type":"string"},"limit":{"type":"integer","minimum":1}},"required":["id"]}`
)

// bigListing returns a listing of n tools with realistic names, and the
// names.
func bigListing(n int) (string, []string) {
	var names []string
	var tools []string
	for i := 0; len(names) < n; i++ {
		name := verbs[i%len(verbs)] + "_" + nouns[(i/len(verbs))%len(nouns)] + quals[(i/(len(verbs)*len(nouns)))%len(quals)]
		if i >= len(verbs)*len(nouns)*len(quals) {
			name += fmt.Sprint(i)
		}
		names = append(names, name)
		tools = append(tools, `{"name":"`+name+`","inputSchema":`+benchSchema+`}`)
	}
	return `{"type":"listing","event_id":"l-big","observed_at":"2026-01-01T00:00:00Z","registry":"big","server":"","op":"snapshot","tools":[` + strings.Join(tools, ",") + `]}`, names
}

func call(id, tool string, args string) []byte {
	return []byte(`{"type":"call","event_id":"` + id + `","emitted_at":"2026-02-01T00:00:00Z","registry":"big","tool":"` + tool + `","arguments":` + args + `}`)
}

// typo changes one character of name at random (never making it valid:
// the storm is of wrong names).
func typo(rng *rand.Rand, name string) string {
	b := []byte(name)
	i := rng.IntN(len(b))
	b[i] = "abcdefghijklmnopqrstuvwxyz"[rng.IntN(26)]
	return string(b) + "q"
}

// BenchmarkStorm measures what the stream pays per call: decode, resolve,
// and for H1 the nearest name (Suggester.Tool), in registries of 100 and
// 1,000 tools. ok is the baseline; h1-repeated is one wrong name over and over
// (answered from the cache); h1-distinct gives every call a name never
// seen before (near misses of real names), h1-invented random names of
// the same length: each one a cache miss, the scan of the registry's
// names and the distance on the survivors.
func BenchmarkStorm(b *testing.B) {
	for _, size := range []int{100, 1000} {
		b.Run(fmt.Sprintf("tools=%d", size), func(b *testing.B) { storm(b, size) })
	}
}

func storm(b *testing.B, size int) {
	listing, names := bigListing(size)
	store := registry.New()
	l, err := schema.DecodeListing([]byte(listing))
	if err != nil {
		b.Fatal(err)
	}
	if is := store.Apply(l); len(is) > 0 {
		b.Fatal(is)
	}
	snap := store.Snapshot()
	rng := rand.New(rand.NewPCG(1, 1))
	const n = 1 << 16
	mk := func(name func(i int) string) [][]byte {
		out := make([][]byte, n)
		for i := range out {
			out[i] = call(fmt.Sprint("c-", i), name(i), `{"id":"x"}`)
		}
		return out
	}
	letters := "abcdefghijklmnopqrstuvwxyz_"
	sets := []struct {
		name  string
		calls [][]byte
		class schema.Class
	}{
		{"ok", mk(func(i int) string { return names[i%len(names)] }), schema.OK},
		{"h1-repeated", mk(func(int) string { return "get_isue_batch" }), schema.H1},
		{"h1-distinct", mk(func(i int) string { return typo(rng, names[i%len(names)]) }), schema.H1},
		{"h1-invented", mk(func(i int) string {
			b := make([]byte, 10+rng.IntN(10))
			for j := range b {
				b[j] = letters[rng.IntN(len(letters))]
			}
			return string(b)
		}), schema.H1},
	}
	for _, set := range sets {
		b.Run(set.name, func(b *testing.B) {
			s := New()
			var r resolve.Resolver
			var dec schema.CallDecoder
			var c schema.Call
			var d schema.Decision
			suggested := 0
			b.ReportAllocs()
			cpu0 := cpuTime()
			for i := 0; b.Loop(); i++ {
				r.Decide(snap, &dec, set.calls[i%n], &c, &d)
				if d.Class != set.class {
					b.Fatalf("%s: class %s (%s)", set.calls[i%n], d.Class, d.Reason)
				}
				if s.Tool(snap, &c, &d) != "" {
					suggested++
				}
			}
			// CPU time, not only wall time: on a machine whose cores are
			// shared, it varies far less with the neighbours' load.
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(suggested)/float64(b.N), "suggested/op")
		})
	}
}

// cpuTime is the process's CPU time so far (user and system), in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkHints computes the hints of the rejected calls of
// testdata/calls.jsonl by class (H2: keys, H3: expected values), the
// decision made once: the cost a rejection adds for its hints.
func BenchmarkHints(b *testing.B) {
	store := loadStore(b, "testdata/listings.jsonl")
	calls, err := os.ReadFile("testdata/calls.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	type decided struct {
		c schema.Call
		d schema.Decision
	}
	byClass := map[schema.Class][]*decided{}
	for _, line := range bytes.Split(bytes.TrimSpace(calls), []byte("\n")) {
		var r resolve.Resolver
		var dec schema.CallDecoder
		x := &decided{}
		if r.Decide(store.Snapshot(), &dec, line, &x.c, &x.d) {
			byClass[x.d.Class] = append(byClass[x.d.Class], x)
		}
	}
	for _, class := range []schema.Class{schema.H2, schema.H3} {
		b.Run(string(class), func(b *testing.B) {
			xs := byClass[class]
			if len(xs) == 0 {
				b.Fatalf("no %s call", class)
			}
			s := New()
			snap := store.Snapshot()
			hinted := 0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				x := xs[i%len(xs)]
				if h := s.Hints(snap, &x.c, &x.d); !h.Empty() {
					hinted++
				}
			}
			if hinted == 0 {
				b.Fatalf("no %s call got hints", class)
			}
		})
	}
}
