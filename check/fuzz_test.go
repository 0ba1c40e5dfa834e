package check

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/lines"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// The time a fuzzed case may take: generous, since the machine may be
// busy, yet far below what a superlinear path costs (the quadratic key
// scan took 15 s on 1.1 MB, a $ref cycle never ended).
const (
	fuzzBase    = 2 * time.Second
	fuzzPerByte = 50 * time.Microsecond
)

// FuzzCheck: an arbitrary listings file and calls file, as `resolverd
// check` reads them. Nothing crashes; every line that is not blank gets
// exactly one decision, in valid JSON, with a known class and a reason
// for every rejection; and the case costs at most fuzzBase plus
// fuzzPerByte per byte of input.
func FuzzCheck(f *testing.F) {
	seed := func(listings, calls string) {
		l, err := os.ReadFile(listings)
		if err != nil {
			f.Fatal(err)
		}
		c, err := os.ReadFile(calls)
		if err != nil {
			f.Fatal(err)
		}
		ls, cs := bytes.Split(l, []byte("\n")), bytes.Split(c, []byte("\n"))
		for i := 0; i < 8 && i < len(cs); i++ {
			f.Add(ls[i%len(ls)], cs[i])
		}
	}
	seed(corpus("sample", "listings.jsonl"), corpus("sample", "calls.jsonl"))
	hostile := filepath.Join("..", "e2e", "testdata", "hostile")
	for _, name := range []string{"ref-cycles", "repeated-call-members", "repeated-listing-members", "odd-inputs"} {
		seed(filepath.Join(hostile, name+".listings.jsonl"), filepath.Join(hostile, name+".calls.jsonl"))
	}
	f.Add([]byte(`{"event_id":"l","observed_at":"2026-01-01T00:00:00Z","registry":"r","tools":[{"name":"t","inputSchema":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"anyOf":[{"properties":{"n":{"$ref":"#/$defs/n"}}},{"properties":{"n":{"$ref":"#/$defs/n"}}}]}}}}]}`),
		[]byte(`{"event_id":"c","emitted_at":"2026-06-01T00:00:00Z","registry":"r","tool":"t","arguments":{"n":{"n":{"n":{"n":{"n":{"n":{"x":1}}}}}}}}`))
	f.Fuzz(func(t *testing.T, listings, calls []byte) {
		start := time.Now()
		s := registry.New()
		if _, err := LoadListings(bytes.NewReader(listings), s, nil); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		sum, err := Check(context.Background(), Config{Workers: 2}, s.Snapshot(), bytes.NewReader(calls), &out)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if limit := fuzzBase + fuzzPerByte*time.Duration(len(listings)+len(calls)); took > limit {
			t.Fatalf("%s for %d bytes, more than %s", took, len(listings)+len(calls), limit)
		}
		nonBlank := 0
		for i, l := range bytes.Split(calls, []byte("\n")) {
			if i == 0 {
				l = bytes.TrimPrefix(l, []byte("\xef\xbb\xbf"))
			}
			if !lines.Blank(l) {
				nonBlank++
			}
		}
		ds := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		if out.Len() == 0 {
			ds = nil
		}
		if len(ds) != nonBlank || sum.Calls != nonBlank {
			t.Fatalf("%d decisions (summary %d) for %d lines", len(ds), sum.Calls, nonBlank)
		}
		for _, d := range ds {
			var v struct {
				Class   schema.Class   `json:"class"`
				Verdict schema.Verdict `json:"verdict"`
				Reason  string         `json:"reason"`
			}
			if err := json.Unmarshal(d, &v); err != nil || !json.Valid(d) {
				t.Fatalf("decision %q: %v", d, err)
			}
			if v.Class.Index() < 0 || v.Verdict != schema.VerdictOf(v.Class) || (v.Class != schema.OK && v.Reason == "") {
				t.Fatalf("decision %s", d)
			}
		}
	})
}
