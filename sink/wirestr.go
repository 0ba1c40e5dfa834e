package sink

import (
	"encoding/binary"
	"math/bits"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/schema"
)

// wireStr is a String input column kept in its wire form as rows are
// appended: each value's uvarint length, then its bytes. ch-go's ColStr
// keeps the bytes plus a 16-byte position per row and copies every value
// again into the connection's buffer when the block is written; wireStr
// hands its one buffer to the connection as it is (Writer.ChainWrite), so
// a batch costs a third less memory and one copy less. The buffer grows by
// doubling: append's 1.25x steps for large slices would copy a batch's
// column about four times while it first fills.
type wireStr struct {
	buf  []byte
	rows int
}

var _ proto.ColInput = (*wireStr)(nil)

func (c *wireStr) Append(s string) { appendWire(c, s) }

// AppendBytes is Append of a byte slice.
func (c *wireStr) AppendBytes(s []byte) { appendWire(c, s) }

// appendRows appends the string field at off of each row: the room for
// all of them, exactly, checked once (a hand-off's worth; Reserve's sizes
// hold), instead of a varint's maximum per row.
func (c *wireStr) appendRows(rows []schema.Row, off uintptr) {
	n := len(c.buf)
	for i := range rows {
		l := uint(len(*at[string](&rows[i], off)))
		n += int(l) + (bits.Len(l|1)+6)/7 // the bytes and their length's varint
	}
	if n > cap(c.buf) {
		c.buf = growTo(c.buf, n)
	}
	buf := c.buf
	for i := range rows {
		s := *at[string](&rows[i], off)
		buf = binary.AppendUvarint(buf, uint64(len(s)))
		buf = append(buf, s...)
	}
	c.buf = buf
	c.rows += len(rows)
}

func appendWire[S string | []byte](c *wireStr, s S) {
	if n := len(c.buf) + binary.MaxVarintLen64 + len(s); n > cap(c.buf) {
		c.buf = growTo(c.buf, n)
	}
	c.buf = binary.AppendUvarint(c.buf, uint64(len(s)))
	c.buf = append(c.buf, s...)
	c.rows++
}

// growTo returns b with room for n bytes in all, at least twice its
// capacity.
func growTo(b []byte, n int) []byte {
	nb := make([]byte, len(b), max(n, 2*cap(b), 4096))
	copy(nb, b)
	return nb
}

func (c *wireStr) Reset() {
	c.buf = c.buf[:0]
	c.rows = 0
}

func (c *wireStr) Type() proto.ColumnType { return proto.ColumnTypeString }

func (c *wireStr) Rows() int { return c.rows }

// EncodeColumn copies the column into b (the compressed path: the block is
// encoded whole, then compressed).
func (c *wireStr) EncodeColumn(b *proto.Buffer) { b.Buf = append(b.Buf, c.buf...) }

// WriteColumn hands the buffer to w without copying; w holds it until its
// Flush, which a successful INSERT does before it returns. A failed INSERT
// may leave it referenced by its connection's writer: the pool closes
// every connection whose INSERT failed (pool.put), so that writer never
// sends again.
func (c *wireStr) WriteColumn(w *proto.Writer) { w.ChainWrite(c.buf) }
