package check

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"
)

// BenchmarkCheck: both corpora's calls (3,399 lines) through Check, from
// the bytes of the file to decision lines discarded, on every core.
func BenchmarkCheck(b *testing.B) {
	var calls []byte
	for _, part := range []string{"sample", "bfcl"} {
		data, err := os.ReadFile(corpus(part, "calls.jsonl"))
		if err != nil {
			b.Fatal(err)
		}
		calls = append(calls, data...)
	}
	snap := load(b, corpus("sample", "listings.jsonl"), corpus("bfcl", "listings.jsonl"))
	b.SetBytes(int64(len(calls)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Check(context.Background(), Config{}, snap, bytes.NewReader(calls), io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
