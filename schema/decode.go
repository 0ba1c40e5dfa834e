package schema

import (
	"bytes"
	"strconv"
	"unsafe"

	"github.com/valyala/fastjson"
)

// MalformedError says why an event is unusable. Its Reason is the reason of
// the MALFORMED decision; EventID is set when the event had a usable id.
type MalformedError struct {
	EventID string
	Reason  string
}

func (e *MalformedError) Error() string { return "malformed event: " + e.Reason }

func malformed(id, reason string) *MalformedError {
	return &MalformedError{EventID: id, Reason: reason}
}

// CallDecoder decodes call events. It reuses its parse buffers, so a
// decoder is not safe for concurrent use; use one per goroutine.
type CallDecoder struct {
	p    fastjson.Parser
	keys [][]byte // scratch for the duplicate-key check
	buf  []byte   // scratch: the call's strings, packed
}

// Decode parses one call event into c. On a *MalformedError, c.EventID is
// set when the event carried one, so the MALFORMED decision keeps its id.
// The Arguments of c stay valid until the next call of Decode.
//
// JSON is checked by encoding/json.Valid first: fastjson, used for speed,
// accepts NaN, leading zeros and bad escapes, and the contract is JSON.
func (d *CallDecoder) Decode(line []byte, c *Call) error {
	*c = Call{}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return malformed("", "empty line")
	}
	if !validJSON(line) {
		return malformed("", "not valid JSON")
	}
	v, err := d.p.ParseBytes(line)
	if err != nil {
		return malformed("", "not valid JSON")
	}
	o, err := v.Object()
	if err != nil {
		return malformed("", "event is not a JSON object")
	}
	// One pass over the members instead of a scan per member looked up
	// (the first of a repeated member wins, as with Object.Get).
	var m callMembers
	o.Visit(m.set)
	// String members are read as views into the parse buffer and copied
	// into one allocation at the end: fewer allocations, and the call's
	// strings side by side in memory for resolution.
	idb, ok := strBytes(m.v[mEventID])
	if !ok || len(idb) == 0 {
		return malformed("", "event_id missing or not a non-empty string")
	}
	bad := func(reason string) error { return malformed(string(idb), reason) }
	if t := m.v[mType]; t != nil && (t.Type() != fastjson.TypeString || string(t.GetStringBytes()) != "call") {
		return bad(`type is not "call"`)
	}
	tool, ok := strBytes(m.v[mTool])
	if !ok || len(tool) == 0 {
		return bad("tool name missing or empty")
	}
	ts := m.v[mEmittedAt]
	if ts == nil || ts.Type() == fastjson.TypeNull {
		return bad("emitted_at missing")
	}
	tb, err := ts.StringBytes()
	if err != nil {
		return bad("emitted_at is not an RFC 3339 UTC timestamp")
	}
	if c.EmittedAt, err = ParseTime(unsafeString(tb)); err != nil {
		return bad("emitted_at is not an RFC 3339 UTC timestamp")
	}
	args := m.v[mArguments]
	switch {
	case args == nil && m.v[mArgumentsRaw] != nil:
		return bad("arguments are not JSON (only arguments_raw)")
	case args == nil:
		return bad("arguments missing")
	case args.Type() != fastjson.TypeObject:
		return bad("arguments is not an object")
	}
	if d.hasDuplicateKey(args) {
		return bad("arguments repeat the key " + string(d.duplicateKey(args, nil)))
	}
	c.Arguments = args
	reg := m.v[mRegistry]
	if reg == nil || reg.Type() != fastjson.TypeString {
		return bad("registry missing or not a string")
	}
	fields := [...]struct {
		key string
		m   int
		dst *string
		b   []byte
	}{
		{"event_id", 0, &c.EventID, idb}, {"tool", 0, &c.Tool, tool}, {"registry", 0, &c.Registry, reg.GetStringBytes()},
		{"agent_id", mAgentID, &c.AgentID, nil}, {"session_id", mSessionID, &c.SessionID, nil}, {"model", mModel, &c.Model, nil},
		{"provider", mProvider, &c.Provider, nil}, {"surface", mSurface, &c.Surface, nil}, {"server", mServer, &c.Server, nil},
		{"seen_digest", mSeenDigest, &c.SeenDigest, nil},
	}
	for i := 3; i < len(fields); i++ {
		if fields[i].b, ok = strBytes(m.v[fields[i].m]); !ok {
			return bad(fields[i].key + " is not a string")
		}
	}
	buf := d.buf[:0]
	for i := range fields {
		buf = append(buf, fields[i].b...)
	}
	var vis []*fastjson.Value
	vv := m.v[mVisible]
	hasVis := vv != nil && vv.Type() != fastjson.TypeNull
	if hasVis {
		if vis, err = vv.Array(); err != nil {
			return bad("visible is not an array of strings")
		}
		for _, e := range vis {
			b, err := e.StringBytes()
			if err != nil {
				return bad("visible is not an array of strings")
			}
			buf = append(buf, b...)
		}
	}
	d.buf = buf
	all := string(buf)
	off := 0
	for i := range fields {
		*fields[i].dst = all[off : off+len(fields[i].b)]
		off += len(fields[i].b)
	}
	if hasVis {
		c.HasVisible = true
		c.Visible = make([]string, len(vis))
		for i, e := range vis {
			n := len(e.GetStringBytes())
			c.Visible[i] = all[off : off+n]
			off += n
		}
	}
	return nil
}

