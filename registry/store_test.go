package registry

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

func corpus(parts ...string) string {
	return filepath.Join(append([]string{"..", "testdata", "corpus"}, parts...)...)
}

func readListings(t testing.TB, path string) []*schema.Listing {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []*schema.Listing
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		l, err := schema.DecodeListing(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

type callRef struct {
	EventID    string `json:"event_id"`
	EmittedAt  string `json:"emitted_at"`
	Registry   string `json:"registry"`
	Tool       string `json:"tool"`
	Server     string `json:"server"`
	SeenDigest string `json:"seen_digest"`
}

func readCalls(t testing.TB, path string) []callRef {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []callRef
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var c callRef
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func ts(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := schema.ParseTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestDigestVectors: every BFCL call carries the digest of the definition
// its host showed the model, computed by the corpus builder's own JCS
// implementation; ours must agree on all of them.
func TestDigestVectors(t *testing.T) {
	s := New()
	if issues := s.Apply(readListings(t, corpus("bfcl", "listings.jsonl"))...); len(issues) != 0 {
		t.Fatalf("issues on BFCL listings: %v", issues[:min(3, len(issues))])
	}
	n := 0
	for _, c := range readCalls(t, corpus("bfcl", "calls.jsonl")) {
		v := s.At(c.Registry, ts(t, c.EmittedAt))
		if v == nil {
			t.Fatalf("%s: no version", c.EventID)
		}
		provs := v.Providers(c.Tool)
		if len(provs) != 1 {
			t.Fatalf("%s: %d providers of %q", c.EventID, len(provs), c.Tool)
		}
		if provs[0].Digest != c.SeenDigest {
			t.Errorf("%s: digest %s, corpus says %s", c.EventID, provs[0].Digest, c.SeenDigest)
		}
		n++
	}
	if n != 3129 {
		t.Fatalf("checked %d digests, want 3129", n)
	}
}

// TestArrivalOrder: listings applied in any order, or one at a time, give
// the same version (same id) at every call of the sample.
func TestArrivalOrder(t *testing.T) {
	ls := readListings(t, corpus("sample", "listings.jsonl"))
	ls = append(ls, readListings(t, corpus("mcp", "listings.jsonl"))...)
	ls = append(ls, readListings(t, corpus("mcp", "history.jsonl"))...)
	calls := readCalls(t, corpus("sample", "calls.jsonl"))
	ids := func(s *Store) []string {
		var out []string
		for _, c := range calls {
			tm, err := schema.ParseTime(c.EmittedAt)
			if err != nil {
				out = append(out, "bad time")
				continue
			}
			if v := s.At(c.Registry, tm); v != nil {
				out = append(out, v.ID)
			} else {
				out = append(out, "none")
			}
		}
		for _, reg := range []string{"mcp-real"} {
			for _, at := range []string{"2026-05-21T00:00:00Z", "2026-12-31T00:00:00Z", "2020-01-01T00:00:00Z"} {
				if v := s.At(reg, ts(t, at)); v != nil {
					out = append(out, v.ID)
				} else {
					out = append(out, "none")
				}
			}
		}
		return out
	}
	inOrder := New()
	inOrder.Apply(ls...)
	want := ids(inOrder)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 5 {
		shuffled := slices.Clone(ls)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		s := New()
		if trial%2 == 0 {
			for _, l := range shuffled {
				s.Apply(l)
			}
		} else {
			s.Apply(shuffled...)
		}
		if got := ids(s); !slices.Equal(got, want) {
			t.Fatalf("trial %d: versions differ from in-order application", trial)
		}
	}
	// Re-delivery of every event changes nothing.
	inOrder.Apply(ls...)
	if got := ids(inOrder); !slices.Equal(got, want) {
		t.Fatal("re-applying the same events changed versions")
	}
}

func listing(id, at, reg, server string, trust int, op schema.Op, tools ...schema.Tool) *schema.Listing {
	tm, err := schema.ParseTime(at)
	if err != nil {
		panic(err)
	}
	return &schema.Listing{EventID: id, ObservedAt: tm, Registry: reg, Server: server, Trust: trust, Op: op, Tools: tools}
}

func tool(name, schemaJSON, desc string) schema.Tool {
	return schema.Tool{Name: name, InputSchema: []byte(schemaJSON), Description: desc}
}

func TestVersionAt(t *testing.T) {
	s := New()
	a1 := tool("a", `{"type":"object","properties":{"x":{"type":"string"}}}`, "v1")
	a2 := tool("a", `{"type":"object","properties":{"x":{"type":"integer"}}}`, "v2")
	aDesc := tool("a", `{"type":"object","properties":{"x":{"type":"string"}}}`, "new words")
	b := tool("b", `{"type":"object"}`, "")
	s.Apply(
		listing("l3", "2026-01-01T00:00:03Z", "r", "s1", 2, schema.OpSnapshot, a2),
		listing("l1", "2026-01-01T00:00:01Z", "r", "s1", 2, schema.OpSnapshot, a1, b),
		listing("l2", "2026-01-01T00:00:02Z", "r", "s2", 1, schema.OpSnapshot, a1),
		listing("l4", "2026-01-01T00:00:04Z", "r", "s2", 1, schema.OpRemove),
		listing("l5", "2026-01-01T00:00:05Z", "r", "s1", 2, schema.OpSnapshot, aDesc),
		listing("l6", "2026-01-01T00:00:06Z", "r", "s1", 2, schema.OpSnapshot, a1),
	)
	if v := s.At("r", ts(t, "2026-01-01T00:00:00.999Z")); v != nil {
		t.Fatalf("version before the first listing: %v", v.ID)
	}
	if s.At("other", ts(t, "2027-01-01T00:00:00Z")) != nil {
		t.Fatal("version of an unknown registry")
	}
	v1 := s.At("r", ts(t, "2026-01-01T00:00:01Z")) // <= boundary
	if v1 == nil || len(v1.Servers()) != 1 || v1.Server("s1").Tool("b") == nil || v1.Single() {
		t.Fatalf("at l1: %+v", v1)
	}
	v2 := s.At("r", ts(t, "2026-01-01T00:00:02.5Z"))
	if len(v2.Providers("a")) != 2 || v2.Providers("a")[0].Server != "s1" || v2.Providers("a")[1].Trust != 1 {
		t.Fatalf("at l2: providers %v", v2.Providers("a"))
	}
	v3 := s.At("r", ts(t, "2026-01-01T00:00:03Z"))
	if v3.Server("s1").Tool("b") != nil {
		t.Fatal("a snapshot must replace the whole tool set")
	}
	if v4 := s.At("r", ts(t, "2026-01-01T00:00:04Z")); v4.Server("s2") != nil || len(v4.Providers("a")) != 1 {
		t.Fatal("remove did not drop s2")
	}
	v5 := s.At("r", ts(t, "2026-01-01T00:00:05Z"))
	v6 := s.At("r", ts(t, "2026-01-01T00:00:06Z"))
	if v5.ID != v6.ID {
		t.Fatal("a description-only change made a new version")
	}
	if v1.ID == v2.ID || v2.ID == v3.ID {
		t.Fatal("distinct contents share an id")
	}
	// Drift: a1 at t=1 changes at t=3; s2's a is removed at t=4; a2 at
	// t=3 changes back at t=5 (digest of a1); a at t=5 never changes again.
	snap := s.Snapshot()
	d1 := v1.Server("s1").Tool("a").Digest
	d2 := v3.Server("s1").Tool("a").Digest
	for _, tt := range []struct {
		server, digest, at string
		want               bool
	}{
		{"s1", d1, "2026-01-01T00:00:01Z", true},
		{"s1", d2, "2026-01-01T00:00:03Z", true},
		{"s1", d1, "2026-01-01T00:00:05Z", false},
		{"s1", d1, "2026-01-01T00:00:09Z", false},
		{"s2", d1, "2026-01-01T00:00:02Z", true}, // removed later
	} {
		if got := snap.Drift("r", tt.server, "a", tt.digest, ts(t, tt.at)); got != tt.want {
			t.Errorf("Drift(%s, a@%s) = %v, want %v", tt.server, tt.at, got, tt.want)
		}
	}
	if snap.Drift("r", "s1", "b", v1.Server("s1").Tool("b").Digest, ts(t, "2026-01-01T00:00:01Z")) != true {
		t.Error("a tool dropped by a later snapshot has drifted")
	}
}

func TestSameInstantListings(t *testing.T) {
	s := New()
	a := tool("a", `{"type":"object"}`, "")
	s.Apply(
		listing("x2", "2026-01-01T00:00:01Z", "r", "s", 0, schema.OpRemove),
		listing("x1", "2026-01-01T00:00:01Z", "r", "s", 0, schema.OpSnapshot, a),
	)
	// Same observed_at: applied in event_id order, so x2 (remove) wins.
	if v := s.At("r", ts(t, "2026-01-01T00:00:01Z")); v != nil && v.Server("s") != nil {
		t.Fatal("same-instant events must apply in event_id order")
	}
}

func TestSignaturesCompiledOnce(t *testing.T) {
	s := New()
	same := tool("t", `{"type":"object","properties":{"q":{"type":"string"}}}`, "")
	var ls []*schema.Listing
	for i := range 1000 {
		tm := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC).Format(time.RFC3339)
		other := tool("v", `{"type":"object","properties":{"n":{"type":"integer","maximum":`+strings.Repeat("9", 1+i%3)+`}}}`, "")
		ls = append(ls, listing("l"+tm, tm, "r", "s", 0, schema.OpSnapshot, same, other))
	}
	s.Apply(ls...)
	if got := s.Compiled(); got != 4 {
		t.Fatalf("compiled %d signatures, want 4 distinct digests", got)
	}
	if n := s.Snapshot().Versions("r"); n != 1000 {
		t.Fatalf("%d versions, want 1000", n)
	}
}

func TestUnsupportedKeywordIsAnIssue(t *testing.T) {
	s := New()
	issues := s.Apply(listing("l1", "2026-01-01T00:00:01Z", "r", "s", 0, schema.OpSnapshot,
		tool("t", `{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`, "")))
	if len(issues) != 1 || issues[0].Tool != "t" || !strings.Contains(issues[0].Detail, "$ref") || !strings.Contains(issues[0].Detail, "not enforced") {
		t.Fatalf("issues = %v", issues)
	}
	if s.At("r", ts(t, "2026-01-01T00:00:01Z")).Server("s").Tool("t") == nil {
		t.Fatal("the tool must still be applied")
	}
}

// TestConcurrentReaders runs readers against a writer; go test -race
// checks the publication of snapshots.
func TestConcurrentReaders(t *testing.T) {
	s := New()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			tm := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC).Format(time.RFC3339)
			s.Apply(listing("l"+tm, tm, "r", "s", 0, schema.OpSnapshot, tool("t", `{"type":"object"}`, tm)))
		}
	}()
	for {
		select {
		case <-done:
			if s.Snapshot().Versions("r") != 1 {
				t.Fatal("description-only changes made versions")
			}
			return
		default:
			if v := s.At("r", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)); v != nil && v.Server("s").Tool("t") == nil {
				t.Fatal("torn version")
			}
		}
	}
}

