package jsontape

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unsafe"
)

// Value is one value of a tape. The zero Value is no value (Kind Invalid):
// what Get returns for an absent member. A Value is valid until its
// tape's next Parse.
type Value struct {
	t *Tape
	i uint32
}

func (v Value) e() *entry { return &v.t.ents[v.i] }

// Exists reports whether v is a value (not the zero Value).
func (v Value) Exists() bool { return v.t != nil }

// Kind returns the type of v; Invalid for the zero Value.
func (v Value) Kind() Kind {
	if v.t == nil {
		return Invalid
	}
	return v.e().kind()
}

// IsNull reports whether v is absent or null: how the contract reads an
// optional member.
func (v Value) IsNull() bool { k := v.Kind(); return k == Invalid || k == Null }

// Len returns the number of members of an object or items of an array,
// and 0 for anything else.
func (v Value) Len() int {
	if k := v.Kind(); k != Object && k != Array {
		return 0
	}
	return int(v.e().tag >> tagShift)
}

// Size returns the number of tape entries of v and its descendants
// (member names included): 1 for a scalar. It measures the work a walk of
// v costs.
func (v Value) Size() int {
	if v.t == nil {
		return 0
	}
	if e := v.e(); e.kind() >= Object {
		return int(e.c - v.i)
	}
	return 1
}

// Str returns the unescaped bytes of a string, nil for another kind. The
// bytes belong to the tape: do not modify them.
func (v Value) Str() []byte {
	if v.Kind() != String {
		return nil
	}
	return v.t.str0(v.i)
}

// StrIs reports whether v is a string equal to s.
func (v Value) StrIs(s string) bool { return v.Kind() == String && string(v.t.str0(v.i)) == s }

// Raw returns the text of v in the input, as it was written (escapes and
// whitespace inside v included).
func (v Value) Raw() []byte {
	if v.t == nil {
		return nil
	}
	e := v.e()
	return v.t.src[e.a:e.b]
}

// Float64 returns the value of a number (±Inf beyond float64's range), 0
// for another kind.
func (v Value) Float64() float64 {
	if v.Kind() != Number {
		return 0
	}
	e := v.e()
	return parseNumber(v.t.src[e.a:e.b])
}

// parseNumber converts valid JSON number text. Integers of up to 15
// digits, most numbers in events, are converted exactly without strconv.
func parseNumber(b []byte) float64 {
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if x, ok := smallInt(d); ok {
		if neg {
			return -float64(x)
		}
		return float64(x)
	}
	f, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
	if err != nil && !math.IsInf(f, 0) {
		return 0 // unreachable for text Parse accepted
	}
	return f
}

// smallInt converts up to 15 digits, exactly representable as float64.
func smallInt(d []byte) (uint64, bool) {
	if len(d) > 15 {
		return 0, false
	}
	var x uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		x = x*10 + uint64(c-'0')
	}
	return x, true
}

// Get returns the member of an object named key (names compared
// unescaped), or the zero Value.
func (v Value) Get(key string) Value {
	if v.Kind() != Object {
		return Value{}
	}
	for m := v.Members(); m.Next(); {
		if string(m.Name()) == key {
			return m.Value()
		}
	}
	return Value{}
}

// cursor walks the members or items of a container: cur is the current
// one (a member's name), next the one after it.
type cursor struct {
	t              *Tape
	cur, next, end uint32
}

func (v Value) cursor(k Kind) cursor {
	if v.Kind() != k {
		return cursor{}
	}
	return cursor{t: v.t, next: v.i + 1, end: v.e().c}
}

// advance moves to the next member or item; a member's value is at
// offset 1 from its name, an item is its own value (offset 0).
func (c *cursor) advance(offset uint32) bool {
	if c.next >= c.end {
		return false
	}
	c.cur = c.next
	c.next = c.t.after(c.cur + offset)
	return true
}

// Members is a cursor over an object's members, in document order:
//
//	for m := v.Members(); m.Next(); { use(m.Name(), m.Value()) }
type Members struct{ cursor }

// Members returns a cursor over v's members; none when v is not an object.
func (v Value) Members() Members { return Members{v.cursor(Object)} }

// Next moves to the next member and reports whether there is one.
func (m *Members) Next() bool { return m.advance(1) }

// Name returns the current member's unescaped name.
func (m *Members) Name() []byte { return m.t.str0(m.cur) }

// Value returns the current member's value.
func (m *Members) Value() Value { return Value{m.t, m.cur + 1} }

// NameValue returns the current member's name as a String value, so that
// a name can be checked like any string (JSON Schema's propertyNames).
func (m *Members) NameValue() Value { return Value{m.t, m.cur} }

// Items is a cursor over an array's items:
//
//	for it := v.Items(); it.Next(); { use(it.Value()) }
type Items struct{ cursor }

// Items returns a cursor over v's items; none when v is not an array.
func (v Value) Items() Items { return Items{v.cursor(Array)} }

// Next moves to the next item and reports whether there is one.
func (it *Items) Next() bool { return it.advance(0) }

// Value returns the current item.
func (it *Items) Value() Value { return Value{it.t, it.cur} }

// AppendCompact appends v's text without the whitespace between tokens:
// the value as emitted (member order, escapes and number spelling kept),
// whatever the producer's layout.
func (v Value) AppendCompact(dst []byte) []byte {
	raw := v.Raw()
	if v.Kind() < Object || !v.t.spaced {
		return append(dst, raw...)
	}
	in := false
	run := 0
	for i := 0; i < len(raw); i++ {
		if in {
			// To the string's next quote or backslash, a word at a time
			// (its lowest flagged byte is the first one).
			for i+8 <= len(raw) {
				if m := quoteOrBackslash(binary.LittleEndian.Uint64(raw[i:])); m != 0 {
					i += bits.TrailingZeros64(m) >> 3
					break
				}
				i += 8
			}
			if i == len(raw) {
				break
			}
		}
		switch c := raw[i]; {
		case in:
			if c == '\\' {
				i++
			} else if c == '"' {
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, raw[run:i]...)
			run = i + 1
		}
	}
	return append(dst, raw[run:]...)
}
