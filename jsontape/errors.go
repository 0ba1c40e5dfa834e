package jsontape

import (
	"strconv"
)

// ErrorKind says which rule an input broke.
type ErrorKind uint8

// Error kinds.
const (
	ErrSyntax   ErrorKind = iota + 1 // not RFC 8259 JSON text
	ErrUTF8                          // invalid UTF-8
	ErrDepth                         // nesting deeper than MaxDepth
	ErrRepeated                      // an object repeats a member name
	ErrTooLarge                      // MaxSize bytes or more
)

// Error is why Parse rejected its input. Its message is meant to be the
// reason of a MALFORMED decision: it says what is wrong and where.
type Error struct {
	Kind   ErrorKind
	Offset int    // byte offset in the input where the problem was found
	Ptr    string // ErrRepeated: JSON pointer (RFC 6901) of the repeated member
	msg    string
}

func (e *Error) Error() string { return e.msg }

func (t *Tape) syntax(i int, what string) error {
	return &Error{Kind: ErrSyntax, Offset: i, msg: "not valid JSON: " + what + " at byte " + strconv.Itoa(i)}
}

func (t *Tape) unexpected(src []byte, i int) error {
	return t.syntax(i, "unexpected character "+strconv.Quote(string(src[i:i+1])))
}

func (t *Tape) badUTF8(i int) error {
	return &Error{Kind: ErrUTF8, Offset: i, msg: "invalid UTF-8 at byte " + strconv.Itoa(i)}
}

// repeatError reports the repeated name at tape index k of the object on
// top of the stack st, with the pointer the stack spells.
func (t *Tape) repeatError(st []frame, k uint32) error {
	var p []byte
	for _, f := range st[:len(st)-1] {
		if f.obj {
			p = AppendPointer(p, t.str0(f.key))
		} else {
			p = strconv.AppendUint(append(p, '/'), uint64(f.n), 10)
		}
	}
	p = AppendPointer(p, t.str0(k))
	ptr := string(p)
	return &Error{Kind: ErrRepeated, Offset: int(t.ents[k].a), Ptr: ptr, msg: "repeated member name at " + ptr}
}

// AppendPointer appends "/" and the RFC 6901 escaped token to a JSON
// pointer.
func AppendPointer(p []byte, token []byte) []byte {
	p = append(p, '/')
	for _, c := range token {
		switch c {
		case '~':
			p = append(p, '~', '0')
		case '/':
			p = append(p, '~', '1')
		default:
			p = append(p, c)
		}
	}
	return p
}
