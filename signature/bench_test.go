package signature

import (
	"maps"
	"runtime"
	"slices"
	"testing"
)

// corpusSchemas returns the distinct inputSchemas of the corpus' listings
// (sample, BFCL and the MCP manifests).
func corpusSchemas(b *testing.B) [][]byte {
	seen := map[string]bool{}
	var out [][]byte
	byRegistry := loadTools(b, corpus("sample", "listings.jsonl"), corpus("bfcl", "listings.jsonl"), corpus("mcp", "listings.jsonl"))
	for _, r := range slices.Sorted(maps.Keys(byRegistry)) {
		for _, t := range byRegistry[r] {
			if !seen[string(t.raw)] {
				seen[string(t.raw)] = true
				out = append(out, t.raw)
			}
		}
	}
	return out
}

// BenchmarkCompileCorpus compiles every distinct inputSchema of the
// corpus once per iteration, and reports what the compiled signatures
// keep (retained-B/schema, measured after a GC with them alive).
func BenchmarkCompileCorpus(b *testing.B) {
	schemas := corpusSchemas(b)
	sigs := make([]*Signature, len(schemas))
	b.ReportAllocs()
	for b.Loop() {
		for i, s := range schemas {
			sig, err := Compile(s)
			if err != nil {
				b.Fatal(err)
			}
			sigs[i] = sig
		}
	}
	b.StopTimer()
	clear(sigs)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for i, s := range schemas {
		sigs[i], _ = Compile(s)
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	runtime.KeepAlive(sigs)
	b.ReportMetric(float64(len(schemas)), "schemas")
	b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/float64(len(schemas)), "retained-B/schema")
}