// BenchmarkApplyCorpus: a new instance's start: every listing of the
// corpus (sample and BFCL, 2,468 listings) decoded and applied to an empty
// store, in polls of 500 as the pipeline reads them. Calls wait for this.
func BenchmarkApplyCorpus(b *testing.B) {
	var lines [][]byte
	for _, p := range []string{corpus("sample", "listings.jsonl"), corpus("bfcl", "listings.jsonl")} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			lines = append(lines, []byte(l))
		}
	}
	apply := func(s *Store, lines [][]byte) {
		batch := make([]*schema.Listing, 0, 500)
		for i, line := range lines {
			l, err := schema.DecodeListing(line)
			if err != nil {
				b.Fatal(err)
			}
			if batch = append(batch, l); len(batch) == cap(batch) || i == len(lines)-1 {
				s.Apply(batch...)
				batch = batch[:0]
			}
		}
	}
	// The same listings again under new event ids: hosts listing the same
	// tools session after session.
	again := make([][]byte, len(lines))
	for i, l := range lines {
		again[i] = []byte(strings.Replace(string(l), `"event_id": "`, `"event_id": "again-`, 1))
	}
	b.Run("once", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			apply(New(), lines)
		}
	})
	b.Run("relisted", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			b.StopTimer()
			s := New()
			apply(s, lines)
			b.StartTimer()
			apply(s, again)
		}
	})
}

