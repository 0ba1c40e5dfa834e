package otlp

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// The JSON within attributes (messages, definitions, arguments) is read
// with package jsontape, the strict parser of every event of the contract:
// no repeated member names, valid UTF-8, bounded nesting. The decoder keeps
// two tapes: outer for the attribute's value, inner for JSON text within it
// (arguments or a schema written as a string).

// parse parses v (JSON text, or a structured value rendered as JSON) into
// the outer tape, or says why it cannot.
func (d *decoder) parse(v pcommon.Value, name string) (jsontape.Value, string) {
	raw, _, reason := d.valueJSON(v, name)
	if reason != "" {
		return jsontape.Value{}, reason
	}
	return d.parseText(raw, name)
}

func (d *decoder) parseText(raw []byte, name string) (jsontape.Value, string) {
	if err := d.outer.Parse(raw); err != nil {
		return jsontape.Value{}, name + " is not JSON: " + err.Error()
	}
	return d.outer.Root(), ""
}

// argsText reads arguments written as text: valid JSON becomes the
// arguments (compact, as written), anything else the raw text.
func (d *decoder) argsText(s []byte) schema.CallArgs {
	if d.inner.Parse(s) == nil {
		return schema.CallArgs{JSON: d.inner.Root().AppendCompact(nil)}
	}
	raw := string(s)
	return schema.CallArgs{Raw: &raw}
}

// setArgsValue reads arguments given as a JSON member: a string is the
// model's text, null or absent is not recorded.
func (d *decoder) setArgsValue(c *Call, v jsontape.Value) {
	switch v.Kind() {
	case jsontape.Invalid, jsontape.Null:
		return
	case jsontape.String:
		c.Args = d.argsText(v.Str())
	default:
		c.Args = schema.CallArgs{JSON: v.AppendCompact(nil)}
	}
	c.ArgsRecorded = true
}

// strOf returns a string member's text, "" for another kind.
func strOf(v jsontape.Value) string { return string(v.Str()) }

// listOf iterates a JSON array, or a single object as a list of one.
func listOf(v jsontape.Value, f func(jsontape.Value)) bool {
	switch v.Kind() {
	case jsontape.Object:
		f(v)
	case jsontape.Array:
		for it := v.Items(); it.Next(); {
			f(it.Value())
		}
	default:
		return false
	}
	return true
}

// bad records an item that held calls it cannot give.
func (d *decoder) bad(c Call, src Source, reason string) {
	c.From, c.Malformed = []Source{src}, reason
	d.res.Calls = append(d.res.Calls, c)
}

// outputMessages reads the tool_call parts of GenAI output messages
// (semantic conventions v1.37 and later; the inference-details event
// carries the same value): [{"role":…,"parts":[{"type":"tool_call",
// "id":…,"name":…,"arguments":…}]}].
func (d *decoder) outputMessages(v pcommon.Value, c Call, src Source) {
	root, reason := d.parse(v, attrOutputMessages)
	if reason != "" {
		d.bad(c, src, reason)
		return
	}
	ok := listOf(root, func(m jsontape.Value) {
		parts := m.Get("parts")
		if parts.Kind() != jsontape.Array {
			if !parts.IsNull() || m.Kind() != jsontape.Object {
				d.bad(c, src, attrOutputMessages+": a message is not an object with parts")
			}
			return
		}
		for it := parts.Items(); it.Next(); {
			p := it.Value()
			if !p.Get("type").StrIs("tool_call") {
				continue
			}
			call := c
			call.From = []Source{src}
			call.CallID, call.Tool = strOf(p.Get("id")), strOf(p.Get("name"))
			d.setArgsValue(&call, p.Get("arguments"))
			if call.Tool == "" {
				call.Malformed = "tool_call part has no name"
			}
			d.res.Calls = append(d.res.Calls, call)
		}
	})
	if !ok {
		d.bad(c, src, attrOutputMessages+" is not an array of messages")
	}
}

// choice reads a gen_ai.choice event's body (semantic conventions up to
// v1.36, deprecated since, emitted by @opentelemetry/instrumentation-openai
// 0.22): {"index":…,"finish_reason":…,"message":{"tool_calls":[{"id":…,
// "type":"function","function":{"name":…,"arguments":"…"}}]}}.
func (d *decoder) choice(body pcommon.Value, c Call) {
	root, reason := d.parse(body, "gen_ai.choice body")
	if reason != "" {
		d.bad(c, FromChoiceEvent, reason)
		return
	}
	tcs := root.Get("message").Get("tool_calls")
	if tcs.Kind() != jsontape.Array || tcs.Len() == 0 {
		if root.Kind() != jsontape.Object || !tcs.IsNull() {
			d.bad(c, FromChoiceEvent, "gen_ai.choice body is not a choice with message.tool_calls")
			return
		}
		d.res.Skipped++
		return
	}
	for it := tcs.Items(); it.Next(); {
		tc := it.Value()
		call := c
		call.From = []Source{FromChoiceEvent}
		fn := tc.Get("function")
		call.CallID, call.Tool = strOf(tc.Get("id")), strOf(fn.Get("name"))
		d.setArgsValue(&call, fn.Get("arguments"))
		if call.Tool == "" {
			call.Malformed = "gen_ai.choice tool call has no function.name"
		}
		d.res.Calls = append(d.res.Calls, call)
	}
}

