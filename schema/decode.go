package schema

import (
	"errors"
	"time"
	"unsafe"

	"github.com/toolaudit/toolaudit/internal/lines"
	"github.com/toolaudit/toolaudit/jsontape"
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
	tape jsontape.Tape
	buf  []byte   // scratch: the call's strings, packed
	days dayCache // emitted_at: the day of the last call
}

// Decode parses one call event into c. On a *MalformedError of an event
// that is a JSON object, c holds every member that was readable (its
// emitted_at included, whatever else failed) but no Arguments, and the
// error's EventID is set when the event carried one, so the MALFORMED
// decision keeps its id and its time. The Arguments of c stay valid
// until the next call of Decode.
//
// The event is parsed once, strictly (package jsontape): not JSON, invalid
// UTF-8, nesting deeper than jsontape.MaxDepth and a member name repeated
// anywhere (top level or arguments) are MALFORMED, with a reason that
// says where.
func (d *CallDecoder) Decode(line []byte, c *Call) error {
	*c = Call{}
	if lines.Blank(line) {
		return malformed("", "empty line")
	}
	if err := d.tape.Parse(line); err != nil {
		return malformed(unrepeatedID(d.tape.Root(), err), err.Error())
	}
	root := d.tape.Root()
	if root.Kind() != jsontape.Object {
		return malformed("", "event is not a JSON object")
	}
	// One pass over the members instead of a scan per member looked up.
	var m callMembers
	for it := root.Members(); it.Next(); {
		if i := callMember(it.Name()); i >= 0 {
			m.v[i] = it.Value()
		}
	}
	// String members are read as views into the tape and copied into one
	// allocation at the end: fewer allocations, and the call's strings
	// side by side in memory for resolution. Every member is read even
	// after one fails: a MALFORMED decision keeps what was readable (its
	// emitted_at above all, which places it in time), and its reason is
	// the first failure in the contract's order.
	var reason string
	bad := func(r string) {
		if reason == "" {
			reason = r
		}
	}
	idb, ok := strBytes(m.v[mEventID])
	if !ok || len(idb) == 0 {
		idb = nil
		bad("event_id missing or not a non-empty string")
	}
	if t := m.v[mType]; t.Exists() && !t.StrIs("call") {
		bad(`type is not "call"`)
	}
	tool, ok := strBytes(m.v[mTool])
	if !ok || len(tool) == 0 {
		tool = nil
		bad("tool name missing or empty")
	}
	if t, err := d.days.eventTime(m.v[mEmittedAt], "emitted_at"); err != nil {
		bad(err.Error())
	} else {
		c.EmittedAt = t
	}
	args := m.v[mArguments]
	switch rec := m.v[mArgumentsRecorded]; {
	case rec.Kind() != jsontape.False:
		if !rec.IsNull() && rec.Kind() != jsontape.True {
			bad("arguments_recorded is not a boolean")
		}
	case args.Exists() || m.v[mArgumentsRaw].Exists():
		bad("arguments_recorded is false but the event has arguments")
	default:
		c.ArgsUnrecorded = true
	}
	switch {
	case c.ArgsUnrecorded:
	case !args.Exists() && m.v[mArgumentsRaw].Exists():
		bad("arguments are not JSON (only arguments_raw)")
	case !args.Exists():
		bad("arguments missing")
	case args.Kind() != jsontape.Object:
		bad("arguments is not an object")
	}
	reg := m.v[mRegistry]
	if reg.Kind() != jsontape.String {
		bad("registry missing or not a string")
	}
	fields := [...]struct {
		key string
		m   int
		dst *string
		b   []byte
	}{
		{"event_id", 0, &c.EventID, idb}, {"tool", 0, &c.Tool, tool}, {"registry", 0, &c.Registry, reg.Str()},
		{"agent_id", mAgentID, &c.AgentID, nil}, {"session_id", mSessionID, &c.SessionID, nil}, {"model", mModel, &c.Model, nil},
		{"provider", mProvider, &c.Provider, nil}, {"surface", mSurface, &c.Surface, nil}, {"server", mServer, &c.Server, nil},
		{"seen_digest", mSeenDigest, &c.SeenDigest, nil},
		{"trace_id", mTraceID, &c.TraceID, nil}, {"span_id", mSpanID, &c.SpanID, nil},
	}
	for i := 3; i < len(fields); i++ {
		if fields[i].b, ok = strBytes(m.v[fields[i].m]); !ok {
			bad(fields[i].key + " is not a string")
		}
	}
	if b := fields[len(fields)-2].b; b != nil && !lowerHex(b, 32) {
		bad("trace_id is not 32 lowercase hex digits")
	}
	if b := fields[len(fields)-1].b; b != nil && !lowerHex(b, 16) {
		bad("span_id is not 16 lowercase hex digits")
	}
	buf := d.buf[:0]
	for i := range fields {
		buf = append(buf, fields[i].b...)
	}
	vv := m.v[mVisible]
	hasVis := !vv.IsNull()
	if hasVis {
		if vv.Kind() != jsontape.Array {
			hasVis = false
			bad("visible is not an array of strings")
		}
		for it := vv.Items(); hasVis && it.Next(); {
			if it.Value().Kind() != jsontape.String {
				hasVis = false
				bad("visible is not an array of strings")
			}
		}
		if hasVis {
			for it := vv.Items(); it.Next(); {
				buf = append(buf, it.Value().Str()...)
			}
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
		c.Visible = make([]string, 0, vv.Len())
		for it := vv.Items(); it.Next(); {
			n := len(it.Value().Str())
			c.Visible = append(c.Visible, all[off:off+n])
			off += n
		}
	}
	if reason != "" {
		c.ArgsUnrecorded = false
		return malformed(c.EventID, reason)
	}
	c.Arguments = args
	return nil
}

// unrepeatedID returns the event_id of an event rejected for a repeated
// member other than event_id itself (the tape is then complete), so that
// its MALFORMED decision can be matched to the call; "" otherwise.
func unrepeatedID(root jsontape.Value, err error) string {
	var e *jsontape.Error
	if !errors.As(err, &e) || e.Kind != jsontape.ErrRepeated || e.Ptr == "/event_id" {
		return ""
	}
	return string(root.Get("event_id").Str())
}

// The members of a call event that Decode reads.
const (
	mEventID = iota
	mType
	mTool
	mEmittedAt
	mArguments
	mArgumentsRaw
	mArgumentsRecorded
	mRegistry
	mAgentID
	mSessionID
	mModel
	mProvider
	mSurface
	mServer
	mSeenDigest
	mVisible
	mTraceID
	mSpanID
	numMembers
)

// callMembers holds the values of the members Decode reads, by m* index.
// The tape has no repeated names, so each is set at most once.
type callMembers struct{ v [numMembers]jsontape.Value }

// callMember returns the m* index of a member name, -1 for a member
// Decode does not read. It returns the index rather than store the value
// itself: the caller's callMembers is on its stack, where storing the
// value's tape pointer needs no write barrier.
func callMember(k []byte) int {
	switch string(k) {
	case "event_id":
		return mEventID
	case "type":
		return mType
	case "tool":
		return mTool
	case "emitted_at":
		return mEmittedAt
	case "arguments":
		return mArguments
	case "arguments_raw":
		return mArgumentsRaw
	case "arguments_recorded":
		return mArgumentsRecorded
	case "registry":
		return mRegistry
	case "agent_id":
		return mAgentID
	case "session_id":
		return mSessionID
	case "model":
		return mModel
	case "provider":
		return mProvider
	case "surface":
		return mSurface
	case "server":
		return mServer
	case "seen_digest":
		return mSeenDigest
	case "visible":
		return mVisible
	case "trace_id":
		return mTraceID
	case "span_id":
		return mSpanID
	}
	return -1
}

// lowerHex reports whether b is n lowercase hex digits (a W3C trace
// context id).
func lowerHex(b []byte, n int) bool {
	if len(b) != n {
		return false
	}
	for _, c := range b {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// strBytes reads an optional string member as a view into the tape:
// absent and null give nil; ok is false for another type.
func strBytes(v jsontape.Value) (b []byte, ok bool) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return nil, true
	case jsontape.String:
		return v.Str(), true
	}
	return nil, false
}

// eventTime reads a required timestamp member (emitted_at, observed_at):
// RFC 3339 UTC within the supported range.
func eventTime(v jsontape.Value, name string) (time.Time, error) {
	return (*dayCache)(nil).eventTime(v, name)
}

// eventTime is eventTime with the day cache c (nil for none).
func (c *dayCache) eventTime(v jsontape.Value, name string) (time.Time, error) {
	if v.IsNull() {
		return time.Time{}, errors.New(name + " missing")
	}
	b := v.Str()
	if v.Kind() != jsontape.String {
		return time.Time{}, errors.New(name + " is not an RFC 3339 UTC timestamp")
	}
	t, err := c.parseTime(unsafe.String(unsafe.SliceData(b), len(b)))
	if err != nil {
		return time.Time{}, errors.New(name + " is not an RFC 3339 UTC timestamp")
	}
	if !InTimeRange(t) {
		return time.Time{}, errors.New(name + " outside the supported range " + TimeRange)
	}
	return t, nil
}
