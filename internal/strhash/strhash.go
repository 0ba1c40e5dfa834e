// Package strhash hashes strings for the in-process hash tables of the
// hot paths (jsontape's repeated-name check, sink's LowCardinality
// dictionaries), where hash/maphash's call per value was a measured share
// of the cost. The hash is keyed with a seed drawn at start-up: the
// strings come from calls and tool servers, and keys they cannot learn
// keep them from choosing values that collide.
package strhash

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

var (
	seed = maphash.MakeSeed()
	k0   = maphash.String(seed, "strhash k0")
	k1   = maphash.String(seed, "strhash k1")
)

// String hashes s. A string of up to 16 bytes (nearly every name and
// dictionary value) is read as two words that overlap or repeat, as
// wyhash reads short keys, and mixed with the keys by one 128-bit
// multiplication; a longer one goes to maphash under the same seed.
func String(s string) uint64 {
	n := len(s)
	var x, y uint64
	switch {
	case n > 16:
		return maphash.String(seed, s)
	case n >= 8:
		x, y = load64(s, 0), load64(s, n-8)
	case n >= 4:
		x, y = uint64(load32(s, 0)), uint64(load32(s, n-4))
	case n > 0:
		x = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	hi, lo := bits.Mul64(x^uint64(n)<<59^k0, y^k1)
	return hi ^ lo
}

// Bytes hashes b as String does its string.
func Bytes(b []byte) uint64 {
	return String(unsafe.String(unsafe.SliceData(b), len(b)))
}

// load64 and load32 read s[i:] without a bounds check: String calls them
// with i+8 (i+4) <= len(s) only.
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

func load32(s string, i int) uint32 {
	return binary.LittleEndian.Uint32(unsafe.Slice(unsafe.StringData(s[i:]), 4))
}
