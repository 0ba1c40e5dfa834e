package jsontape

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// adversarialShapes are the hostile shapes of issue 10 that reach the
// parser: one value per two bytes, empty objects, many distinct names,
// a long string (escaped and not), deep nesting repeated.
var adversarialShapes = []struct {
	name  string
	build func(n int) []byte
}{
	{"ones", func(n int) []byte { return adversarial("[1,1]", n) }},
	{"empty-objects", func(n int) []byte { return adversarial("[{},{}]", n) }},
	{"distinct-keys", func(n int) []byte { return adversarial(`{"a":1,"b":2}`, n) }},
	{"long-string", func(n int) []byte { return []byte(`"` + strings.Repeat("abcdefgh", n/8) + `"`) }},
	{"escaped-string", func(n int) []byte { return []byte(`"` + strings.Repeat(`\u00e9\n`, n/8) + `"`) }},
	{"nested", func(n int) []byte {
		one := strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1)
		return adversarial("["+one+","+one+"]", n)
	}},
}

// BenchmarkAdversarial reports ns/byte for each hostile shape at 10 KB,
// 100 KB and 1 MB: a flat ns/byte across sizes is linear cost.
func BenchmarkAdversarial(b *testing.B) {
	for _, s := range adversarialShapes {
		for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
			in := s.build(size)
			b.Run(s.name+"/"+sizeName(size), func(b *testing.B) {
				var tp Tape
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					if err := tp.Parse(in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in)), "ns/byte")
			})
		}
	}
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return itoa(n>>20) + "MB"
	}
	return itoa(n>>10) + "KB"
}

// BenchmarkParseCorpus parses every call line of the corpus (sample and
// BFCL, ~600 bytes each): the parse that CallDecoder.Decode starts with.
func BenchmarkParseCorpus(b *testing.B) {
	var lines [][]byte
	for _, p := range []string{"../testdata/corpus/sample/calls.jsonl", "../testdata/corpus/bfcl/calls.jsonl"} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		lines = append(lines, bytes.Split(bytes.TrimSpace(data), []byte("\n"))...)
	}
	var tp Tape
	b.SetBytes(int64(len(bytes.Join(lines, nil))))
	for b.Loop() {
		for _, l := range lines {
			if err := tp.Parse(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(lines)), "ns/call")
}
