package otlp

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// validJSON reports whether b is strict JSON (package jsontape: no
// repeated member names, valid UTF-8, bounded nesting), the rule every
// event of the contract is read by.
func validJSON(b []byte) bool {
	var t jsontape.Tape
	return t.Parse(b) == nil
}

func parseErr(b []byte) string {
	var t jsontape.Tape
	if err := t.Parse(b); err != nil {
		return err.Error()
	}
	return ""
}

// compact returns b without insignificant whitespace; b must be valid JSON.
func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return append([]byte(nil), b...)
	}
	return buf.Bytes()
}

// rawStr reads a JSON string member; absent or another type gives false.
func rawStr(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// listOf reads a JSON array, or a single object as a list of one.
func listOf(b []byte) ([]json.RawMessage, bool) {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		return []json.RawMessage{b}, true
	}
	var l []json.RawMessage
	if json.Unmarshal(b, &l) != nil {
		return nil, false
	}
	return l, true
}

// jsonOf returns the JSON of v and a reason when it cannot be read: over
// the limits, or not strict JSON. A string value holds JSON text.
func (d *decoder) jsonOf(v pcommon.Value, name string) ([]byte, string) {
	raw, _, reason := d.valueJSON(v, name)
	if reason != "" {
		return nil, reason
	}
	if e := parseErr(raw); e != "" {
		return nil, name + " is not JSON: " + e
	}
	return raw, ""
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
	raw, reason := d.jsonOf(v, attrOutputMessages)
	if reason != "" {
		d.bad(c, src, reason)
		return
	}
	msgs, ok := listOf(raw)
	if !ok {
		d.bad(c, src, attrOutputMessages+" is not an array of messages")
		return
	}
	for _, m := range msgs {
		var msg struct {
			Parts []json.RawMessage `json:"parts"`
		}
		if json.Unmarshal(m, &msg) != nil {
			d.bad(c, src, attrOutputMessages+": a message is not an object with parts")
			continue
		}
		for _, p := range msg.Parts {
			var part struct {
				Type, ID, Name, Arguments json.RawMessage
			}
			if json.Unmarshal(p, &part) != nil {
				d.bad(c, src, attrOutputMessages+": a part is not an object")
				continue
			}
			if t, _ := rawStr(part.Type); t != "tool_call" {
				continue
			}
			call := c
			call.From = []Source{src}
			call.CallID, _ = rawStr(part.ID)
			call.Tool, _ = rawStr(part.Name)
			setRawArgs(&call, part.Arguments)
			if call.Tool == "" {
				call.Malformed = "tool_call part has no name"
			}
			d.res.Calls = append(d.res.Calls, call)
		}
	}
}

// setRawArgs reads arguments given as a JSON member: a string is the
// model's text, null or absent is not recorded.
func setRawArgs(c *Call, raw json.RawMessage) {
	if isNull(raw) {
		return
	}
	if s, ok := rawStr(raw); ok {
		c.Args, c.ArgsRecorded = argsOf([]byte(s), true), true
		return
	}
	c.Args, c.ArgsRecorded = argsOf(raw, false), true
}

// choice reads a gen_ai.choice event's body (semantic conventions up to
// v1.36, deprecated since, emitted by @opentelemetry/instrumentation-openai
// 0.22): {"index":…,"finish_reason":…,"message":{"tool_calls":[{"id":…,
// "type":"function","function":{"name":…,"arguments":"…"}}]}}.
func (d *decoder) choice(body pcommon.Value, c Call) {
	raw, reason := d.jsonOf(body, "gen_ai.choice body")
	if reason != "" {
		d.bad(c, FromChoiceEvent, reason)
		return
	}
	var b struct {
		Message struct {
			ToolCalls []json.RawMessage `json:"tool_calls"`
		} `json:"message"`
	}
	if json.Unmarshal(raw, &b) != nil {
		d.bad(c, FromChoiceEvent, "gen_ai.choice body is not a choice object")
		return
	}
	for _, tc := range b.Message.ToolCalls {
		var t struct {
			ID       json.RawMessage `json:"id"`
			Function struct {
				Name, Arguments json.RawMessage
			} `json:"function"`
		}
		call := c
		call.From = []Source{FromChoiceEvent}
		if json.Unmarshal(tc, &t) != nil {
			d.bad(call, FromChoiceEvent, "gen_ai.choice: a tool call is not an object with a function")
			continue
		}
		call.CallID, _ = rawStr(t.ID)
		call.Tool, _ = rawStr(t.Function.Name)
		setRawArgs(&call, t.Function.Arguments)
		if call.Tool == "" {
			call.Malformed = "gen_ai.choice tool call has no function.name"
		}
		d.res.Calls = append(d.res.Calls, call)
	}
	if len(b.Message.ToolCalls) == 0 {
		d.res.Skipped++
	}
}

// definitions adds the listing of a tool definitions value and returns its
// index, or -1 (with a Malformed call saying why) when it is unreadable.
func (d *decoder) definitions(l Listing, v pcommon.Value, c *Call) int {
	raw, reason := d.jsonOf(v, attrToolDefinitions)
	if reason != "" {
		d.bad(*c, l.From, reason)
		return -1
	}
	defs, ok := listOf(raw)
	if !ok {
		d.bad(*c, l.From, attrToolDefinitions+" is not an array of tool definitions")
		return -1
	}
	items := make([]toolItem, len(defs))
	for i, def := range defs {
		items[i].def = def
	}
	return d.listing(l, items)
}

