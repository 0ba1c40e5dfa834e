package sink

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go"
	"github.com/ClickHouse/ch-go/proto"
	"github.com/zeebo/xxh3"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// Batch is the rows of one INSERT, gathered in ClickHouse's column form as
// they are appended: each String column one byte slice in its wire form
// (wireStr), each LowCardinality column a dictionary plus keys (lcStr), each number
// column a slice of numbers. Those buffers hold no pointers, so the garbage
// collector does not scan them, and Reset keeps their capacity, so a
// writer that reuses its batches stops allocating once they have grown.
// Rows are copied: nothing of an appended row is retained.
//
// A Batch is not safe for concurrent use. Write it with its own Write (or
// ClickHouse.WriteBatch); a failed write leaves it intact for a retry.
type Batch struct {
	c       *ClickHouse
	rows    int
	clamped int
	// The columns by kind, each with its field's offset in schema.Row:
	// Append fills one column at a time for all the rows it is given.
	lcCols   []field[*lcStr]
	strCols  []field[*wireStr]
	boolCols []field[*proto.ColBool]
	timeCols []timeField
	i32Cols  []field[*proto.ColInt32]
	i64Cols  []field[*proto.ColInt64]
	resets   []func()
	input    proto.Input
	// For Size: the variable-width columns, and the bytes per row of the
	// others.
	strs   []*wireStr
	lcs    []*lcStr
	perRow int

	// Set by Reserve: the rows and bytes the batch will be filled to; its
	// buffers are sized for them once its first rows show their widths.
	reserveRows, reserveBytes int
	// The archive's rows (AppendEvents); nil until the first.
	events *events
	// For token.
	hash    xxh3.Hasher128
	scratch proto.Buffer
}

// field is a column and the offset of its field in schema.Row.
type field[C any] struct {
	off uintptr
	col C
}

// timeField is a DateTime64 column's field.
type timeField struct {
	field[*proto.ColDateTime64]
	zeroIsWriteTime bool
}

// offsetOf returns the offset in schema.Row of the field that acc (a
// schema.Column accessor) returns. An accessor of anything but a field of
// the row it is given is a bug of the column table: it panics.
func offsetOf[T any](acc func(*schema.Row) *T) uintptr {
	var r schema.Row
	base, p := uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(acc(&r)))
	if p < base || p+unsafe.Sizeof(*new(T)) > base+unsafe.Sizeof(r) {
		panic("sink: a column's accessor does not return a field of the row")
	}
	return p - base
}

// appendField appends the field of every row to each column of fs.
func appendField[T any, C interface{ Append(T) }](fs []field[C], rows []schema.Row) {
	for _, f := range fs {
		for i := range rows {
			f.col.Append(*at[T](&rows[i], f.off))
		}
	}
}

// at returns the field at off of row r (offsetOf).
func at[T any](r *schema.Row, off uintptr) *T { return (*T)(unsafe.Add(unsafe.Pointer(r), off)) }

// Appender returns c as a batch appender (appender.Batcher): its batches
// are Batches, rows encoded into the INSERT's columns as they are
// appended, and its errors are marked permanent as the contract says.
func (c *ClickHouse) Appender() appender.Batcher { return chAppender{c} }

type chAppender struct{ c *ClickHouse }

func (a chAppender) Write(ctx context.Context, rows []schema.Row) error { return a.c.Write(ctx, rows) }
func (a chAppender) NewBatch() appender.Batch                           { return a.c.NewBatch() }

var _ appender.Batch = (*Batch)(nil)

// Archives reports true: a Batch stores the call records it is given in
// table call_events (AppendEvents).
func (b *Batch) Archives() bool { return true }

