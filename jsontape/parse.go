package jsontape

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/toolaudit/toolaudit/internal/strhash"
)

// Limits of Parse.
const (
	// MaxDepth is the deepest nesting of objects and arrays accepted. The
	// corpus's deepest event nests 12 levels.
	MaxDepth = 128
	// MaxSize bounds the input: offsets and counts are 32-bit, lengths
	// 28-bit.
	MaxSize = 1 << 28
)

// Kind is the JSON type of a value.
type Kind uint8

// Kinds. The zero Kind is that of the zero Value (no value).
const (
	Invalid Kind = iota
	Null
	False
	True
	Number
	String
	Object
	Array
)

var kindNames = [...]string{"invalid", "null", "false", "true", "number", "string", "object", "array"}

func (k Kind) String() string { return kindNames[k&7] }

// entry is one value of the tape.
//
//	tag   kind (bits 0-2), escaped string (bit 3), and from bit 4 on: the
//	      unescaped length of a string, the members or items of a container
//	a, b  the value's text in the input, [a, b): quotes and brackets included
//	c     container: index of the entry after its last descendant;
//	      escaped string: offset of its unescaped bytes in Tape.strs
type entry struct {
	tag, a, b, c uint32
}

const (
	escBit   = 1 << 3
	tagShift = 4
)

func (e *entry) kind() Kind { return Kind(e.tag & 7) }

// frame is an open container during the parse.
type frame struct {
	i   uint32 // tape index of the container
	n   uint32 // values completed in it: members or items
	key uint32 // object: tape index of the current member's name
	obj bool
	// Object: the names so far take distinct bits of names (nameBit),
	// so none repeats, unless alike is set: two took the same bit, or
	// one was not read by name's fast path, and repeated must decide.
	alike bool
	names [4]uint64
}

// Tape is a parsed JSON text. The zero value is ready to use; a Tape is not
// safe for concurrent use.
type Tape struct {
	src   []byte
	ents  []entry
	strs  []byte // unescaped strings
	stack []frame
	set   []uint32 // hash table scratch of the repeated-name check
	rep   error    // the first repeated name found
	// spaced: the text has whitespace between its tokens; without any,
	// every value's text is already compact.
	spaced bool
}

// retain is the most tape entries (16 bytes each) and string bytes a Tape
// keeps from one Parse to a much smaller next one: a rare huge document
// does not pin its buffers for good.
const retain = 1 << 16

// Parse parses src into t. On success t.Root() is the value; src must not
// be modified while the tape is in use (strings without escapes are views
// of it). On failure the error is an *Error, and Root is the zero Value,
// except for ErrRepeated: the parse goes on after the first repeated name
// and, when the rest is valid, the tape stays readable (Get and
// Members see every copy), so that a caller can still say which event it
// rejects (by a member that is not repeated).
func (t *Tape) Parse(src []byte) error {
	t.src = src
	if len(src) >= MaxSize {
		t.ents = t.ents[:0]
		return &Error{Kind: ErrTooLarge, msg: "JSON text of " + strconv.Itoa(len(src)) + " bytes, larger than " + strconv.Itoa(MaxSize>>20) + " MiB"}
	}
	t.reserve(src)
	t.ents = t.ents[:0]
	t.strs = t.strs[:0]
	t.rep = nil
	t.spaced = false
	err := t.parse(src)
	if err != nil {
		t.ents = t.ents[:0]
		return err
	}
	return t.rep
}

// reserve sizes the tape for src in one allocation when it is large: every
// value but the first follows one of '[' '{' ',' ':', so their count
// bounds the entries, and no growth leaves copies behind as garbage. A
// small input releases buffers a huge one left.
func (t *Tape) reserve(src []byte) {
	if len(src) < 4096 {
		if cap(t.ents) > retain {
			t.ents = nil
		}
		if cap(t.strs) > retain*16 {
			t.strs = nil
		}
		if cap(t.set) > retain {
			t.set = nil
		}
		return
	}
	need := 1 + bytes.Count(src, []byte{','}) + bytes.Count(src, []byte{':'}) +
		bytes.Count(src, []byte{'['}) + bytes.Count(src, []byte{'{'})
	// Each value but the first also takes a byte of its own: at most
	// (len+1)/2 values, 8 bytes of tape per byte of input.
	need = min(need, (len(src)+1)/2)
	if cap(t.ents) < need || (cap(t.ents) > retain && cap(t.ents) > 4*need) {
		t.ents = make([]entry, 0, need)
	}
	if cap(t.strs) > retain*16 && cap(t.strs) > 4*len(src) {
		t.strs = nil
	}
}