// definitions adds the listing of a tool definitions value and returns its
// index, or -1 (with a Malformed call saying why) when it is unreadable.
// The same text given to several chat spans of a payload (an agent gives
// its tools at every turn) is read once.
func (d *decoder) definitions(l Listing, v pcommon.Value, c *Call) int {
	var key string
	if v.Type() == pcommon.ValueTypeStr {
		key = l.Server + "\x00" + v.Str()
		if i, ok := d.defsByText[key]; ok {
			d.earlier(i, l.ObservedAt)
			return i
		}
	}
	root, reason := d.parse(v, attrToolDefinitions)
	if reason != "" {
		d.bad(*c, l.From, reason)
		return -1
	}
	b := d.newTools(l)
	if !listOf(root, func(def jsontape.Value) { b.add(d.toolObject(def, "", "")) }) {
		d.bad(*c, l.From, attrToolDefinitions+" is not an array of tool definitions")
		return -1
	}
	i := b.done()
	if key != "" {
		if d.defsByText == nil {
			d.defsByText = make(map[string]int)
		}
		d.defsByText[key] = i
	}
	return i
}

// tools builds the tool set of one listing.
type tools struct {
	d        *decoder
	l        Listing
	seen     map[string]bool
	problems []string
	n        int
}

func (d *decoder) newTools(l Listing) *tools {
	return &tools{d: d, l: l, seen: make(map[string]bool)}
}

func (b *tools) add(tool []byte, name, why string) {
	i := b.n
	b.n++
	if why == "" && b.seen[name] {
		why = "tool " + strconv.Quote(name) + " defined twice (the first is kept)"
	}
	if why != "" {
		b.l.Dropped++
		if len(b.problems) < 3 {
			b.problems = append(b.problems, "definition "+strconv.Itoa(i)+": "+why)
		}
		return
	}
	b.seen[name] = true
	b.l.Tools = append(b.l.Tools, tool)
}

// done adds the listing (or finds the same tool set already listed) and
// returns its index.
func (b *tools) done() int {
	b.l.Problem = strings.Join(b.problems, "; ")
	h := sha256.New()
	h.Write([]byte{'['})
	for i, t := range b.l.Tools {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(t)
	}
	h.Write([]byte{']'})
	b.l.Digest = hex.EncodeToString(h.Sum(nil))
	return b.d.addListing(b.l)
}

// toolObject turns one definition into an MCP Tool object. It reads the
// GenAI conventions' shape ({"type":"function","name","description",
// "parameters"}), the Vercel AI SDK's (inputSchema), OpenAI Chat's
// ({"function":{…}}), Anthropic's (input_schema) and, for OpenInference,
// a bare parameters schema named by tool.name (oiName). A definition
// without a schema declares no arguments: {"type":"object"}.
func (d *decoder) toolObject(def jsontape.Value, oiName, oiDesc string) (tool []byte, name, why string) {
	if def.Kind() != jsontape.Object {
		return nil, "", "not an object"
	}
	whole := def
	if fn := def.Get("function"); !fn.IsNull() {
		if fn.Kind() != jsontape.Object {
			return nil, "", "function is not an object"
		}
		def = fn
	}
	name, desc := strOf(def.Get("name")), strOf(def.Get("description"))
	var sch jsontape.Value
	for _, k := range [...]string{"inputSchema", "parameters", "input_schema"} {
		if v := def.Get(k); !v.IsNull() {
			sch = v
			break
		}
	}
	if name == "" && oiName != "" && !sch.Exists() && (whole.Get("properties").Exists() || whole.Get("type").StrIs("object")) {
		sch = whole // OpenInference: the json_schema is the parameters schema
	}
	if oiName != "" {
		name = oiName
	}
	if oiDesc != "" {
		desc = oiDesc
	}
	if name == "" {
		return nil, "", "no name"
	}
	b := append([]byte(nil), `{"name":`...)
	b = schema.AppendString(b, name)
	if desc != "" {
		b = append(b, `,"description":`...)
		b = schema.AppendString(b, desc)
	}
	b = append(b, `,"inputSchema":`...)
	switch sch.Kind() {
	case jsontape.Invalid:
		b = append(b, `{"type":"object"}`...)
	case jsontape.Object:
		b = sch.AppendCompact(b)
	case jsontape.String: // a schema written as JSON text
		if d.inner.Parse(sch.Str()) != nil || d.inner.Root().Kind() != jsontape.Object {
			return nil, "", "tool " + strconv.Quote(name) + ": its schema is not a JSON object"
		}
		b = d.inner.Root().AppendCompact(b)
	default:
		return nil, "", "tool " + strconv.Quote(name) + ": its schema is not a JSON object"
	}
	return append(b, '}'), name, ""
}

