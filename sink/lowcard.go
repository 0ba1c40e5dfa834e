package sink

import (
	"encoding/binary"
	"strings"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/schema"
)

// lcStr is a LowCardinality(String) input column built as it is appended:
// the block's dictionary (each distinct value copied once into a
// pointer-free ColStr) and one key per row. ch-go's ColLowCardinality keeps
// every row's string and builds the dictionary when the block is encoded:
// two map lookups per value, the caller's strings kept alive until then,
// and a pointer per row for the garbage collector to scan. Consecutive rows
// mostly repeat a column's value (same analysis, build, topic, model...):
// the last value is checked before the map.
//
// The wire format is ClickHouse's (and ch-go's): a state prefix with the
// key serialization version, then per block a meta word (key width and
// "additional keys" + "update dictionary" flags), the dictionary, and the
// keys in the narrowest width that holds them.
type lcStr struct {
	dict    proto.ColStr
	index   map[string]lcEntry // value -> key
	keys    []uint32
	last    string // a copy owned by index
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
	if c.hasLast && s == c.last {
		c.keys = append(c.keys, c.lastKey)
		return
	}
	e, ok := c.index[s]
	if !ok {
		if c.index == nil {
			c.index = map[string]lcEntry{}
		}
		e = lcEntry{s: strings.Clone(s), k: uint32(c.dict.Rows())}
		c.dict.Append(s)
		c.index[e.s] = e
	}
	c.last, c.lastKey, c.hasLast = e.s, e.k, true
	c.keys = append(c.keys, e.k)
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

// lcEntry is a dictionary value: its key, and the copy the index owns
// (the last value is kept as it, not as the caller's string).
type lcEntry struct {
	s string
	k uint32
}

// Row returns the value of row i (for tests).
func (c *lcStr) Row(i int) string { return c.dict.Row(int(c.keys[i])) }

func (c *lcStr) Reset() {
	c.dict.Reset()
	clear(c.index)
	c.keys = c.keys[:0]
	c.last, c.lastKey, c.hasLast = "", 0, false
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
