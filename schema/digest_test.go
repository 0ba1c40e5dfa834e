package schema

import (
	"strings"
	"testing"
)

// TestDigestJCS: the digest is of the canonical form (RFC 8785).
func TestDigestJCS(t *testing.T) {
	// Key order, whitespace and number spelling do not change the digest.
	a, err := Digest("t", []byte(`{"type":"object","properties":{"b":{"maximum":1.0E2},"a":{"minimum":0.000001}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Digest("t", []byte(` { "properties" : { "a":{"minimum":1e-6}, "b" : {"maximum":100} } , "type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if a != b || !strings.HasPrefix(a, "sha256:") || len(a) != len("sha256:")+64 {
		t.Fatalf("digests %s %s", a, b)
	}
	c, _ := Digest("u", []byte(`{"type":"object"}`))
	d, _ := Digest("t", []byte(`{"type":"object"}`))
	if c == d {
		t.Fatal("the name is not in the digest")
	}
}
