package sink

import (
	"encoding/binary"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/internal/strhash"
	"github.com/toolaudit/toolaudit/schema"
)

// lcStr is a LowCardinality(String) input column built as it is appended:
// the block's dictionary (each distinct value copied once into a
// pointer-free ColStr) and one key per row. ch-go's ColLowCardinality keeps
// every row's string and builds the dictionary when the block is encoded:
// two map lookups per value, the caller's strings kept alive until then,
// and a pointer per row for the garbage collector to scan. Consecutive rows
// mostly repeat a column's value (same analysis, build, topic, model...):
// the last value is checked before the index.
//
// The wire format is ClickHouse's (and ch-go's): a state prefix with the
// key serialization version, then per block a meta word (key width and
// "additional keys" + "update dictionary" flags), the dictionary, and the
// keys in the narrowest width that holds them.
type lcStr struct {
	dict proto.ColStr
	// index finds a value's key: open addressing with linear probing over
	// a power of two of slots, at most half of them used; the values
	// themselves are read from the dictionary (no copy, no pointer). The
	// map it replaced hashed and compared as much, plus a map call's
	// overhead per lookup and a copy of each value for its key.
	index []lcSlot
	keys  []uint32
	// The key of the last value appended (hasLast): consecutive rows
	// mostly repeat a column's value.
	lastKey uint32
	hasLast bool
}

var (
	_ proto.ColInput     = (*lcStr)(nil)
	_ proto.StateEncoder = (*lcStr)(nil)
)

// lcStr wire constants (ClickHouse SerializationLowCardinality).
const (
	lcSharedDictionariesWithAdditionalKeys = 1
	lcHasAdditionalKeys                    = 1 << 9
	lcNeedUpdateDictionary                 = 1 << 10
)

func (c *lcStr) Append(s string) {
	if c.hasLast && c.is(c.lastKey, s) {
		c.keys = append(c.keys, c.lastKey)
		return
	}
	k := c.key(s)
	c.lastKey, c.hasLast = k, true
	c.keys = append(c.keys, k)
}

// is reports whether dictionary value k is s: lengths first, then bytes.
func (c *lcStr) is(k uint32, s string) bool {
	p := c.dict.Pos[k]
	return p.End-p.Start == len(s) && string(c.dict.Buf[p.Start:p.End]) == s
}

// key returns the key of s, added to the dictionary if new.
func (c *lcStr) key(s string) uint32 {
	if 2*(c.dict.Rows()+1) > len(c.index) {
		c.grow()
	}
	h := strhash.String(s)
	tag := uint32(h>>32) | 1 // never 0: 0 is an empty slot
	mask := uint64(len(c.index) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := &c.index[i]
		switch {
		case sl.tag == 0:
			k := uint32(c.dict.Rows())
			c.dict.Append(s)
			*sl = lcSlot{tag, k}
			return k
		case sl.tag == tag && c.is(sl.key, s):
			return sl.key
		}
	}
}

// grow doubles the index (at least 64 slots) and places the dictionary's
// values in it again.
func (c *lcStr) grow() {
	slots := make([]lcSlot, max(64, 2*len(c.index)))
	mask := uint64(len(slots) - 1)
	for k := range c.dict.Rows() {
		p := c.dict.Pos[k]
		h := strhash.String(unsafe.String(unsafe.SliceData(c.dict.Buf[p.Start:]), p.End-p.Start)) // not kept
		i := h & mask
		for slots[i].tag != 0 {
			i = (i + 1) & mask
		}
		slots[i] = lcSlot{uint32(h>>32) | 1, uint32(k)}
	}
	c.index = slots
}

// lcSlot is a used slot's value: its hash's upper half (never 0; 0 marks
// an empty slot), so that most other values are passed over without
// reading their bytes, and its key.
type lcSlot struct {
	tag, key uint32
}

// appendRows appends the string field at off of each row. A value that
// is the very string of the row before (same bytes at the same address,
// as a hand-off's analysis, build, policy or topic mostly are) takes the
// same key without being read: within one call the caller's memory
// cannot change, so the same address and length are the same value.
// Across calls nothing of the caller's is trusted (the caller may reuse
// its memory).
func (c *lcStr) appendRows(rows []schema.Row, off uintptr) {
	var prev *byte
	prevLen := -1
	for i := range rows {
		s := *at[string](&rows[i], off)
		p := unsafe.StringData(s)
		if len(s) == prevLen && p == prev {
			c.keys = append(c.keys, c.lastKey)
			continue
		}
		prev, prevLen = p, len(s)
		c.Append(s)
	}
}

// Row returns the value of row i (for tests).
func (c *lcStr) Row(i int) string { return c.dict.Row(int(c.keys[i])) }

func (c *lcStr) Reset() {
	c.dict.Reset()
	clear(c.index)
	c.keys = c.keys[:0]
	c.lastKey, c.hasLast = 0, false
}

func (c *lcStr) Type() proto.ColumnType {
	return proto.ColumnTypeLowCardinality.Sub(proto.ColumnTypeString)
}

func (c *lcStr) Rows() int { return len(c.keys) }

func (c *lcStr) EncodeState(b *proto.Buffer) {
	b.PutInt64(lcSharedDictionariesWithAdditionalKeys)
}

func (c *lcStr) EncodeColumn(b *proto.Buffer) {
	if len(c.keys) == 0 {
		return
	}
	width := proto.KeyUInt32
	switch n := c.dict.Rows(); {
	case n <= 1<<8:
		width = proto.KeyUInt8
	case n <= 1<<16:
		width = proto.KeyUInt16
	}
	b.PutInt64(lcHasAdditionalKeys | lcNeedUpdateDictionary | int64(width))
	b.PutInt64(int64(c.dict.Rows()))
	c.dict.EncodeColumn(b)
	b.PutInt64(int64(len(c.keys)))
	switch width {
	case proto.KeyUInt8:
		for _, k := range c.keys {
			b.Buf = append(b.Buf, byte(k))
		}
	case proto.KeyUInt16:
		for _, k := range c.keys {
			b.Buf = binary.LittleEndian.AppendUint16(b.Buf, uint16(k))
		}
	default:
		for _, k := range c.keys {
			b.Buf = binary.LittleEndian.AppendUint32(b.Buf, k)
		}
	}
}

func (c *lcStr) WriteColumn(w *proto.Writer) {
	w.ChainBuffer(c.EncodeColumn)
}
