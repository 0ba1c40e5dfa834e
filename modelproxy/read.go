package modelproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"github.com/toolaudit/toolaudit/jsontape"
)

// Every body and stream event the proxy decides is parsed once, by
// jsontape, and read from its tape: a member name repeated anywhere is
// refused, so that the proxy and the upstream or the client cannot read
// two different declarations or calls from one body (JSON readers differ
// on which repetition wins), and names are matched exactly, as the SDKs
// match them (encoding/json's struct fields also take "ID" for "id").
// encoding/json read the same bytes again at every level it was asked
// to (each Unmarshal validates its whole input first): half of the
// proxy's own CPU (docs/performance.md §15).
//
// The readers below take a value of a tape and give what encoding/json
// would have decoded into the same Go type: absent and null are the zero
// value, any other kind than the type's is an error naming the member.
// Raw values are views of the parsed bytes, which must outlive them (a
// request's and a response's body, an event's data: none is reused).

// tapes are the proxy's: a tape is most of the allocations of a
// response's check otherwise.
var tapes = sync.Pool{New: func() any { return new(jsontape.Tape) }}

// parseStrict parses b and, when it is an object, reads it with read;
// the tape goes back to the pool after read returns, so that what read
// keeps is strings and raw views of b only.
func parseStrict[T any](b []byte, read func(jsontape.Value) (T, error)) (T, error) {
	var zero T
	t := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(t)
	if err := parseObject(t, b); err != nil {
		return zero, err
	}
	return read(t.Root())
}

// maxPresize bounds what readAll allocates on a body's word: a client
// that declares a long body and sends none costs no more than this.
const maxPresize = 64 << 10

// readAll is io.ReadAll of a body that declared its length (-1: none):
// up to maxPresize that is one allocation, not a series of copies. The
// length is a hint only; r bounds what is read.
func readAll(r io.Reader, length int64) ([]byte, error) {
	if length < 0 || length > maxPresize {
		return io.ReadAll(r)
	}
	var b bytes.Buffer
	b.Grow(int(length) + bytes.MinRead) // ReadFrom wants MinRead free before each read
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

// parseObject parses b into t: one JSON object, else an error.
func parseObject(t *jsontape.Tape, b []byte) error {
	if err := t.Parse(b); err != nil {
		return err
	}
	if t.Root().Kind() != jsontape.Object {
		return errors.New("not a JSON object")
	}
	return nil
}

// typeError is what a member of the wrong kind is answered with.
func typeError(what string, v jsontape.Value, want string) error {
	if !v.Exists() {
		return fmt.Errorf("%s: absent, not %s", what, want)
	}
	return fmt.Errorf("%s: %s, not %s", what, v.Kind(), want)
}

// str reads a string.
func str(v jsontape.Value, what string) (string, error) {
	b, err := strBytes(v, what)
	return string(b), err
}

// strBytes is str as a view of the tape, valid while it is.
func strBytes(v jsontape.Value, what string) ([]byte, error) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return nil, nil
	case jsontape.String:
		return v.Str(), nil
	}
	return nil, typeError(what, v, "a string")
}

// strOr is str, "" for another kind: a member the proxy only looks at.
func strOr(v jsontape.Value) string { return string(v.Str()) }

// setStr sets *dst to b unless b is empty, copying it only when it
// differs: a stream's chunks repeat their id and model.
func setStr(dst *string, b []byte) {
	if len(b) > 0 && string(b) != *dst {
		*dst = string(b)
	}
}

// boolean reads a bool.
func boolean(v jsontape.Value, what string) (bool, error) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null, jsontape.False:
		return false, nil
	case jsontape.True:
		return true, nil
	}
	return false, typeError(what, v, "a boolean")
}

// raw is v's text, nil when absent (as a json.RawMessage member left
// unset).
func raw(v jsontape.Value) json.RawMessage {
	if !v.Exists() {
		return nil
	}
	return v.Raw()
}

// present reports whether v is there and not null.
func present(v jsontape.Value) bool { return !v.IsNull() }

// members reads an object's members as raw values; nil for null.
func members(v jsontape.Value, what string) (map[string]json.RawMessage, error) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return nil, nil
	case jsontape.Object:
	default:
		return nil, typeError(what, v, "an object")
	}
	m := make(map[string]json.RawMessage, v.Len())
	for ms := v.Members(); ms.Next(); {
		m[string(ms.Name())] = ms.Value().Raw()
	}
	return m, nil
}

// items reads an array's items as raw values; nil for null.
func items(v jsontape.Value, what string) ([]json.RawMessage, error) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return nil, nil
	case jsontape.Array:
	default:
		return nil, typeError(what, v, "an array")
	}
	out := make([]json.RawMessage, 0, v.Len())
	for it := v.Items(); it.Next(); {
		out = append(out, it.Value().Raw())
	}
	return out, nil
}