// Root returns the parsed value; the zero Value when the last Parse failed.
func (t *Tape) Root() Value {
	if len(t.ents) == 0 {
		return Value{}
	}
	return Value{t, 0}
}

// Source returns the input of the last Parse.
func (t *Tape) Source() []byte { return t.src }

// Entries returns the number of tape entries (values and member names).
func (t *Tape) Entries() int { return len(t.ents) }

func (t *Tape) parse(src []byte) error {
	n := len(src)
	st := t.stack[:0]
	defer func() { t.stack = st[:0] }()
	i := t.skipWS(src, 0)
	for {
		// i is at the first byte of a value. (The offsets are never
		// negative: compared as unsigned, the bound also proves the
		// index in range, and the compiler drops its bounds check.)
		if uint(i) >= uint(n) {
			return t.syntax(i, "unexpected end of input")
		}
		open := false
		switch c := src[i]; c {
		case '{', '[':
			if len(st) == MaxDepth {
				return &Error{Kind: ErrDepth, Offset: i, msg: "nesting deeper than " + strconv.Itoa(MaxDepth) + " levels at byte " + strconv.Itoa(i)}
			}
			k, end := Object, byte('}')
			if c == '[' {
				k, end = Array, ']'
			}
			idx := uint32(len(t.ents))
			t.ents = append(t.ents, entry{tag: uint32(k), a: uint32(i)})
			i = t.skipWS(src, i+1)
			if i < n && src[i] == end {
				i++
				e := &t.ents[idx]
				e.b, e.c = uint32(i), idx+1
				break
			}
			// A zero frame, then its fields: a frame literal was built on
			// the stack and copied in 16-byte moves, which stalled on the
			// smaller stores that had just written it.
			st = append(st, frame{})
			f := &st[len(st)-1]
			f.i, f.obj = idx, c == '{'
			open = true
			if c == '{' {
				var err error
				if i, err = t.name(src, i, f); err != nil {
					return err
				}
			}
		case '"':
			var err error
			if i, err = t.str(src, i); err != nil {
				return err
			}
		case 't':
			if i+4 > n || string(src[i:i+4]) != "true" {
				return t.syntax(i, "invalid literal")
			}
			t.ents = append(t.ents, entry{tag: uint32(True), a: uint32(i), b: uint32(i + 4)})
			i += 4
		case 'f':
			if i+5 > n || string(src[i:i+5]) != "false" {
				return t.syntax(i, "invalid literal")
			}
			t.ents = append(t.ents, entry{tag: uint32(False), a: uint32(i), b: uint32(i + 5)})
			i += 5
		case 'n':
			if i+4 > n || string(src[i:i+4]) != "null" {
				return t.syntax(i, "invalid literal")
			}
			t.ents = append(t.ents, entry{tag: uint32(Null), a: uint32(i), b: uint32(i + 4)})
			i += 4
		default:
			if c != '-' && (c < '0' || c > '9') {
				return t.unexpected(src, i)
			}
			j, ok := number(src, i)
			if !ok {
				return t.syntax(i, "invalid number")
			}
			t.ents = append(t.ents, entry{tag: uint32(Number), a: uint32(i), b: uint32(j)})
			i = j
		}
		if open {
			continue
		}
		// A value is complete: close the containers it completes.
		for {
			if len(st) == 0 {
				if i = t.skipWS(src, i); i != n {
					return t.syntax(i, "data after the JSON value")
				}
				return nil
			}
			i = t.skipWS(src, i)
			if uint(i) >= uint(n) {
				return t.syntax(i, "unexpected end of input")
			}
			f := &st[len(st)-1]
			f.n++
			c := src[i]
			if c == ',' {
				i = t.skipWS(src, i+1)
				if f.obj {
					var err error
					if i, err = t.name(src, i, f); err != nil {
						return err
					}
				}
				break
			}
			if (f.obj && c != '}') || (!f.obj && c != ']') {
				if f.obj {
					return t.syntax(i, "expected ',' or '}'")
				}
				return t.syntax(i, "expected ',' or ']'")
			}
			i++
			e := &t.ents[f.i]
			e.tag |= f.n << tagShift
			e.b, e.c = uint32(i), uint32(len(t.ents))
			if f.alike && t.rep == nil {
				if k, ok := t.repeated(f.i); ok {
					t.rep = t.repeatError(st, k)
				}
			}
			st = st[:len(st)-1]
		}
	}
}