type toolItem struct {
	def        json.RawMessage
	name, desc string // OpenInference's tool.name, tool.description
}

// listing normalises tool definitions into MCP Tool objects and adds them
// as a listing.
func (d *decoder) listing(l Listing, items []toolItem) int {
	seen := make(map[string]bool, len(items))
	var problems []string
	for i, it := range items {
		tool, name, why := toolObject(it)
		if why == "" && seen[name] {
			why = "tool " + strconv.Quote(name) + " defined twice (the first is kept)"
		}
		if why != "" {
			l.Dropped++
			if len(problems) < 3 {
				problems = append(problems, "definition "+strconv.Itoa(i)+": "+why)
			}
			continue
		}
		seen[name] = true
		l.Tools = append(l.Tools, tool)
	}
	l.Problem = strings.Join(problems, "; ")
	h := sha256.New()
	h.Write([]byte{'['})
	for i, t := range l.Tools {
		if i > 0 {
			h.Write([]byte{','})
		}
		h.Write(t)
	}
	h.Write([]byte{']'})
	l.Digest = hex.EncodeToString(h.Sum(nil))
	return d.addListing(l)
}

// toolObject turns one definition into an MCP Tool object. It reads the
// GenAI conventions' shape ({"type":"function","name","description",
// "parameters"}), the Vercel AI SDK's (inputSchema), OpenAI Chat's
// ({"function":{…}}), Anthropic's (input_schema) and, for OpenInference,
// a bare parameters schema named by tool.name. A definition without a
// schema declares no arguments: {"type":"object"}.
func toolObject(it toolItem) (tool []byte, name, why string) {
	var def map[string]json.RawMessage
	if json.Unmarshal(it.def, &def) != nil {
		return nil, "", "not an object"
	}
	if fn, ok := def["function"]; ok && !isNull(fn) {
		var inner map[string]json.RawMessage
		if json.Unmarshal(fn, &inner) != nil {
			return nil, "", "function is not an object"
		}
		def = inner
	}
	name, _ = rawStr(def["name"])
	desc, _ := rawStr(def["description"])
	var sch json.RawMessage
	for _, k := range [...]string{"inputSchema", "parameters", "input_schema"} {
		if v, ok := def[k]; ok && !isNull(v) {
			sch = v
			break
		}
	}
	if name == "" && it.name != "" && sch == nil {
		if _, isSchema := def["properties"]; isSchema || strings.Contains(string(def["type"]), "object") {
			sch = it.def // OpenInference: the json_schema is the parameters schema
		}
	}
	if it.name != "" {
		name = it.name
	}
	if it.desc != "" {
		desc = it.desc
	}
	if name == "" {
		return nil, "", "no name"
	}
	if s, ok := rawStr(sch); ok { // a schema written as JSON text
		sch = json.RawMessage(s)
	}
	switch {
	case sch == nil:
		sch = json.RawMessage(`{"type":"object"}`)
	case !validJSON(bytes.TrimSpace(sch)) || bytes.TrimSpace(sch)[0] != '{':
		return nil, "", "tool " + strconv.Quote(name) + ": its schema is not a JSON object"
	}
	b := append([]byte(nil), `{"name":`...)
	b = schema.AppendString(b, name)
	if desc != "" {
		b = append(b, `,"description":`...)
		b = schema.AppendString(b, desc)
	}
	b = append(b, `,"inputSchema":`...)
	b = append(b, compact(bytes.TrimSpace(sch))...)
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

// openInferenceTools adds the listing of OpenInference's
// llm.tools.<i>.tool.{json_schema,name,description} and returns its
// index, -1 when the span has none.
func (d *decoder) openInferenceTools(attrs pcommon.Map, c Call, at time.Time) int {
	byIndex := map[int]*toolItem{}
	var bad string
	attrs.Range(func(k string, v pcommon.Value) bool {
		rest, ok := strings.CutPrefix(k, oiTools)
		if !ok {
			return true
		}
		i, field, ok := indexed(rest)
		if !ok {
			return true
		}
		it := byIndex[i]
		if it == nil {
			it = &toolItem{}
			byIndex[i] = it
		}
		switch field {
		case "tool.json_schema":
			raw, reason := d.jsonOf(v, k)
			if reason != "" {
				bad = reason
				return false
			}
			it.def = raw
		case "tool.name":
			it.name = v.Str()
		case "tool.description":
			it.desc = v.Str()
		}
		return true
	})
	if bad != "" {
		d.bad(c, FromOpenInferenceDef, bad)
		return -1
	}
	if len(byIndex) == 0 {
		return -1
	}
	keys := make([]int, 0, len(byIndex))
	for i := range byIndex {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	items := make([]toolItem, 0, len(keys))
	for _, i := range keys {
		it := *byIndex[i]
		if it.def == nil {
			it.def = json.RawMessage(`{}`)
		}
		items = append(items, it)
	}
	return d.listing(Listing{ObservedAt: at, From: FromOpenInferenceDef, TraceID: c.TraceID, SpanID: c.SpanID}, items)
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