// arrayOf checks that v is an array (or null: no items) and calls each
// for each item, with its index.
func arrayOf(v jsontape.Value, what string, each func(int, jsontape.Value) error) error {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return nil
	case jsontape.Array:
	default:
		return typeError(what, v, "an array")
	}
	i := 0
	for it := v.Items(); it.Next(); i++ {
		if err := each(i, it.Value()); err != nil {
			return err
		}
	}
	return nil
}

// object checks that v is an object, or null or absent (no members):
// where encoding/json decodes an object into a struct.
func object(v jsontape.Value, what string) error {
	if k := v.Kind(); k != jsontape.Invalid && k != jsontape.Null && k != jsontape.Object {
		return typeError(what, v, "an object")
	}
	return nil
}

// index reads an index member (a content block's, a choice's, an
// item's): an integer, 0 when absent or null.
func index(v jsontape.Value, what string) (int, error) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return 0, nil
	case jsontape.Number:
		if n, err := strconv.Atoi(string(v.Raw())); err == nil {
			return n, nil
		}
	}
	return 0, typeError(what, v, "an integer")
}

// eventTape parses a stream's events, each once however many of the
// stream's readers look at it: the tape holds the last event parsed.
type eventTape struct {
	t   *jsontape.Tape // from tapes, until release
	ev  *sseEvent
	err error
}

// parse returns ev's data parsed: an object, else an error.
func (e *eventTape) parse(ev *sseEvent) (jsontape.Value, error) {
	if e.ev != ev {
		if e.t == nil {
			e.t = tapes.Get().(*jsontape.Tape)
		}
		e.ev, e.err = ev, parseObject(e.t, ev.data)
		if e.err == nil {
			e.err = checkProto(e.t.Root())
		}
	}
	if e.err != nil {
		return jsontape.Value{}, e.err
	}
	return e.t.Root(), nil
}

// release gives the tape back to the pool when the stream has ended: no
// value parsed is read after it.
func (e *eventTape) release() {
	if e.t != nil {
		tapes.Put(e.t)
	}
	*e = eventTape{}
}

// fields reads the members of one object, keeping the first error: the
// value not an object (absent and null read as one without members), or
// a member of the wrong kind.
type fields struct {
	v   jsontape.Value
	err error
}

func fieldsOf(v jsontape.Value, what string) fields { return fields{v: v, err: object(v, what)} }

func (f *fields) str(name string) string {
	if f.err != nil {
		return ""
	}
	s, err := str(f.v.Get(name), name)
	f.err = err
	return s
}

// bytes is str as a view of the tape, valid while it is.
func (f *fields) bytes(name string) []byte {
	if f.err != nil {
		return nil
	}
	b, err := strBytes(f.v.Get(name), name)
	f.err = err
	return b
}

func (f *fields) boolean(name string) bool {
	if f.err != nil {
		return false
	}
	b, err := boolean(f.v.Get(name), name)
	f.err = err
	return b
}

func (f *fields) index(name string) int {
	if f.err != nil {
		return 0
	}
	n, err := index(f.v.Get(name), name)
	f.err = err
	return n
}

// object reads member name as an object's fields. Its error is f's, if
// f had one, else its own: read it after f's other members, and check
// its error.
func (f *fields) object(name string) fields {
	o := fields{v: f.v.Get(name), err: f.err}
	if o.err == nil {
		o.err = object(o.v, name)
	}
	return o
}

// wrap is f's error, what it read named first; nil when none.
func (f *fields) wrap(what string, args ...any) error {
	if f.err == nil {
		return nil
	}
	return fmt.Errorf(what+": %w", append(args, f.err)...)
}

// errProto refuses an upstream body or event holding a member named
// __proto__: the JS SDKs merge some of an event's objects into their
// snapshot with Object.assign, which makes such a member the snapshot's
// prototype, and a call hidden there is read by the SDK (its message's
// tool_calls) and never seen by the proxy.
var errProto = errors.New(`a member named "__proto__", which the SDKs' accumulators would read as the prototype of what they build`)

// checkProto is errProto when v holds a __proto__ member anywhere but
// inside an "input" member: a tool's input object, which the SDKs hand to
// the tool as JSON.parse made it, and which is the resolver's to decide.
func checkProto(v jsontape.Value) error {
	switch v.Kind() {
	case jsontape.Object:
		for m := v.Members(); m.Next(); {
			switch string(m.Name()) {
			case "__proto__":
				return errProto
			case "input":
				continue
			}
			if err := checkProto(m.Value()); err != nil {
				return err
			}
		}
	case jsontape.Array:
		for it := v.Items(); it.Next(); {
			if err := checkProto(it.Value()); err != nil {
				return err
			}
		}
	}
	return nil
}
