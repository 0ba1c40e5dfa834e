package fetchpool

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSizeClasses: a class fits its request with at most a quarter to
// spare, and classes grow strictly.
func TestSizeClasses(t *testing.T) {
	for n := 1; n <= 1<<26; n += 1 + n/97 {
		c := classOf(n)
		size := classSize(c)
		if size < n || (n > 1<<minClassShift && 4*size > 5*n+4) {
			t.Fatalf("classOf(%d) = %d, size %d", n, c, size)
		}
		if c > 0 && classSize(c-1) >= n {
			t.Fatalf("classOf(%d) = %d, but class %d (size %d) fits", n, c, c-1, classSize(c-1))
		}
	}
	for c := 1; c < numClasses; c++ {
		if classSize(c) <= classSize(c-1) || classOf(classSize(c)) != c {
			t.Fatalf("class %d: size %d, previous %d, classOf(size) %d", c, classSize(c), classSize(c-1), classOf(classSize(c)))
		}
	}
}

// TestDecompressBytesFit: a snappy batch gets a buffer that holds it
// decoded, so the codec decodes into it rather than allocating.
func TestDecompressBytesFit(t *testing.T) {
	var p Pool
	for _, n := range []int{100, 5000, 70_000, 1 << 20, 3<<20 + 17} {
		raw := bytes.Repeat([]byte(`{"tool":"x","arguments":{}}`), n/27+1)[:n]
		b := p.GetDecompressBytes(s2.EncodeSnappy(nil, raw), kgo.CodecSnappy)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("%d bytes decoded: buffer len %d cap %d", n, len(b), cap(b))
		}
		out, err := s2.Decode(b[:cap(b)], s2.EncodeSnappy(nil, raw))
		if err != nil || &out[0] != &b[:1][0] {
			t.Fatalf("%d bytes: decoded into another buffer (%v)", n, err)
		}
		p.PutDecompressBytes(b)
	}
	// A header claiming more than the largest class gets no buffer: the
	// client checks the claim against its limit before the codec
	// allocates.
	huge := s2.EncodeSnappy(nil, make([]byte, classSize(numClasses-1)+1))
	if b := p.GetDecompressBytes(huge, kgo.CodecSnappy); b != nil {
		t.Fatalf("oversized batch: got a buffer of cap %d", cap(b))
	}
	if classSize(numClasses-1) != 64<<20 {
		t.Fatalf("largest class %d, want 64 MiB", classSize(numClasses-1))
	}
	// Buffers of sizes no class has (grown by the client, or tiny) are
	// kept in the class below or dropped.
	p.PutDecompressBytes(make([]byte, 0, 10_000))
	p.PutDecompressBytes(make([]byte, 0, 10))
}
