package diff

import (
	"strconv"
	"strings"
	"testing"
)

func propsSchema(n int, typ string) []byte {
	var b strings.Builder
	b.WriteString(`{"properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"p` + strconv.Itoa(i) + `":{"type":"` + typ + `"}`)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// BenchmarkDiffSchemas: cost per property of a schema of n properties,
// all retyped; ns/op over n should not grow with n.
func BenchmarkDiffSchemas(b *testing.B) {
	for _, n := range []int{100, 2000, 32000} {
		a, c := propsSchema(n, "string"), propsSchema(n, "integer")
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(len(a) + len(c)))
			for b.Loop() {
				if _, err := DiffSchemas(a, c); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
