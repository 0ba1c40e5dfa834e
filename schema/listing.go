package schema

import (
	"bytes"
	"math"
	"strconv"

	"github.com/valyala/fastjson"
)

// DecodeListing parses one listing event. A listing is used whole or not
// at all: a snapshot replaces a server's entire tool set, so applying part
// of a broken one would silently drop tools.
func DecodeListing(line []byte) (*Listing, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil, malformed("", "empty line")
	}
	if !validJSON(line) {
		return nil, malformed("", "not valid JSON")
	}
	var p fastjson.Parser
	v, err := p.ParseBytes(line)
	if err != nil {
		return nil, malformed("", "not valid JSON")
	}
	o, err := v.Object()
	if err != nil {
		return nil, malformed("", "event is not a JSON object")
	}
	l := &Listing{Op: OpSnapshot}
	id, ok := optString(o, "event_id")
	if !ok || id == "" {
		return nil, malformed("", "event_id missing or not a non-empty string")
	}
	l.EventID = id
	if !typeIs(o, "listing") {
		return nil, malformed(id, `type is not "listing"`)
	}
	ts, ok := optString(o, "observed_at")
	if !ok || ts == "" {
		return nil, malformed(id, "observed_at missing or not a string")
	}
	if l.ObservedAt, err = ParseTime(ts); err != nil {
		return nil, malformed(id, "observed_at is not an RFC 3339 UTC timestamp")
	}
	reg := o.Get("registry")
	if reg == nil || reg.Type() != fastjson.TypeString {
		return nil, malformed(id, "registry missing or not a string")
	}
	l.Registry = string(reg.GetStringBytes())
	if l.Server, ok = optString(o, "server"); !ok {
		return nil, malformed(id, "server is not a string")
	}
	if tr := o.Get("trust"); tr != nil && tr.Type() != fastjson.TypeNull {
		f, err := tr.Float64()
		if err != nil || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
			return nil, malformed(id, "trust is not an integer")
		}
		l.Trust = int(f)
	}
	switch op, ok := optString(o, "op"); {
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
	if tools == nil || tools.Type() != fastjson.TypeArray {
		return nil, malformed(id, "snapshot without a tools array")
	}
	arr, _ := tools.Array()
	l.Tools = make([]Tool, 0, len(arr))
	seen := make(map[string]bool, len(arr))
	for i, tv := range arr {
		at := "tools[" + strconv.Itoa(i) + "]"
		to, err := tv.Object()
		if err != nil {
			return nil, malformed(id, at+" is not an object")
		}
		name, ok := optString(to, "name")
		if !ok || name == "" {
			return nil, malformed(id, at+": name missing or not a non-empty string")
		}
		if seen[name] {
			return nil, malformed(id, at+": tool name "+strconv.Quote(name)+" appears twice")
		}
		seen[name] = true
		desc, ok := optString(to, "description")
		if !ok {
			return nil, malformed(id, at+": description is not a string")
		}
		is := to.Get("inputSchema")
		if is == nil || is.Type() != fastjson.TypeObject {
			return nil, malformed(id, at+": inputSchema missing or not an object")
		}
		l.Tools = append(l.Tools, Tool{Name: name, Description: desc, InputSchema: is.MarshalTo(nil)})
	}
	return l, nil
}
