package modelproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/toolaudit/toolaudit/schema"
)

// openAIChat is OpenAI Chat Completions (POST .../chat/completions).
type openAIChat struct{}

func (openAIChat) provider() string { return "openai" }

func (openAIChat) decided(method, path string) bool {
	return method == http.MethodPost && strings.HasSuffix(path, "/chat/completions")
}

func (openAIChat) endpoint() string { return "POST .../chat/completions (Chat Completions)" }

func (openAIChat) parseRequest(body []byte, maxTools int) (*request, error) {
	var r struct {
		Stream     bool              `json:"stream"`
		Tools      []json.RawMessage `json:"tools"`
		Functions  json.RawMessage   `json:"functions"`
		ToolChoice json.RawMessage   `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if len(r.Functions) > 0 && string(r.Functions) != "null" {
		// Deprecated functions/function_call: their calls come back as
		// message.function_call, which this proxy does not decide.
		return nil, errors.New(`"functions" is not supported by this proxy: declare them as "tools"`)
	}
	if len(r.Tools) > maxTools {
		return nil, errTooManyTools(len(r.Tools), maxTools)
	}
	req := &request{stream: r.Stream, strict: map[string]bool{}}
	for i, raw := range r.Tools {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
				Strict      bool            `json:"strict"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		if t.Type != "function" || t.Function == nil {
			// A custom tool's call carries free text, which the contract's
			// arguments object cannot hold: refused rather than passed on
			// undecided.
			return nil, fmt.Errorf("tools[%d]: type %q is not supported by this proxy (function tools only)", i, t.Type)
		}
		f := t.Function
		req.tools = append(req.tools, listingTool(f.Name, f.Description, f.Parameters))
		if f.Strict {
			req.strict[f.Name] = true
		}
	}
	return req, req.frontier(r.ToolChoice, chatChoice)
}

// chatChoice reads a Chat Completions tool_choice: "none" allows no
// tool, a named function only it, allowed_tools the tools it lists;
// "auto" and "required" any declared tool.
func chatChoice(raw json.RawMessage) ([]string, bool, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{}, s == "none", nil
	}
	var c struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
		AllowedTools struct {
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		} `json:"allowed_tools"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, err
	}
	switch c.Type {
	case "function":
		return []string{c.Function.Name}, true, nil
	case "allowed_tools":
		names := []string{}
		for _, t := range c.AllowedTools.Tools {
			names = append(names, t.Function.Name)
		}
		return names, true, nil
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

func (openAIChat) parseResponse(body []byte) (response, error) {
	r := &openAIResponse{}
	if err := parseTop(body, &r.top, &r.head, "choices", &r.choices); err != nil {
		return nil, err
	}
	r.msgs = make([]map[string]json.RawMessage, len(r.choices))
	r.raws = make([][]json.RawMessage, len(r.choices))
	for i, c := range r.choices {
		if c == nil {
			return nil, fmt.Errorf("choices[%d] is not an object", i)
		}
		if m, ok := c["message"]; ok && string(m) != "null" {
			if err := json.Unmarshal(m, &r.msgs[i]); err != nil {
				return nil, fmt.Errorf("choices[%d].message: %w", i, err)
			}
		}
		msg := r.msgs[i]
		if fc, ok := msg["function_call"]; ok && string(fc) != "null" {
			return nil, fmt.Errorf("choices[%d].message.function_call: a deprecated function call, not decided by this proxy", i)
		}
		tc, ok := msg["tool_calls"]
		if !ok || string(tc) == "null" {
			continue
		}
		if err := json.Unmarshal(tc, &r.raws[i]); err != nil {
			return nil, fmt.Errorf("choices[%d].message.tool_calls: %w", i, err)
		}
		for j, raw := range r.raws[i] {
			var c struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function *struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
				Custom *struct {
					Name  string `json:"name"`
					Input string `json:"input"`
				} `json:"custom"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return nil, fmt.Errorf("choices[%d].message.tool_calls[%d]: %w", i, j, err)
			}
			call := toolCall{id: c.ID}
			switch {
			case c.Function != nil:
				call.name = c.Function.Name
				call.args, call.raw = callArgs(c.Function.Arguments)
			case c.Custom != nil:
				// Free text: arguments_raw, MALFORMED.
				call.name, call.raw = c.Custom.Name, &c.Custom.Input
			default:
				return nil, fmt.Errorf("choices[%d].message.tool_calls[%d]: type %q without its call", i, j, c.Type)
			}
			r.all = append(r.all, call)
		}
	}
	return r, nil
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
	b = append(b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			b = append(b, ',')
		}
		b = schema.AppendString(b, k)
		b = append(b, ':')
		b = appendRaw(b, m[k])
	}
	return append(b, '}')
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
