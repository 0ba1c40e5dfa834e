package resolve_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// hostileShape is one shape of issue 10: a tool's inputSchema and calls of
// any size whose arguments have the shape.
type hostileShape struct {
	name   string
	schema string
	// items writes the arguments' items until the call is n bytes long.
	args func(b *bytes.Buffer, n int)
}

// repeat writes {"a":[item,item,...]} of about n bytes.
func repeat(item func(b *bytes.Buffer, i int)) func(*bytes.Buffer, int) {
	return func(b *bytes.Buffer, n int) {
		b.WriteString(`{"a":[`)
		for i := 0; b.Len() < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			item(b, i)
		}
		b.WriteString("]}")
	}
}

func keys(b *bytes.Buffer, n int) {
	b.WriteByte('{')
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(b, `"k%d":%d`, i, i)
	}
	b.WriteByte('}')
}

var hostileShapes = []hostileShape{
	{"ones", `{"type":"object","properties":{"a":{"type":"array"}}}`, repeat(func(b *bytes.Buffer, _ int) { b.WriteByte('1') })},
	{"empty-objects", `{"type":"object","properties":{"a":{"type":"array"}}}`, repeat(func(b *bytes.Buffer, _ int) { b.WriteString("{}") })},
	{"integers-checked", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer","minimum":0}}}}`,
		repeat(func(b *bytes.Buffer, i int) { fmt.Fprint(b, i) })},
	{"unique-items", `{"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}}`,
		repeat(func(b *bytes.Buffer, i int) { fmt.Fprint(b, i) })},
	{"distinct-keys-closed", `{"type":"object","properties":{"q":{}}}`, keys},
	{"distinct-keys-open", `{"type":"object","additionalProperties":{"type":"integer"}}`, keys},
	{"repeated-key", `{"type":"object","additionalProperties":true}`, func(b *bytes.Buffer, n int) {
		keys(b, n)
		b.Truncate(b.Len() - 1)
		b.WriteString(`,"k0":0}`)
	}},
	{"nested", `{"type":"object","properties":{"a":{"type":"array"}}}`, repeat(func(b *bytes.Buffer, _ int) {
		b.WriteString(strings.Repeat("[", 120) + strings.Repeat("]", 120))
	})},
	{"recursive-ref", `{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"},"v":{"type":"integer"}}}}}`,
		repeat(func(b *bytes.Buffer, _ int) {
			b.WriteString(strings.Repeat(`{"n":`, 60) + `{"v":1}` + strings.Repeat("}", 60))
		})},
	{"exponential-anyOf", `{"type":"object","properties":{"a":{"type":"array","items":{"$ref":"#/$defs/n"}}},"$defs":{"n":{"anyOf":[
		{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["z"]},{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["y"]}]}}}`,
		repeat(func(b *bytes.Buffer, _ int) {
			b.WriteString(strings.Repeat(`{"n":`, 30) + `{}` + strings.Repeat("}", 30))
		})},
	{"string-pattern", `{"type":"object","properties":{"s":{"type":"string","maxLength":10000000,"pattern":"^([a-z0-9._%+-]+)@([a-z0-9.-]+)$"}}}`,
		func(b *bytes.Buffer, n int) {
			b.WriteString(`{"s":"`)
			for b.Len() < n {
				b.WriteString("abcdefgh")
			}
			b.WriteString(`@example.org"}`)
		}},
	{"escaped-string", `{"type":"object","properties":{"s":{"type":"string"}}}`, func(b *bytes.Buffer, n int) {
		b.WriteString(`{"s":"`)
		for b.Len() < n {
			b.WriteString(`\u00e9\n\"`)
		}
		b.WriteString(`"}`)
	}},
	{"enum-items", `{"type":"object","properties":{"a":{"type":"array","items":{"enum":[` + enumValues(1000) + `]}}}}`,
		repeat(func(b *bytes.Buffer, i int) { fmt.Fprint(b, i%1000) })},
}

func enumValues(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, i)
	}
	return b.String()
}

// BenchmarkHostile: each hostile shape, from the raw call line to a
// decision, at 10 KB, 100 KB and 1 MB; ns/byte flat across the sizes is
// linear cost. One tool per shape, in a single registry.
func BenchmarkHostile(b *testing.B) {
	store := registry.New()
	for i, s := range hostileShapes {
		l, err := schema.DecodeListing([]byte(fmt.Sprintf(`{"type":"listing","event_id":"l%d","observed_at":"2026-01-01T00:00:00Z","registry":"r%d","tools":[{"name":"t","inputSchema":%s}]}`,
			i, i, strings.ReplaceAll(s.schema, "\n", ""))))
		if err != nil {
			b.Fatal(s.name, err)
		}
		store.Apply(l)
	}
	snap := store.Snapshot()
	for i, s := range hostileShapes {
		for _, size := range []int{10 << 10, 100 << 10, 1 << 20} {
			var line bytes.Buffer
			fmt.Fprintf(&line, `{"type":"call","event_id":"c","emitted_at":"2026-06-01T00:00:00Z","registry":"r%d","tool":"t","arguments":`, i)
			s.args(&line, size)
			line.WriteString("}")
			in := line.Bytes()
			name := fmt.Sprintf("%s/%dKB", s.name, size>>10)
			b.Run(name, func(b *testing.B) {
				var dec schema.CallDecoder
				var c schema.Call
				var d schema.Decision
				var r resolve.Resolver
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					if err := dec.Decode(in, &c); err != nil {
						resolve.Malformed(err, &d)
					} else {
						r.Resolve(snap, &c, &d)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(in)), "ns/byte")
				b.ReportMetric(0, "ns/op")
				if b.N > 0 && testing.Verbose() {
					b.Logf("%s: %s %s", name, d.Class, d.Reason)
				}
			})
		}
	}
}