// indexed splits "<i>.<rest>" of an OpenInference flattened key.
func indexed(s string) (int, string, bool) {
	dot := strings.IndexByte(s, '.')
	if dot <= 0 || dot > 9 {
		return 0, "", false
	}
	n, err := strconv.Atoi(s[:dot])
	if err != nil || n < 0 {
		return 0, "", false
	}
	return n, s[dot+1:], true
}

// oiTool is one OpenInference tool definition, by its flattened parts.
type oiTool struct {
	schema     pcommon.Value
	hasSchema  bool
	name, desc string
}

// openInferenceTools adds the listing of OpenInference's
// llm.tools.<i>.tool.{json_schema,name,description} and returns its
// index, -1 when the span has none.
func (d *decoder) openInferenceTools(attrs pcommon.Map, c Call, at time.Time) int {
	byIndex := map[int]*oiTool{}
	attrs.Range(func(k string, v pcommon.Value) bool {
		rest, ok := strings.CutPrefix(k, oiTools)
		if !ok {
			return true
		}
		i, field, ok := indexed(rest)
		if !ok {
			return true
		}
		t := byIndex[i]
		if t == nil {
			t = &oiTool{}
			byIndex[i] = t
		}
		switch field {
		case "tool.json_schema":
			t.schema, t.hasSchema = v, true
		case "tool.name":
			t.name = v.Str()
		case "tool.description":
			t.desc = v.Str()
		}
		return true
	})
	if len(byIndex) == 0 {
		return -1
	}
	keys := make([]int, 0, len(byIndex))
	for i := range byIndex {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	b := d.newTools(Listing{ObservedAt: at, From: FromOpenInferenceDef, TraceID: c.TraceID, SpanID: c.SpanID})
	for _, i := range keys {
		t := byIndex[i]
		def := jsontape.Value{}
		if t.hasSchema {
			var reason string
			if def, reason = d.parse(t.schema, oiTools+strconv.Itoa(i)+".tool.json_schema"); reason != "" {
				d.bad(c, FromOpenInferenceDef, reason)
				return -1
			}
		} else {
			def, _ = d.parseText([]byte(`{}`), "")
		}
		b.add(d.toolObject(def, t.name, t.desc))
	}
	return b.done()
}

// openInferenceCalls reads OpenInference's
// llm.output_messages.<i>.message.tool_calls.<j>.tool_call.{id,
// function.name,function.arguments}.
func (d *decoder) openInferenceCalls(attrs pcommon.Map, c Call, at time.Time) {
	type oiCall struct {
		id, name string
		args     pcommon.Value
		hasArgs  bool
	}
	byIndex := map[[2]int]*oiCall{}
	attrs.Range(func(k string, v pcommon.Value) bool {
		rest, ok := strings.CutPrefix(k, oiOutputMessages)
		if !ok {
			return true
		}
		i, rest, ok := indexed(rest)
		if !ok {
			return true
		}
		rest, ok = strings.CutPrefix(rest, "message.tool_calls.")
		if !ok {
			return true
		}
		j, field, ok := indexed(rest)
		if !ok {
			return true
		}
		tc := byIndex[[2]int{i, j}]
		if tc == nil {
			tc = &oiCall{}
			byIndex[[2]int{i, j}] = tc
		}
		switch field {
		case "tool_call.id":
			tc.id = v.Str()
		case "tool_call.function.name":
			tc.name = v.Str()
		case "tool_call.function.arguments":
			tc.args, tc.hasArgs = v, true
		}
		return true
	})
	keys := make([][2]int, 0, len(byIndex))
	for k := range byIndex {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a][0] != keys[b][0] {
			return keys[a][0] < keys[b][0]
		}
		return keys[a][1] < keys[b][1]
	})
	for _, k := range keys {
		tc := byIndex[k]
		call := c
		call.EmittedAt = at
		call.From = []Source{FromOpenInference}
		call.CallID, call.Tool = tc.id, tc.name
		if tc.hasArgs {
			d.setArgs(&call, tc.args, "tool_call.function.arguments")
		}
		if call.Tool == "" && call.Malformed == "" {
			call.Malformed = "OpenInference tool_call has no function.name"
		}
		d.res.Calls = append(d.res.Calls, call)
	}
}
