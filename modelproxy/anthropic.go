package modelproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
)

// anthropicMessages is the Anthropic Messages API (POST /v1/messages).
type anthropicMessages struct{}

func (anthropicMessages) provider() string { return "anthropic" }

func (anthropicMessages) decided(method, path string) bool {
	return method == http.MethodPost && path == "/v1/messages"
}

func (anthropicMessages) endpoint() string { return "POST /v1/messages (Messages)" }

// serverTool reports whether a declared tool's type is one the API runs
// itself (web search, web fetch, code execution, tool search): its calls
// come back as server_tool_use blocks, already executed, never for the
// client to execute, so they are not decided.
func serverTool(typ string) bool {
	for _, p := range []string{"web_search_", "web_fetch_", "code_execution_", "tool_search_tool_"} {
		if strings.HasPrefix(typ, p) {
			return true
		}
	}
	return false
}

func (anthropicMessages) parseRequest(v jsontape.Value, maxTools int) (*request, error) {
	req, err := newRequest(v, maxTools)
	if err != nil {
		return nil, err
	}
	err = arrayOf(v.Get("tools"), "tools", func(i int, t jsontape.Value) error {
		f := fieldsOf(t, "tool")
		typ, name, desc, strict := f.str("type"), f.str("name"), f.str("description"), f.boolean("strict")
		if err := f.wrap("tools[%d]", i); err != nil {
			return err
		}
		switch {
		case typ == "" || typ == "custom":
			in := t.Get("input_schema")
			if in.IsNull() {
				return fmt.Errorf("tools[%d]: a custom tool without input_schema", i)
			}
			req.tools = append(req.tools, listingTool(name, desc, in.Raw()))
		case serverTool(typ):
			return nil
		default:
			// A tool the API defines and the client executes (bash,
			// text_editor, computer, memory): its name is declared, its
			// schema is the API's own.
			req.tools = append(req.tools, listingTool(name, desc, openSchema))
		}
		if strict {
			req.strict[name] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return req, req.frontier(v.Get("tool_choice"), messagesChoice)
}

// messagesChoice reads a Messages tool_choice: {"type":"none"} allows no
// tool, {"type":"tool","name":...} only it; auto and any every declared
// tool.
func messagesChoice(c jsontape.Value) ([]string, bool, error) {
	f := fieldsOf(c, "tool_choice")
	typ, name := f.str("type"), f.str("name")
	if f.err != nil {
		return nil, false, f.err
	}
	switch typ {
	case "none":
		return []string{}, true, nil
	case "tool":
		return []string{name}, true, nil
	}
	return nil, false, nil
}

// anthropicResponse is a message, its members kept as they are but
// content, stop_reason and stop_sequence.
type anthropicResponse struct {
	top       map[string]json.RawMessage
	callItems // the content blocks, the tool_use ones the calls
}

func (anthropicMessages) parseResponse(v jsontape.Value) (response, error) {
	r := &anthropicResponse{}
	var err error
	if r.top, err = readTop(v, &r.head); err != nil {
		return nil, err
	}
	content := v.Get("content")
	if k := content.Kind(); k != jsontape.Array && k != jsontape.Null {
		return nil, typeError("content", content, "an array")
	}
	r.items, _ = items(content, "content")
	err = arrayOf(content, "content", func(i int, b jsontape.Value) error {
		f := fieldsOf(b, "block")
		if typ := f.str("type"); typ != "tool_use" {
			return f.wrap("content[%d]", i) // text, thinking; server_tool_use and its results ran at the API
		}
		c := toolCall{id: f.str("id"), name: f.str("name"), args: raw(b.Get("input"))}
		if err := f.wrap("content[%d]", i); err != nil {
			return err
		}
		if c.args == nil {
			s := ""
			c.raw = &s
		}
		r.add(i, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// withhold drops the rejected tool_use blocks and appends the note as a
// text block. A message left without tool_use ends its turn: stop_reason
// "end_turn" (the SDKs' tool runners and agent loops stop instead of
// answering no call); one that keeps calls keeps stop_reason "tool_use".
func (r *anthropicResponse) withhold(rejected []bool, note string) ([]byte, error) {
	content, left := r.kept(rejected)
	if note != "" {
		content = append(content, mustJSON(map[string]string{"type": "text", "text": note}))
	}
	r.top["content"] = mustJSON(content)
	if left == 0 {
		r.top["stop_reason"] = mustJSON("end_turn")
		r.top["stop_sequence"] = json.RawMessage("null")
	}
	return mustJSON(r.top), nil
}

func (r *anthropicResponse) encode() ([]byte, error) { return mustJSON(r.top), nil }

func (r *anthropicResponse) usage() json.RawMessage { return r.top["usage"] }

func (r *anthropicResponse) repairable() bool { return true }

// repair appends the assistant's turn (its content as returned) and a
// user turn of one tool_result per tool_use, is_error where rejected.
func (r *anthropicResponse) repair(req []byte, results []string, isError []bool) ([]byte, error) {
	res := make([]any, len(r.all))
	for k, c := range r.all {
		res[k] = map[string]any{"type": "tool_result", "tool_use_id": c.id, "content": results[k], "is_error": isError[k]}
	}
	return withMessages(req, mustJSON(map[string]any{"role": "assistant", "content": r.items}),
		mustJSON(map[string]any{"role": "user", "content": res}))
}

// merge puts the carried tool_use blocks before the response's content.
func (r *anthropicResponse) merge(raws []json.RawMessage, calls []toolCall, usage json.RawMessage) {
	if usage != nil {
		r.top["usage"] = usage
	}
	if len(raws) == 0 {
		return
	}
	r.prepend(raws, calls)
	r.top["content"] = mustJSON(r.items)
	r.top["stop_reason"] = mustJSON("tool_use")
	r.top["stop_sequence"] = json.RawMessage("null")
}

func (anthropicMessages) errorBody(status int, msg string) []byte {
	typ := "invalid_request_error"
	switch statusKind(status) {
	case "not_found":
		typ = "not_found_error"
	case "too_large":
		typ = "request_too_large"
	case "forbidden":
		typ = "permission_error"
	case "server":
		typ = "api_error"
	}
	return mustJSON(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