// NewBatch returns an empty batch for c.
func (c *ClickHouse) NewBatch() *Batch {
	b := &Batch{c: c}
	for i := range columns {
		col := &columns[i]
		var data proto.ColInput
		var reset func()
		switch {
		case col.Str != nil && col.Type == schema.TypeLowCardinality:
			lc := new(lcStr)
			data, reset = lc, lc.Reset
			b.lcs = append(b.lcs, lc)
			b.lcCols = append(b.lcCols, field[*lcStr]{offsetOf(col.Str), lc})
		case col.Str != nil:
			s := new(wireStr)
			data, reset = s, s.Reset
			b.strs = append(b.strs, s)
			b.strCols = append(b.strCols, field[*wireStr]{offsetOf(col.Str), s})
		case col.Bool != nil:
			v := new(proto.ColBool)
			data, reset = v, v.Reset
			b.perRow++
			b.boolCols = append(b.boolCols, field[*proto.ColBool]{offsetOf(col.Bool), v})
		case col.Time != nil:
			v := new(proto.ColDateTime64).WithPrecision(proto.PrecisionMilli).WithLocation(time.UTC)
			data, reset = v, v.Reset
			b.perRow += 8
			b.timeCols = append(b.timeCols, timeField{field[*proto.ColDateTime64]{offsetOf(col.Time), v}, col.ZeroIsWriteTime})
		case col.Int32 != nil:
			v := new(proto.ColInt32)
			data, reset = v, v.Reset
			b.perRow += 4
			b.i32Cols = append(b.i32Cols, field[*proto.ColInt32]{offsetOf(col.Int32), v})
		default:
			v := new(proto.ColInt64)
			data, reset = v, v.Reset
			b.perRow += 8
			b.i64Cols = append(b.i64Cols, field[*proto.ColInt64]{offsetOf(col.Int64), v})
		}
		b.resets = append(b.resets, reset)
		b.input = append(b.input, proto.InputColumn{Name: col.Name, Data: data})
	}
	return b
}

// Append encodes rows into the batch. A zero DecidedAt is stored as the
// time of the Append; see ClickHouse.Write for the other time rules.
//
// It fills one column at a time for all the rows (a worker's hand-off of a
// few hundred): a LowCardinality column's dictionary index stays in cache
// across them, where row by row the lookups of twenty-one of them took
// turns.
func (b *Batch) Append(rows []schema.Row) {
	now := time.Now()
	for _, f := range b.lcCols { // most columns: no generic call per value
		f.col.appendRows(rows, f.off)
	}
	for _, f := range b.strCols {
		f.col.appendRows(rows, f.off)
	}
	appendField[bool](b.boolCols, rows)
	for _, f := range b.timeCols {
		for i := range rows {
			t := *at[time.Time](&rows[i], f.off)
			if t.IsZero() && f.zeroIsWriteTime {
				t = now
			}
			ms, cl := storeMilli(t)
			f.col.AppendRaw(proto.DateTime64(ms))
			if cl {
				b.clamped++
			}
		}
	}
	appendField[int32](b.i32Cols, rows)
	appendField[int64](b.i64Cols, rows)
	b.rows += len(rows)
	if b.reserveRows > 0 && b.rows >= reserveSample {
		b.reserve()
	}
}

// reserveSample is how many rows show the widths of the columns before
// Reserve sizes the buffers (a worker hands off 256 at a time).
const reserveSample = 200

// Reserve says how far the batch will be filled: up to rows rows, or
// bytes bytes (Size). Once its first rows are in, it sizes its String
// columns and LowCardinality keys for that, so that its first fill does
// not grow them step by step: doubling from nothing to tens of megabytes
// copies as much as it keeps, all of it into fresh pages, and at start-up
// both batches do so at once. A batch that has been filled before has its
// buffers already; Reserve is for a new one.
func (b *Batch) Reserve(rows, bytes int) { b.reserveRows, b.reserveBytes = rows, bytes }

func (b *Batch) reserve() {
	rows := b.reserveRows
	b.reserveRows = 0
	if size := b.Size(); size > 0 && b.reserveBytes > 0 {
		rows = min(rows, int(int64(b.reserveBytes)*int64(b.rows)/int64(size)))
	}
	if rows <= b.rows {
		return // the first hand-off filled it already
	}
	// An eighth more than the sample's widths: rows vary.
	for _, s := range b.strs {
		if want := len(s.buf) * rows / b.rows * 9 / 8; want > cap(s.buf) {
			s.buf = append(make([]byte, 0, want), s.buf...)
		}
	}
	for _, lc := range b.lcs {
		lc.keys = slices.Grow(lc.keys, rows-len(lc.keys))
	}
}