// name parses a member name and the colon after it; i is at the name.
func (t *Tape) name(src []byte, i int, f *frame) (int, error) {
	if uint(i) >= uint(len(src)) {
		return i, t.syntax(i, "unexpected end of input")
	}
	if src[i] != '"' {
		return i, t.syntax(i, "expected a member name")
	}
	f.key = uint32(len(t.ents))
	// The common name, ASCII without escapes, read here as str reads a
	// string (no call), with its bit (nameBit) from the first word: an
	// object whose names take distinct bits needs no repeated-name check
	// at its end (a call event's 14 names and most arguments' do), where
	// that check re-read every name. Any other name goes to strRest and
	// its object to the check.
	start, j := i, i+1
	read := false
	if j+8 <= len(src) {
		first := load64(src, j)
		for x := first; ; x = load64(src, j) {
			if m := special(x) & highs; m != 0 {
				tz := bits.TrailingZeros64(m)
				j += tz >> 3
				// The flagged byte from the word: no load, no bounds check.
				if byte(x>>(tz&^7)) == '"' {
					l := j - start - 1
					t.ents = append(t.ents, entry{tag: uint32(String) | uint32(l)<<tagShift, a: uint32(start), b: uint32(j + 1)})
					if l < 8 {
						first &= 1<<(8*l) - 1
					}
					if b := nameBit(first, l); f.names[b>>6]&(1<<(b&63)) != 0 {
						f.alike = true
					} else {
						f.names[b>>6] |= 1 << (b & 63)
					}
					i, read = j+1, true
				}
				break
			}
			if j += 8; j+8 > len(src) {
				break
			}
		}
	}
	if !read {
		var err error
		if i, err = t.strRest(src, start, j); err != nil {
			return i, err
		}
		f.alike = true
	}
	i = t.skipWS(src, i)
	if uint(i) >= uint(len(src)) {
		return i, t.syntax(i, "unexpected end of input")
	}
	if src[i] != ':' {
		return i, t.syntax(i, "expected ':'")
	}
	return t.skipWS(src, i+1), nil
}

// skipWS skips whitespace from i and notes that the text has some
// (AppendCompact copies values of a text without any).
func (t *Tape) skipWS(src []byte, i int) int {
	for uint(i) < uint(len(src)) {
		// Most bytes here start a token: one comparison tells them.
		if c := src[i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			return i
		}
		i++
		t.spaced = true
	}
	return i
}

// SWAR constants.
const (
	ones   = 0x0101010101010101
	highs  = 0x8080808080808080
	quotes = '"' * ones
	backs  = '\\' * ones
)

// special has the high bit set of the first byte of x (in memory order)
// that is '"', '\\', a control character or not ASCII, and of no byte
// before it; bytes after it may be flagged whatever they are. A byte's
// subtraction sets its high bit when the byte is 0 after the XOR (the
// quote or the backslash), below 0x20, or 0x80 and above (0xa0 and
// above in the last term, the rest in the first: 0x80-0x9f XOR '"' is
// above 0x80); and a borrow only leaves a byte that is such a hit, so it
// cannot flag a byte below the first hit. TestSpecialFirstFlag checks
// every byte value at every position.
func special(x uint64) uint64 {
	return ((x ^ quotes) - ones) | ((x ^ backs) - ones) | (x - 0x20*ones)
}

// Plain reports whether every byte of b is printable ASCII other than
// '"' and '\\' (DEL included): the bytes a JSON string holds as they are,
// so that b between quotes is the string b. By special, eight bytes at a
// time (two words that overlap for 4 to 15 bytes): any special byte
// flags at least itself.
func Plain(b []byte) bool {
	n := len(b)
	var x uint64
	switch {
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			x |= special(load64(b, i))
		}
		x |= special(load64(b, n-8))
	case n >= 4:
		x = special(uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32)
	default:
		for _, c := range b {
			if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				return false
			}
		}
	}
	return x&highs == 0
}

