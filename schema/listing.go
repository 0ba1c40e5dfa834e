package schema

import (
	"math"
	"strconv"
	"sync"

	"github.com/toolaudit/toolaudit/internal/lines"
	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/jsontape"
)

// DecodeListings decodes n listing events, event(i) each, on every core
// (decoding is most of applying a history), and returns those that decode,
// in order; bad is called, in order, with each that does not.
func DecodeListings(n int, event func(i int) []byte, bad func(i int, err error)) []*Listing {
	ls := make([]*Listing, n)
	errs := make([]error, n)
	par.For(n, 16, func(i int) { ls[i], errs[i] = DecodeListing(event(i)) })
	ok := ls[:0]
	for i, l := range ls {
		if errs[i] != nil {
			bad(i, errs[i])
			continue
		}
		ok = append(ok, l)
	}
	return ok
}

// DecodeListing parses one listing event. A listing is used whole or not
// at all: a snapshot replaces a server's entire tool set, so applying part
// of a broken one would silently drop tools. A member name repeated
// anywhere in the event (top level, a tool, a tool's inputSchema) rejects
// it, as do invalid UTF-8 and nesting deeper than jsontape.MaxDepth.
func DecodeListing(line []byte) (*Listing, error) {
	if lines.Blank(line) {
		return nil, malformed("", "empty line")
	}
	tape := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(tape) // the listing copies what it keeps
	if err := tape.Parse(line); err != nil {
		return nil, malformed(unrepeatedID(tape.Root(), err), err.Error())
	}
	o := tape.Root()
	if o.Kind() != jsontape.Object {
		return nil, malformed("", "event is not a JSON object")
	}
	l := &Listing{Op: OpSnapshot}
	id, ok := optString(o.Get("event_id"))
	if !ok || id == "" {
		return nil, malformed("", "event_id missing or not a non-empty string")
	}
	l.EventID = id
	if t := o.Get("type"); t.Exists() && !t.StrIs("listing") {
		return nil, malformed(id, `type is not "listing"`)
	}
	ts := o.Get("observed_at")
	if ts.Kind() != jsontape.String || len(ts.Str()) == 0 {
		return nil, malformed(id, "observed_at missing or not a string")
	}
	var err error
	if l.ObservedAt, err = eventTime(ts, "observed_at"); err != nil {
		return nil, malformed(id, err.Error())
	}
	reg := o.Get("registry")
	if reg.Kind() != jsontape.String {
		return nil, malformed(id, "registry missing or not a string")
	}
	l.Registry = string(reg.Str())
	if l.Server, ok = optString(o.Get("server")); !ok {
		return nil, malformed(id, "server is not a string")
	}
	if tr := o.Get("trust"); !tr.IsNull() {
		f := tr.Float64()
		if tr.Kind() != jsontape.Number || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
			return nil, malformed(id, "trust is not an integer")
		}
		l.Trust = int(f)
	}
	switch op, ok := optString(o.Get("op")); {
	case !ok:
		return nil, malformed(id, "op is not a string")
	case op == "" || op == string(OpSnapshot):
		l.Op = OpSnapshot
	case op == string(OpRemove):
		l.Op = OpRemove
		return l, nil
	default:
		return nil, malformed(id, "op is neither snapshot nor remove: "+strconv.Quote(op))
	}
	tools := o.Get("tools")
	if tools.Kind() != jsontape.Array {
		return nil, malformed(id, "snapshot without a tools array")
	}
	l.Tools = make([]Tool, 0, tools.Len())
	seen := make(map[string]bool, tools.Len())
	i := 0
	for it := tools.Items(); it.Next(); i++ {
		to := it.Value()
		at := func() string { return "tools[" + strconv.Itoa(i) + "]" } // for errors only: no string per tool
		if to.Kind() != jsontape.Object {
			return nil, malformed(id, at()+" is not an object")
		}
		name, ok := optString(to.Get("name"))
		if !ok || name == "" {
			return nil, malformed(id, at()+": name missing or not a non-empty string")
		}
		if seen[name] {
			return nil, malformed(id, at()+": tool name "+strconv.Quote(name)+" appears twice")
		}
		seen[name] = true
		desc, ok := optString(to.Get("description"))
		if !ok {
			return nil, malformed(id, at()+": description is not a string")
		}
		is := to.Get("inputSchema")
		if is.Kind() != jsontape.Object {
			return nil, malformed(id, at()+": inputSchema missing or not an object")
		}
		l.Tools = append(l.Tools, Tool{Name: name, Description: desc, InputSchema: is.AppendCompact(nil)})
	}
	return l, nil
}

// tapes are the parse buffers of DecodeListing, which goroutines call
// concurrently (a new instance decodes the listings history on every core).
var tapes = sync.Pool{New: func() any { return new(jsontape.Tape) }}

// optString reads an optional string member: absent and null give "".
// ok is false when the member has another type.
func optString(v jsontape.Value) (s string, ok bool) {
	b, ok := strBytes(v)
	return string(b), ok
}