// TestDigestCache: a definition listed again is found by its raw bytes;
// the same definition formatted otherwise is a raw miss that finds the
// same definition by digest (not compiled again); another name is a
// definition of its own; an unusable schema is not remembered.
func TestDigestCache(t *testing.T) {
	s := New()
	schemaA := `{"type":"object","properties":{"q":{"type":"string"}}}`
	want, err := schema.Digest("search", []byte(schemaA))
	if err != nil {
		t.Fatal(err)
	}
	apply := func(i int, tools ...schema.Tool) {
		t.Helper()
		tm := time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC).Format(time.RFC3339)
		s.Apply(listing(fmt.Sprint("l", i), tm, "r", "s", 0, schema.OpSnapshot, tools...))
	}
	for i := range 2 {
		apply(i, tool("search", schemaA, ""))
		if d := s.At("r", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)).Server("s").Tool("search").Digest; d != want {
			t.Fatalf("pass %d: %s, want %s", i, d, want)
		}
	}
	if s.raw.Len() != 1 || s.Compiled() != 1 {
		t.Fatalf("%d raw entries, %d compiled; want 1, 1", s.raw.Len(), s.Compiled())
	}
	apply(2, tool("search", `{ "type": "object", "properties": { "q": { "type": "string" } } }`, ""))
	if s.raw.Len() != 2 || s.Compiled() != 1 || len(s.defs) != 1 {
		t.Fatalf("reformatted: %d raw, %d compiled, %d defs; want 2, 1, 1", s.raw.Len(), s.Compiled(), len(s.defs))
	}
	apply(3, tool("find", schemaA, ""))
	if s.Compiled() != 2 || len(s.defs) != 2 {
		t.Fatalf("another name: %d compiled, %d defs; want 2, 2", s.Compiled(), len(s.defs))
	}
	for i := range 2 {
		issues := s.Apply(listing(fmt.Sprint("bad", i), "2026-01-01T00:01:00Z", "r2", "s", 0, schema.OpSnapshot, tool("bad", `[1]`, "")))
		if len(issues) != 1 || !strings.Contains(issues[0].Detail, "tool skipped") {
			t.Fatalf("unusable schema: issues %v", issues)
		}
	}
	if len(s.defs) != 2 || s.raw.Len() != 3 {
		t.Fatalf("%d defs, %d raw; want 2, 3 (errors are not remembered)", len(s.defs), s.raw.Len())
	}
}