// The members of a call event that Decode reads.
const (
	mEventID = iota
	mType
	mTool
	mEmittedAt
	mArguments
	mArgumentsRaw
	mRegistry
	mAgentID
	mSessionID
	mModel
	mProvider
	mSurface
	mServer
	mSeenDigest
	mVisible
	numMembers
)

// callMembers holds the values of the members Decode reads, by m* index.
type callMembers struct{ v [numMembers]*fastjson.Value }

func (m *callMembers) set(k []byte, v *fastjson.Value) {
	i := -1
	switch string(k) {
	case "event_id":
		i = mEventID
	case "type":
		i = mType
	case "tool":
		i = mTool
	case "emitted_at":
		i = mEmittedAt
	case "arguments":
		i = mArguments
	case "arguments_raw":
		i = mArgumentsRaw
	case "registry":
		i = mRegistry
	case "agent_id":
		i = mAgentID
	case "session_id":
		i = mSessionID
	case "model":
		i = mModel
	case "provider":
		i = mProvider
	case "surface":
		i = mSurface
	case "server":
		i = mServer
	case "seen_digest":
		i = mSeenDigest
	case "visible":
		i = mVisible
	}
	if i >= 0 && m.v[i] == nil {
		m.v[i] = v
	}
}

// strBytes reads an optional string member as a view into the parse
// buffer: absent (nil) and null give nil; ok is false for another type.
func strBytes(v *fastjson.Value) (b []byte, ok bool) {
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil, true
	}
	b, err := v.StringBytes()
	return b, err == nil
}

// unsafeString views b as a string for a call that does not keep it.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// typeIs reports whether the event's optional type member, when present,
// is exactly want.
func typeIs(o *fastjson.Object, want string) bool {
	t := o.Get("type")
	return t == nil || (t.Type() == fastjson.TypeString && string(t.GetStringBytes()) == want)
}

// optString reads an optional string member: absent and null give "".
// ok is false when the member has another type.
func optString(o *fastjson.Object, key string) (s string, ok bool) {
	v := o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return "", true
	}
	b, err := v.StringBytes()
	if err != nil {
		return "", false
	}
	return string(b), true
}

// hasDuplicateKey reports whether an object in v repeats a key. It does not
// allocate; duplicateKey then finds where, on the rare failure path.
func (d *CallDecoder) hasDuplicateKey(v *fastjson.Value) bool {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		if o.Len() > 1 {
			keys := d.keys[:0]
			o.Visit(func(k []byte, _ *fastjson.Value) { keys = append(keys, k) })
			d.keys = keys[:0]
			for i := 1; i < len(keys); i++ {
				for j := 0; j < i; j++ {
					if bytes.Equal(keys[i], keys[j]) {
						return true
					}
				}
			}
		}
		dup := false
		o.Visit(func(_ []byte, e *fastjson.Value) {
			dup = dup || d.hasDuplicateKey(e)
		})
		return dup
	case fastjson.TypeArray:
		arr, _ := v.Array()
		for _, e := range arr {
			if d.hasDuplicateKey(e) {
				return true
			}
		}
	}
	return false
}

// duplicateKey returns the JSON pointer of the first repeated object key in
// v, or nil. Parsers disagree on repeated keys (first wins in some, last in
// others), so a call that repeats a key could be checked with one value and
// executed with the other: it is unusable, not merely suspicious.
func (d *CallDecoder) duplicateKey(v *fastjson.Value, at []byte) []byte {
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		if o.Len() > 1 {
			keys := d.keys[:0]
			o.Visit(func(k []byte, _ *fastjson.Value) { keys = append(keys, k) })
			d.keys = keys[:0]
			for i := 1; i < len(keys); i++ {
				for j := 0; j < i; j++ {
					if bytes.Equal(keys[i], keys[j]) {
						return AppendPointer(append([]byte(nil), at...), keys[i])
					}
				}
			}
		}
		var dup []byte
		o.Visit(func(k []byte, e *fastjson.Value) {
			if dup == nil && (e.Type() == fastjson.TypeObject || e.Type() == fastjson.TypeArray) {
				dup = d.duplicateKey(e, AppendPointer(append([]byte(nil), at...), k))
			}
		})
		return dup
	case fastjson.TypeArray:
		arr, _ := v.Array()
		for i, e := range arr {
			if e.Type() == fastjson.TypeObject || e.Type() == fastjson.TypeArray {
				p := append(append([]byte(nil), at...), '/')
				if dup := d.duplicateKey(e, strconv.AppendInt(p, int64(i), 10)); dup != nil {
					return dup
				}
			}
		}
	}
	return nil
}

// AppendPointer appends "/" and the RFC 6901 escaped token to a JSON pointer.
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