// Len is the number of rows appended since the last Reset.
func (b *Batch) Len() int { return b.rows }

// Size is the bytes of the rows appended since the last Reset, as they are
// held (the String columns' wire form, four bytes per LowCardinality key
// plus the dictionaries, the fixed-width columns), archive rows included.
func (b *Batch) Size() int {
	n := b.rows*b.perRow + b.events.size()
	for _, s := range b.strs {
		n += len(s.buf)
	}
	for _, lc := range b.lcs {
		n += 4*len(lc.keys) + len(lc.dict.Buf)
	}
	return n
}

// Reset empties the batch, keeping its buffers.
func (b *Batch) Reset() {
	for _, r := range b.resets {
		r()
	}
	b.events.reset()
	b.rows, b.clamped = 0, 0
}

// Write stores the batch as one INSERT (ClickHouse.WriteBatch).
func (b *Batch) Write(ctx context.Context) error { return b.c.WriteBatch(ctx, b) }

// WriteBatch stores b as one INSERT and returns nil only when ClickHouse has
// acknowledged it. b is left as it was: on error the caller may write it
// again (see the package doc); on success it Resets it to reuse it.
func (c *ClickHouse) WriteBatch(ctx context.Context, b *Batch) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if b.rows == 0 && b.events.rows() == 0 {
		return nil
	}
	start := time.Now()
	var err error
	if b.events.rows() > 0 {
		// The archive first: once the decisions are acknowledged, the
		// caller commits the records, which must then be archived.
		err = c.insertEvents(ctx, b)
	}
	if err == nil && b.rows > 0 {
		err = c.insert(ctx, b)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		err = markPermanent(fmt.Errorf("sink: clickhouse write of %d rows: %w", b.rows, err))
		c.log.Warn("sink: write failed", "rows", b.rows, "kind", Kind(err), "retryable", IsRetryable(err), "err", err)
	} else if cl := b.clamped + b.events.clampedTimes(); cl > 0 {
		c.m.clamped.Add(float64(cl))
		c.log.Warn("sink: times out of range clamped", "count", cl)
	}
	c.m.observe(b.rows, start, err)
	return err
}

func (c *ClickHouse) insert(ctx context.Context, b *Batch) error {
	cl, err := c.pool.get(ctx)
	if err != nil {
		return err
	}
	settings := append(insertSettings[:len(insertSettings):len(insertSettings)],
		ch.Setting{Key: "insert_deduplication_token", Value: b.tokenOf(b.input)})
	err = cl.Do(ctx, ch.Query{Body: c.insertSQL, Input: b.input, Settings: settings})
	c.pool.put(cl, err)
	return err
}

// tokenOf names the content of one of the batch's inserts for ClickHouse's insert deduplication
// (insert_deduplication_token): a 128-bit xxh3 of every column, so the same
// rows, retried after an INSERT whose acknowledgement was lost, have the
// same token and are dropped, in decisions and in the rollup, as they were
// when the server hashed the blocks itself. Hashing here is cheaper by far:
// with the server hashing 300k rows (three 100k-row INSERTs into fresh
// tables), the engine spent 1.23 - 1.69 s of CPU, with a token 0.86 - 1.10
// s (three rounds); xxh3 takes a few milliseconds per 100k rows.
func (b *Batch) tokenOf(input proto.Input) string {
	h := &b.hash
	h.Reset()
	var n [8]byte
	for _, col := range input {
		var data []byte
		if s, ok := col.Data.(*wireStr); ok {
			data = s.buf
		} else {
			b.scratch.Reset()
			col.Data.EncodeColumn(&b.scratch)
			data = b.scratch.Buf
		}
		binary.LittleEndian.PutUint64(n[:], uint64(len(data)))
		h.Write(n[:])
		h.Write(data)
	}
	sum := h.Sum128().Bytes()
	return "toolaudit-" + hex.EncodeToString(sum[:])
}