func TestReferenceCorpus(t *testing.T) {
	ls := readListings(t, corpus("sample", "listings.jsonl"))
	ls = append(ls, readListings(t, corpus("mcp", "listings.jsonl"))...)
	ls = append(ls, readListings(t, corpus("mcp", "history.jsonl"))...)
	want := reference(t, ls)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 6 {
		shuffled := slices.Clone(ls)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		s := New(WithLateWindow(0))
		if trial%2 == 0 {
			for _, l := range shuffled {
				s.Apply(l)
			}
		} else {
			s.Apply(shuffled...)
		}
		if d := diffStore(s, want); d != "" {
			t.Fatalf("trial %d: %s", trial, d)
		}
	}
}

// TestSnapshotDoesNotAllocate: the stream takes a snapshot per call.
func TestSnapshotDoesNotAllocate(t *testing.T) {
	s := New()
	s.Apply(listing("l1", "2026-01-01T00:00:01Z", "r", "s", 0, schema.OpSnapshot, tool("t", `{"type":"object"}`, "")))
	at := ts(t, "2026-01-01T00:00:02Z")
	if n := testing.AllocsPerRun(100, func() { s.Snapshot().At("r", at) }); n > 0 {
		t.Fatalf("%.1f allocations per Snapshot().At", n)
	}
}
