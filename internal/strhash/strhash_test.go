package strhash

import (
	"fmt"
	"strings"
	"testing"
)

// Strings that a hash reading too few bytes, or not the length, would
// collide on: every length around the 4-, 8- and 16-byte reads, zero
// bytes, one byte changed at each position, swapped bytes.
func cases() []string {
	var out []string
	for n := 0; n <= 40; n++ {
		z := strings.Repeat("\x00", n)
		out = append(out, z, strings.Repeat("a", n))
		for i := 0; i < n; i++ {
			b := []byte(z)
			b[i] = 1
			out = append(out, string(b))
		}
	}
	out = append(out, "ab", "ba", "abc", "acb", "session-0001", "session-0010", "tools.read_file", "tools.read_fila")
	for i := 0; i < 5000; i++ {
		out = append(out, fmt.Sprintf("s-%d", i), fmt.Sprintf("%064x", i))
	}
	return out
}

func TestDistinct(t *testing.T) {
	seen := map[uint64]string{}
	for _, s := range cases() {
		if _, dup := seen[String(s)]; dup && seen[String(s)] != s {
			t.Fatalf("String(%q) == String(%q)", s, seen[String(s)])
		}
		seen[String(s)] = s
	}
}

func TestBytesIsString(t *testing.T) {
	for _, s := range cases() {
		if String(s) != Bytes([]byte(s)) {
			t.Fatalf("Bytes(%q) != String", s)
		}
	}
	if Bytes(nil) != String("") {
		t.Fatal("Bytes(nil) != String(\"\")")
	}
}

// The hash of a string depends on its bytes only, not on where they are.
func TestSameBytesElsewhere(t *testing.T) {
	for _, s := range cases() {
		b := make([]byte, len(s)+3)
		copy(b[3:], s)
		if Bytes(b[3:]) != String(s) {
			t.Fatalf("Bytes of %q at an odd address differs", s)
		}
	}
}
