package jsontape

import (
	"bytes"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
)

// Equal reports whether a and b are equal under JSON Schema's equality
// (const, enum, uniqueItems): the same kind, numbers by value (1 and 1.0
// are equal; numbers are compared as float64), strings by their unescaped
// bytes, arrays item by item, objects with the same names and equal values
// in any order. a and b may belong to different tapes. The cost is linear
// in their size (n log n for objects of more than a few members).
func Equal(a, b Value) bool {
	k := a.Kind()
	if k != b.Kind() {
		return false
	}
	switch k {
	case Number:
		return a.Float64() == b.Float64()
	case String:
		return bytes.Equal(a.Str(), b.Str())
	case Array:
		if a.Len() != b.Len() {
			return false
		}
		x, y := a.Items(), b.Items()
		for x.Next() && y.Next() {
			if !Equal(x.Value(), y.Value()) {
				return false
			}
		}
		return true
	case Object:
		n := a.Len()
		if n != b.Len() {
			return false
		}
		if n <= smallObject {
			for m := a.Members(); m.Next(); {
				w, ok := b.member(m.Name())
				if !ok || !Equal(m.Value(), w) {
					return false
				}
			}
			return true
		}
		// Names are unique within an object: sorted, the two lists of
		// names must match one to one.
		x, y := a.sortedMembers(), b.sortedMembers()
		for i := range x {
			if !bytes.Equal(a.t.str0(x[i]), b.t.str0(y[i])) || !Equal(Value{a.t, x[i] + 1}, Value{b.t, y[i] + 1}) {
				return false
			}
		}
		return true
	}
	return true // null, true, false, or both no value
}

// member is Get for a name given as bytes.
func (v Value) member(name []byte) (Value, bool) {
	for m := v.Members(); m.Next(); {
		if bytes.Equal(m.Name(), name) {
			return m.Value(), true
		}
	}
	return Value{}, false
}

// sortedMembers returns the tape indices of v's member names, sorted by
// name.
func (v Value) sortedMembers() []uint32 {
	idx := make([]uint32, 0, v.Len())
	for m := v.Members(); m.Next(); {
		idx = append(idx, m.cur)
	}
	slices.SortFunc(idx, func(x, y uint32) int { return bytes.Compare(v.t.str0(x), v.t.str0(y)) })
	return idx
}

// Hash returns a hash of v consistent with Equal: equal values have equal
// hashes. It is keyed with a random seed per process, so inputs cannot be
// chosen to collide. The cost is linear in v's size.
func Hash(v Value) uint64 {
	switch k := v.Kind(); k {
	case Number:
		f := v.Float64()
		if f == 0 {
			f = 0 // -0 == 0
		}
		return mix(math.Float64bits(f), uint64(k))
	case String:
		return mix(maphash.Bytes(seed, v.Str()), uint64(k))
	case Array:
		h := uint64(k) | uint64(v.Len())<<8
		for it := v.Items(); it.Next(); {
			h = mix(h, Hash(it.Value()))
		}
		return h
	case Object:
		// Members in any order: a sum of per-member hashes.
		var sum uint64
		for m := v.Members(); m.Next(); {
			sum += mix(maphash.Bytes(seed, m.Name()), Hash(m.Value()))
		}
		return mix(sum, uint64(k)|uint64(v.Len())<<8)
	default:
		return mix(uint64(k), 0x9e3779b97f4a7c15)
	}
}

var (
	seed = maphash.MakeSeed()
	k0   = maphash.Bytes(seed, []byte("jsontape k0"))
	k1   = maphash.Bytes(seed, []byte("jsontape k1"))
)

// mix combines two words (the folded 128-bit product of wyhash).
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^k0, b^k1)
	return hi ^ lo
}