// load64 returns the 8 bytes of src at i as a little-endian word, without
// the bounds checks of binary.LittleEndian.Uint64(src[i:]) (two compares
// and a masked index per word of the string scan): every caller loops on
// i+8 <= len(src), with 0 <= i.
func load64(src []byte, i int) uint64 {
	return binary.LittleEndian.Uint64((*[8]byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(src)), i))[:])
}

// quoteOrBackslash has the high bit of each byte of x that is '"' or
// '\\' set (and maybe of bytes above the first such one).
func quoteOrBackslash(x uint64) uint64 {
	q := x ^ quotes
	bs := x ^ backs
	return (((q - ones) &^ q) | ((bs - ones) &^ bs)) & highs
}

// plain skips the bytes of a string that stand for themselves: ASCII
// other than '"', '\\' and control characters (8 at a time), and valid
// UTF-8 sequences. It returns the offset of the next byte that is not
// one.
func (t *Tape) plain(src []byte, j int) (int, error) {
	for {
		for j+8 <= len(src) {
			// The lowest flagged byte is the first special one (a borrow
			// only flags bytes above a true hit): jump to it, rather than
			// walk the word byte by byte.
			if m := special(load64(src, j)) & highs; m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		if j >= len(src) {
			return j, t.syntax(j, "unexpected end of input in a string")
		}
		c := src[j]
		switch {
		case c == '"' || c == '\\':
			return j, nil
		case c < 0x20:
			return j, t.syntax(j, "control character in a string")
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(src[j:])
			if r == utf8.RuneError && size <= 1 {
				return j, t.badUTF8(j)
			}
			j += size
		}
	}
}

// str parses a string starting at its opening quote and appends its entry.
// The common string, ASCII without escapes and not within 8 bytes of the
// end of the input, is read here a word at a time; anything else goes on
// in plain from the first byte that is not plain ASCII.
func (t *Tape) str(src []byte, start int) (int, error) {
	j := start + 1
	for j+8 <= len(src) {
		if m := special(load64(src, j)) & highs; m != 0 {
			j += bits.TrailingZeros64(m) >> 3
			if src[j] == '"' {
				t.ents = append(t.ents, entry{tag: uint32(String) | uint32(j-start-1)<<tagShift, a: uint32(start), b: uint32(j + 1)})
				return j + 1, nil
			}
			break
		}
		j += 8
	}
	return t.strRest(src, start, j)
}

// nameBit is a name's bit in a 256-bit set, by its length l and its
// first word (its first min(l, 8) bytes, little-endian, zero above):
// equal names take the same bit, so names that take distinct bits
// repeat none. The bits are not keyed: names chosen to share bits only
// send their object to the repeated-name check. The members of a call
// event take distinct bits (TestDistinctBits).
func nameBit(first uint64, l int) uint32 {
	return uint32((first ^ uint64(l)) * 0xbf58476d1ce4e5b9 >> 56)
}

// strRest finishes str from j, the first byte that is not plain ASCII or
// within 8 bytes of the end.
func (t *Tape) strRest(src []byte, start, j int) (int, error) {
	j, err := t.plain(src, j)
	if err != nil {
		return j, err
	}
	if src[j] == '\\' {
		return t.escaped(src, start, j)
	}
	j++
	t.ents = append(t.ents, entry{tag: uint32(String) | uint32(j-start-2)<<tagShift, a: uint32(start), b: uint32(j)})
	return j, nil
}

// escaped finishes a string whose first escape is at j, unescaping it
// into t.strs.
func (t *Tape) escaped(src []byte, start, j int) (int, error) {
	off := len(t.strs)
	t.strs = append(t.strs, src[start+1:j]...)
	for {
		// src[j] is a backslash.
		if j+1 >= len(src) {
			return j, t.syntax(j, "unexpected end of input in a string")
		}
		var r rune
		switch e := src[j+1]; e {
		case '"', '\\', '/':
			r = rune(e)
			j += 2
		case 'b':
			r, j = '\b', j+2
		case 'f':
			r, j = '\f', j+2
		case 'n':
			r, j = '\n', j+2
		case 'r':
			r, j = '\r', j+2
		case 't':
			r, j = '\t', j+2
		case 'u':
			h, ok := hex4(src, j+2)
			if !ok {
				return j, t.syntax(j, "invalid \\u escape")
			}
			j += 6
			r = rune(h)
			if utf16IsSurrogate(r) {
				r = utf8.RuneError // lone, unless a low surrogate follows
				if h < 0xdc00 && j+6 <= len(src) && src[j] == '\\' && src[j+1] == 'u' {
					if lo, ok := hex4(src, j+2); ok && lo >= 0xdc00 && lo <= 0xdfff {
						r = (rune(h)-0xd800)<<10 | (rune(lo) - 0xdc00) + 0x10000
						j += 6
					}
				}
			}
		default:
			return j, t.syntax(j, "invalid escape")
		}
		t.strs = utf8.AppendRune(t.strs, r)
		run := j
		var err error
		if j, err = t.plain(src, j); err != nil {
			return j, err
		}
		t.strs = append(t.strs, src[run:j]...)
		if src[j] == '"' {
			j++
			t.ents = append(t.ents, entry{tag: uint32(String) | escBit | uint32(len(t.strs)-off)<<tagShift, a: uint32(start), b: uint32(j), c: uint32(off)})
			return j, nil
		}
	}
}

func utf16IsSurrogate(r rune) bool { return r >= 0xd800 && r <= 0xdfff }

func hex4(src []byte, i int) (uint32, bool) {
	if i+4 > len(src) {
		return 0, false
	}
	var v uint32
	for _, c := range src[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		v = v<<4 | uint32(c)
	}
	return v, true
}

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? from i and
// returns the offset after it.
func number(src []byte, i int) (int, bool) {
	n := len(src)
	if src[i] == '-' {
		i++
	}
	if i >= n {
		return i, false
	}
	switch c := src[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i = digits(src, i+1)
	default:
		return i, false
	}
	if i < n && src[i] == '.' {
		j := digits(src, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < n && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < n && (src[i] == '+' || src[i] == '-') {
			i++
		}
		j := digits(src, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}

func digits(src []byte, i int) int {
	for i < len(src) && src[i] >= '0' && src[i] <= '9' {
		i++
	}
	return i
}

// smallObject is the most members compared pairwise for repeated names;
// larger objects use the hash table.
const smallObject = 8

// repeated reports the tape index of the first member name of object obj
// that repeats an earlier one. The parse calls it only for an object
// whose names do not take distinct bits (frame.alike).
func (t *Tape) repeated(obj uint32) (uint32, bool) {
	o := &t.ents[obj]
	n := int(o.tag >> tagShift)
	if n <= smallObject {
		var keys [smallObject]uint32
		k := obj + 1
		for m := 0; m < n; m++ {
			name := t.str0(k)
			for _, p := range keys[:m] {
				if string(t.str0(p)) == string(name) {
					return k, true
				}
			}
			keys[m] = k
			k = t.after(k + 1)
		}
		return 0, false
	}
	// Open addressing, at most half full; slots hold index+1.
	size := 1
	for size < 2*n {
		size <<= 1
	}
	if cap(t.set) < size {
		t.set = make([]uint32, size)
	}
	set := t.set[:size]
	clear(set)
	mask := uint64(size - 1)
	for k, m := obj+1, 0; m < n; m++ {
		name := t.str0(k)
		h := strhash.Bytes(name) & mask
		for set[h] != 0 {
			if string(t.str0(set[h]-1)) == string(name) {
				return k, true
			}
			h = (h + 1) & mask
		}
		set[h] = k + 1
		k = t.after(k + 1)
	}
	return 0, false
}

// str0 returns the unescaped bytes of the string entry at k.
func (t *Tape) str0(k uint32) []byte {
	e := &t.ents[k]
	l := e.tag >> tagShift
	if e.tag&escBit != 0 {
		return t.strs[e.c : e.c+l]
	}
	return t.src[e.a+1 : e.a+1+l]
}

// after returns the index of the entry after the value at k.
func (t *Tape) after(k uint32) uint32 {
	if e := &t.ents[k]; e.kind() >= Object {
		return e.c
	}
	return k + 1
}
