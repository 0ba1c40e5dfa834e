package modelproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// openAIChat is OpenAI Chat Completions (POST .../chat/completions).
type openAIChat struct{}

func (openAIChat) provider() string { return "openai" }

func (openAIChat) decided(method, path string) bool {
	return method == http.MethodPost && strings.HasSuffix(path, "/chat/completions")
}

func (openAIChat) endpoint() string { return "POST .../chat/completions (Chat Completions)" }

func (openAIChat) parseRequest(v jsontape.Value, maxTools int) (*request, error) {
	if present(v.Get("functions")) {
		// Deprecated functions/function_call: their calls come back as
		// message.function_call, which this proxy does not decide.
		return nil, errors.New(`"functions" is not supported by this proxy: declare them as "tools"`)
	}
	req, err := newRequest(v, maxTools)
	if err != nil {
		return nil, err
	}
	err = arrayOf(v.Get("tools"), "tools", func(i int, t jsontape.Value) error {
		tf := fieldsOf(t, "tool")
		typ := tf.str("type")
		f := tf.object("function")
		name, desc, strict := f.str("name"), f.str("description"), f.boolean("strict")
		if err := f.wrap("tools[%d]", i); err != nil {
			return err
		}
		if typ != "function" || f.v.IsNull() {
			// A custom tool's call carries free text, which the contract's
			// arguments object cannot hold: refused rather than passed on
			// undecided.
			return fmt.Errorf("tools[%d]: type %q is not supported by this proxy (function tools only)", i, typ)
		}
		req.tools = append(req.tools, listingTool(name, desc, raw(f.v.Get("parameters"))))
		if strict {
			req.strict[name] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return req, req.frontier(v.Get("tool_choice"), chatChoice)
}

// chatChoice reads a Chat Completions tool_choice: "none" allows no
// tool, a named function only it, allowed_tools the tools it lists;
// "auto" and "required" any declared tool.
func chatChoice(c jsontape.Value) ([]string, bool, error) {
	if c.Kind() == jsontape.String {
		return []string{}, c.StrIs("none"), nil
	}
	if err := object(c, "tool_choice"); err != nil {
		return nil, false, err
	}
	switch strOr(c.Get("type")) {
	case "function":
		tf := fieldsOf(c, "tool_choice")
		f := tf.object("function")
		name := f.str("name")
		return []string{name}, true, f.wrap("function")
	case "allowed_tools":
		names := []string{}
		err := arrayOf(c.Get("allowed_tools").Get("tools"), "allowed_tools.tools", func(i int, t jsontape.Value) error {
			tf := fieldsOf(t, "tool")
			f := tf.object("function")
			names = append(names, f.str("name"))
			return f.wrap("allowed_tools.tools[%d]", i)
		})
		return names, true, err
	}
	return nil, false, nil
}

// openAIResponse is a chat completion, its members kept as they are but
// those the proxy rewrites.
type openAIResponse struct {
	top     map[string]json.RawMessage
	choices []map[string]json.RawMessage
	msgs    []map[string]json.RawMessage
	raws    [][]json.RawMessage // per choice, its tool_calls
	parsed
}

func (openAIChat) parseResponse(v jsontape.Value) (response, error) {
	r := &openAIResponse{}
	var err error
	if r.top, err = readTop(v, &r.head); err != nil {
		return nil, err
	}
	choices := v.Get("choices")
	if k := choices.Kind(); k != jsontape.Array && k != jsontape.Null {
		return nil, typeError("choices", choices, "an array")
	}
	r.choices = make([]map[string]json.RawMessage, 0, choices.Len())
	r.msgs = make([]map[string]json.RawMessage, choices.Len())
	r.raws = make([][]json.RawMessage, choices.Len())
	err = arrayOf(choices, "choices", func(i int, c jsontape.Value) error {
		if c.Kind() != jsontape.Object {
			return fmt.Errorf("choices[%d] is not an object", i)
		}
		ch, _ := members(c, "")
		r.choices = append(r.choices, ch)
		m := c.Get("message")
		msg, err := members(m, "message")
		if err != nil {
			return fmt.Errorf("choices[%d]: %w", i, err)
		}
		r.msgs[i] = msg
		if present(m.Get("function_call")) {
			return fmt.Errorf("choices[%d].message.function_call: a deprecated function call, not decided by this proxy", i)
		}
		tcs := m.Get("tool_calls")
		if r.raws[i], err = items(tcs, "tool_calls"); err != nil {
			return fmt.Errorf("choices[%d].message: %w", i, err)
		}
		return arrayOf(tcs, "tool_calls", func(j int, tc jsontape.Value) error {
			call, err := chatCall(tc)
			if err != nil {
				return fmt.Errorf("choices[%d].message.tool_calls[%d]: %w", i, j, err)
			}
			r.all = append(r.all, call)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// chatCall reads one tool call of a message: a function's, or a custom
// tool's free text (arguments_raw, MALFORMED).
func chatCall(tc jsontape.Value) (toolCall, error) {
	t := fieldsOf(tc, "tool call")
	call := toolCall{id: t.str("id")}
	typ := t.str("type")
	switch f, c := t.object("function"), t.object("custom"); {
	case present(f.v):
		call.name = f.str("name")
		args := f.str("arguments")
		call.args, call.raw = callArgs(args)
		return call, f.wrap("function")
	case present(c.v):
		// Free text: arguments_raw, MALFORMED.
		call.name = c.str("name")
		input := c.str("input")
		call.raw = &input
		return call, c.wrap("custom")
	default:
		if t.err != nil {
			return call, t.err
		}
		return call, fmt.Errorf("type %q without its call", typ)
	}
}

// withhold drops the rejected calls from each choice's tool_calls. A
// choice left without calls becomes an ordinary answer: tool_calls
// removed, finish_reason "stop" (an agent loop then ends its turn
// instead of executing nothing), the note appended to its content; a
// choice that keeps calls keeps finish_reason "tool_calls", the note in
// its content (the model reads it in the history: what it asked for and
// did not get).
func (r *openAIResponse) withhold(rejected []bool, note string) ([]byte, error) {
	k := 0
	for i, raws := range r.raws {
		if len(raws) == 0 {
			continue
		}
		kept := raws[:0:0]
		dropped := false
		for _, raw := range raws {
			if rejected[k] {
				dropped = true
			} else {
				kept = append(kept, raw)
			}
			k++
		}
		if !dropped {
			continue
		}
		msg := r.msgs[i]
		if note != "" {
			var content string
			if c, ok := msg["content"]; ok && string(c) != "null" {
				if err := json.Unmarshal(c, &content); err != nil {
					return nil, fmt.Errorf("choices[%d].message.content: %w", i, err)
				}
				content += "\n\n"
			}
			msg["content"] = mustJSON(content + note)
		}
		if len(kept) == 0 {
			delete(msg, "tool_calls")
			r.choices[i]["finish_reason"] = mustJSON("stop")
		} else {
			msg["tool_calls"] = mustJSON(kept)
		}
		r.choices[i]["message"] = mustJSON(msg)
	}
	r.top["choices"] = mustJSON(r.choices)
	return mustJSON(r.top), nil
}

func (r *openAIResponse) encode() ([]byte, error) { return mustJSON(r.top), nil }

func (r *openAIResponse) rawCalls() []json.RawMessage { return slices.Concat(r.raws...) }

func (r *openAIResponse) usage() json.RawMessage { return r.top["usage"] }

func (r *openAIResponse) repairable() bool { return len(r.choices) == 1 && r.msgs[0] != nil }

// repair appends the assistant's message (its content and tool calls)
// and one tool message per call: Chat Completions has no error flag, so
// a rejection says so in its text.
func (r *openAIResponse) repair(req []byte, results []string, _ []bool) ([]byte, error) {
	content := r.msgs[0]["content"]
	if len(content) == 0 {
		content = json.RawMessage("null")
	}
	msgs := []json.RawMessage{mustJSON(map[string]any{"role": "assistant", "content": content, "tool_calls": r.raws[0]})}
	for k, c := range r.all {
		msgs = append(msgs, mustJSON(map[string]any{"role": "tool", "tool_call_id": c.id, "content": results[k]}))
	}
	return withMessages(req, msgs...)
}

func (r *openAIResponse) merge(raws []json.RawMessage, calls []toolCall, usage json.RawMessage) {
	if usage != nil {
		r.top["usage"] = usage
	}
	if len(raws) == 0 {
		return
	}
	r.raws[0] = slices.Concat(raws, r.raws[0])
	r.all = slices.Concat(calls, r.all)
	r.msgs[0]["tool_calls"] = mustJSON(r.raws[0])
	r.choices[0]["finish_reason"] = mustJSON("tool_calls")
	r.choices[0]["message"] = mustJSON(r.msgs[0])
	r.top["choices"] = mustJSON(r.choices)
}

func (openAIChat) errorBody(status int, msg string) []byte {
	typ, code := "invalid_request_error", "toolaudit_"+statusKind(status)
	if status >= 500 {
		typ = "server_error"
	}
	return mustJSON(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}})
}

// mustJSON encodes what cannot fail to encode (strings, raw JSON, maps
// of them). The objects and arrays of raw values the proxy
// rebuilds a response from are written as they are, their members'
// names sorted as encoding/json sorts them: their bytes were validated
// when the body was (parseStrict), and encoding/json would validate and
// compact each raw value again at every level it is nested in, which
// was a fifth of the proxy's CPU (docs/performance.md §15).
func mustJSON(v any) json.RawMessage {
	switch v := v.(type) {
	case map[string]json.RawMessage:
		return appendObject(nil, v)
	case []map[string]json.RawMessage:
		return appendArray(nil, v, appendObject)
	case []json.RawMessage:
		return appendArray(nil, v, appendRaw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func appendObject(b []byte, m map[string]json.RawMessage) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	b, _ = appendObjectHole(b, m, nil)
	return b
}

// appendObjectHole appends m as appendObject does, with one more member
// when hole is set, of that name (not one of m's), its value left out:
// at is where in b it goes.
func appendObjectHole(b []byte, m map[string]json.RawMessage, hole *string) (_ []byte, at int) {
	names := slices.AppendSeq(make([]string, 0, len(m)+1), maps.Keys(m))
	if hole != nil {
		names = append(names, *hole)
	}
	slices.Sort(names)
	n := 2 // {}
	for k, v := range m {
		n += len(k) + 4 + max(len(v), 4) // "k":v, (null when v is empty)
	}
	b = slices.Grow(b, n) // one allocation, names needing no escapes
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = schema.AppendString(b, k)
		b = append(b, ':')
		if hole != nil && k == *hole {
			at = len(b)
			continue
		}
		b = appendRaw(b, m[k])
	}
	return append(b, '}'), at
}

// appendArray appends xs, null when nil (as encoding/json writes it).
func appendArray[T any](b []byte, xs []T, elem func([]byte, T) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = elem(b, x)
	}
	return append(b, ']')
}

// appendRaw appends r, null when empty (as encoding/json writes a nil
// RawMessage).
func appendRaw(b []byte, r json.RawMessage) []byte {
	if len(r) == 0 {
		return append(b, "null"...)
	}
	return append(b, r...)
}
