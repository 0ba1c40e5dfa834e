package ecmare

import (
	"strconv"
	"strings"
	"testing"
)

// Patterns as MCP servers' schemas write them.
var benchPatterns = []struct{ name, p string }{
	{"identifier", `^[a-zA-Z_][a-zA-Z0-9_]*$`},
	{"nonblank", `^\S+$`},
	{"email", `^[\w.+-]+@[\w-]+(\.[\w-]+)+$`},
	{"uuid", `^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`},
	{"letters", `^\p{L}[\p{L}\s'-]{0,99}$`},
}

func BenchmarkTranslate(b *testing.B) {
	benchPatternsWith(b, func(p string) error { _, err := Translate(p); return err })
}

func BenchmarkCompile(b *testing.B) {
	benchPatternsWith(b, func(p string) error { _, err := Compile(p); return err })
}

func benchPatternsWith(b *testing.B, f func(string) error) {
	for _, bp := range benchPatterns {
		b.Run(bp.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := f(bp.p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTranslateLong: the cost per byte of a long pattern stays flat
// from 1 KiB to 64 KiB (linear translation).
func BenchmarkTranslateLong(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 16} {
		unit := `(?:[\s\w-]|\p{Lu}|\uD83D\uDE00.){2,3}|`
		p := strings.Repeat(unit, n/len(unit))
		b.Run(strconv.Itoa(len(p))+"B", func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if _, err := Translate(p); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
