package schema

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkDecodeCall: every call line of the corpus (sample and BFCL)
// decoded, the pipeline's first step for each record.
func BenchmarkDecodeCall(b *testing.B) {
	var lines [][]byte
	n := 0
	for _, p := range []string{"../testdata/corpus/sample/calls.jsonl", "../testdata/corpus/bfcl/calls.jsonl"} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
				n += len(l)
			}
		}
	}
	var d CallDecoder
	var c Call
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			_ = d.Decode(l, &c)
		}
	}
}
