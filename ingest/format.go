package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
)

// Format names an input format.
type Format string

// The formats. FormatUnknown doubles as "detect per line" where a format
// is asked for.
const (
	FormatUnknown   Format = ""
	FormatEvent     Format = "event"
	FormatOpenAI    Format = "openai"
	FormatAnthropic Format = "anthropic"
	FormatBedrock   Format = "bedrock"
	FormatMCP       Format = "mcp"
	FormatOTel      Format = "otel"
)

// Formats lists the known formats in a fixed order.
func Formats() []Format {
	return []Format{FormatEvent, FormatOpenAI, FormatAnthropic, FormatBedrock, FormatMCP, FormatOTel}
}

// providerFormats are the formats an envelope can carry; their names are
// the envelope's keys.
var providerFormats = [...]Format{FormatOpenAI, FormatAnthropic, FormatBedrock, FormatMCP, FormatOTel}

// ParseFormat parses a format name; "auto" and "" give FormatUnknown.
func ParseFormat(s string) (Format, error) {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "", "auto":
		return FormatUnknown, nil
	}
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	return FormatUnknown, fmt.Errorf("unknown format %q (want auto, %s)", s, formatList())
}

func formatList() string {
	var names []string
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// Detect tells the format of one line, looking through an envelope to the
// provider object it carries. It returns FormatUnknown for anything else.
func Detect(line []byte) Format {
	obj, err := decodeObject(line)
	if err != nil {
		return FormatUnknown
	}
	return detectObject(obj)
}

// object is a JSON object with its values undecoded.
type object map[string]json.RawMessage

// decodeObject reads a line's members for its detection and routing. A
// line that jsontape refuses (a repeated member, invalid UTF-8, nesting
// past its bound, or not JSON) is read as encoding/json reads it, as
// before: a contract event so written passes through for the resolver to
// decide MALFORMED (a row in the store, not a line error), and a
// provider's object is refused by unmarshal.
func decodeObject(b []byte) (object, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || b[0] != '{' {
		return nil, ErrNotJSON
	}
	t := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(t)
	if t.Parse(b) != nil {
		var obj object
		if err := json.Unmarshal(b, &obj); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotJSON, err)
		}
		return obj, nil
	}
	root := t.Root()
	if root.Kind() != jsontape.Object {
		return nil, fmt.Errorf("%w: not an object", ErrNotJSON)
	}
	obj := make(object, root.Len())
	for ms := root.Members(); ms.Next(); {
		obj[string(ms.Name())] = ms.Value().Raw() // a view of b
	}
	return obj, nil
}

// str returns the string value of key, or "".
func (o object) str(key string) string {
	raw, ok := o[key]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// kindOf returns the JSON kind of key's value: '{', '[', '"', 't', 'f',
// 'n', a digit or '-', or 0 when absent.
func (o object) kindOf(key string) byte {
	raw, ok := o[key]
	if !ok {
		return 0
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0
	}
	return raw[0]
}

func detectObject(o object) Format {
	switch o.str("type") {
	case "call", "listing":
		return FormatEvent
	}
	if o.kindOf("event_id") != 0 {
		return FormatEvent // a contract-like event of a wrong type: the event adapter says why
	}
	if f, n := envelopeFormat(o); n > 0 {
		return f
	}
	switch {
	case o.kindOf("resourceSpans") == '[', o.kindOf("resourceLogs") == '[':
		return FormatOTel
	case o.kindOf("jsonrpc") == '"', o.kindOf("method") == '"' && o.kindOf("params") != 0:
		return FormatMCP
	case o.kindOf("result") == '{' && o.kindOf("id") != 0:
		return FormatMCP
	case o.kindOf("choices") == '[', o.kindOf("tool_calls") != 0, o.kindOf("function_call") == '{':
		return FormatOpenAI
	case o.kindOf("output") == '{':
		return FormatBedrock
	case o.kindOf("toolUse") == '{':
		return FormatBedrock
	}
	switch o.str("type") {
	case "message", "tool_use", "mcp_tool_use":
		return FormatAnthropic
	}
	switch o.kindOf("content") {
	case '[':
		return detectBlocks(o["content"])
	case '"', 'n':
		if o.kindOf("role") == '"' {
			return FormatOpenAI // a plain chat message without tool calls
		}
	}
	return FormatUnknown
}

// detectBlocks tells Anthropic content blocks ({"type":…}) from Bedrock
// ones ({"text":…}, {"toolUse":…}).
func detectBlocks(raw json.RawMessage) Format {
	var blocks []object
	if json.Unmarshal(raw, &blocks) != nil {
		return FormatUnknown
	}
	for _, b := range blocks {
		if b.kindOf("type") == '"' {
			return FormatAnthropic
		}
		for _, k := range [...]string{"toolUse", "toolResult", "text", "reasoningContent", "image", "document"} {
			if b.kindOf(k) != 0 {
				return FormatBedrock
			}
		}
	}
	return FormatUnknown
}

// envelopeFormat returns the envelope key present in o and how many there
// are.
func envelopeFormat(o object) (Format, int) {
	var f Format
	n := 0
	for _, pf := range providerFormats {
		if o.kindOf(string(pf)) == '{' {
			if n == 0 {
				f = pf
			}
			n++
		}
	}
	return f, n
}
