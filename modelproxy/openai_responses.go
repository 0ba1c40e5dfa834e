package modelproxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/toolaudit/toolaudit/jsontape"
)

// openAIResponses is the OpenAI Responses API (POST .../responses).
type openAIResponses struct{}

func (openAIResponses) provider() string { return "openai" }

func (openAIResponses) endpoint() string { return "POST .../responses (Responses)" }

func (openAIResponses) decided(method, path string) bool {
	return method == http.MethodPost && strings.HasSuffix(path, "/responses")
}

// responsesServerTool reports whether a Responses tool type runs at the
// API (its calls come back as items already executed, never for the
// client to execute): they are not decided.
func responsesServerTool(typ string) bool {
	switch {
	case strings.HasPrefix(typ, "web_search"), typ == "file_search", typ == "code_interpreter", typ == "image_generation", typ == "mcp":
		return true
	}
	return false
}

func (openAIResponses) parseRequest(v jsontape.Value, maxTools int) (*request, error) {
	req, err := newRequest(v, maxTools)
	if err != nil {
		return nil, err
	}
	if req.previous, err = str(v.Get("previous_response_id"), "previous_response_id"); err != nil {
		return nil, err
	}
	err = arrayOf(v.Get("tools"), "tools", func(i int, t jsontape.Value) error {
		f := fieldsOf(t, "tool")
		typ, name, desc, _ := f.str("type"), f.str("name"), f.str("description"), f.boolean("strict")
		if err := f.wrap("tools[%d]", i); err != nil {
			return err
		}
		strict := t.Get("strict")
		switch {
		case typ == "function":
			req.tools = append(req.tools, listingTool(name, desc, raw(t.Get("parameters"))))
			// Responses functions are strict unless strict: false.
			if strict.IsNull() || strict.Kind() == jsontape.True {
				req.strict[name] = true
			}
		case responsesServerTool(typ):
		default:
			// computer use, shell, apply_patch, custom: the client executes
			// their calls, which are not function calls with an arguments
			// object; refused rather than passed on undecided.
			return fmt.Errorf("tools[%d]: type %q is not supported by this proxy (function tools and the API's own tools only)", i, typ)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return req, req.frontier(v.Get("tool_choice"), responsesChoice)
}

// responsesChoice reads a Responses tool_choice: "none" allows no tool,
// {"type":"function","name":...} only it, allowed_tools the function
// tools it lists; auto and required every declared tool.
func responsesChoice(c jsontape.Value) ([]string, bool, error) {
	if c.Kind() == jsontape.String {
		return []string{}, c.StrIs("none"), nil
	}
	f := fieldsOf(c, "tool_choice")
	typ, name := f.str("type"), f.str("name")
	if f.err != nil {
		return nil, false, f.err
	}
	switch typ {
	case "function":
		return []string{name}, true, nil
	case "allowed_tools":
		names := []string{}
		err := arrayOf(c.Get("tools"), "tools", func(i int, t jsontape.Value) error {
			if !t.Get("type").StrIs("function") {
				return nil
			}
			f := fieldsOf(t, "tool")
			names = append(names, f.str("name"))
			return f.wrap("tools[%d]", i)
		})
		return names, true, err
	}
	return nil, false, nil
}

// openAIResponsesResponse is a response object, its members kept as they
// are but output and usage.
type openAIResponsesResponse struct {
	callItems // the output items, the function_call ones the calls
	top       map[string]json.RawMessage
}

func (openAIResponses) parseResponse(v jsontape.Value) (response, error) {
	r := &openAIResponsesResponse{}
	var err error
	if r.top, err = readTop(v, &r.head); err != nil {
		return nil, err
	}
	output := v.Get("output")
	if k := output.Kind(); k != jsontape.Array && k != jsontape.Null {
		return nil, typeError("output", output, "an array")
	}
	r.items, _ = items(output, "output")
	err = arrayOf(output, "output", func(i int, it jsontape.Value) error {
		f := fieldsOf(it, "item")
		switch typ := f.str("type"); typ {
		case "function_call":
			c, err := responsesCall(f)
			if err != nil {
				return fmt.Errorf("output[%d]: %w", i, err)
			}
			r.add(i, c)
		default:
			if err := undecidedItem(typ, it); err != nil {
				return fmt.Errorf("output[%d]: %w", i, err)
			}
		}
		return f.wrap("output[%d]", i)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// passedItems are the Responses output items that pass undecided: the
// model's text and reasoning, the API's own tools' calls (run at the
// API; an MCP approval request is answered by the client and run at the
// API too), and outputs.
var passedItems = map[string]bool{
	"message": true, "reasoning": true, "compaction": true, "additional_tools": true,
	"file_search_call": true, "web_search_call": true, "code_interpreter_call": true, "image_generation_call": true,
	"mcp_call": true, "mcp_list_tools": true, "mcp_approval_request": true, "mcp_approval_response": true,
	"program": true, "program_output": true, "tool_search_output": true,
	"function_call_output": true, "computer_call_output": true, "local_shell_call_output": true,
	"shell_call_output": true, "apply_patch_call_output": true, "custom_tool_call_output": true,
}

// undecidedItem is nil for an output item that passes undecided, else
// the error refusing it: a call the client executes in another shape
// than a function's (computer use, shell, apply_patch, custom, a tool
// search the client runs) has no arguments object to decide, and a type
// this proxy does not know may be one, so it fails closed.
func undecidedItem(typ string, item jsontape.Value) error {
	switch {
	case typ == "tool_search_call" && !item.Get("execution").StrIs("client"):
		return nil
	case passedItems[typ]:
		return nil
	}
	return fmt.Errorf("a %q item, which this proxy does not decide", typ)
}

// responsesCall reads a function_call item (f, its type read).
func responsesCall(f fields) (toolCall, error) {
	c := toolCall{id: f.str("call_id"), name: f.str("name")}
	c.args, c.raw = callArgs(f.str("arguments"))
	return c, f.err
}

// withhold drops the rejected function_call items and appends the note
// as an assistant message item: the SDK's output_text and the agent
// loops then read an answer where no call is left.
func (r *openAIResponsesResponse) withhold(rejected []bool, note string) ([]byte, error) {
	out, _ := r.kept(rejected)
	if note != "" {
		out = append(out, mustJSON(map[string]any{
			"type": "message", "id": "msg_toolaudit_" + r.head.ID, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": note, "annotations": []any{}}},
		}))
	}
	r.top["output"] = mustJSON(out)
	if t, ok := r.top["output_text"]; ok && string(t) != "null" {
		// Some servers fill the SDK's convenience member too.
		var s string
		_ = json.Unmarshal(t, &s)
		r.top["output_text"] = mustJSON(strings.TrimPrefix(s+"\n\n"+note, "\n\n"))
	}
	return mustJSON(r.top), nil
}

func (r *openAIResponsesResponse) encode() ([]byte, error) { return mustJSON(r.top), nil }

func (r *openAIResponsesResponse) usage() json.RawMessage { return r.top["usage"] }

func (r *openAIResponsesResponse) repairable() bool { return true }

// repair sends the input so far (a string input as a user message), the
// response's message and function_call items, and one
// function_call_output per call (the Responses API has no error flag: a
// rejection says so in its text).
func (r *openAIResponsesResponse) repair(req []byte, results []string, _ []bool) ([]byte, error) {
	return parseStrict(req, func(v jsontape.Value) ([]byte, error) {
		input, err := responsesInput(v.Get("input"))
		if err != nil {
			return nil, err
		}
		// The turn's output items as they came, as the API's manual
		// conversation state has them: a reasoning item and what follows
		// it (a server tool's call, the function calls) go together.
		input = append(input, r.items...)
		for k, c := range r.all {
			input = append(input, mustJSON(map[string]any{"type": "function_call_output", "call_id": c.id, "output": results[k]}))
		}
		top, _ := members(v, "")
		top["input"] = mustJSON(input)
		return mustJSON(top), nil
	})
}

// responsesInput is a request's input as a list of items.
func responsesInput(in jsontape.Value) ([]json.RawMessage, error) {
	if in.Kind() == jsontape.String {
		return []json.RawMessage{mustJSON(map[string]any{"role": "user", "content": json.RawMessage(in.Raw())})}, nil
	}
	items, err := items(in, "input")
	if err != nil {
		return nil, err
	}
	return items, nil
}

func (r *openAIResponsesResponse) merge(raws []json.RawMessage, calls []toolCall, usage json.RawMessage) {
	if usage != nil {
		r.top["usage"] = usage
	}
	if len(raws) == 0 {
		return
	}
	r.prepend(raws, calls)
	r.top["output"] = mustJSON(r.items)
}

func (openAIResponses) errorBody(status int, msg string) []byte {
	return openAIChat{}.errorBody(status, msg)
}

// withheldOutputs keeps, per response id, the function_call_output items
// of the calls a block answer withheld: the API stores a response (store
// defaults to true) with every call it returned, and refuses a request
// continuing it (previous_response_id) without an output for each, so
// the proxy supplies the withheld ones, their fix text as output.
type withheldOutputs struct {
	mu    sync.Mutex
	max   int
	order []string
	m     map[string][]withheldOutput
}

// withheldOutput is one function_call_output item and its call_id.
type withheldOutput struct {
	callID string
	item   json.RawMessage
}

// withheldScope is whose a withheld output is: the route and the
// client's credentials (their hash), so that only the client a block
// answer went to gets its outputs supplied, and a response id learnt
// elsewhere gives nothing.
func withheldScope(rt *Route, h http.Header) string {
	sum := sha256.Sum256([]byte(h.Get("Authorization") + "\n" + h.Get("X-Api-Key") + "\n" + h.Get("Api-Key")))
	return rt.Prefix + "\x00" + hex.EncodeToString(sum[:16]) + "\x00"
}

// put keeps the withheld outputs of response respID for scope.
func (w *withheldOutputs) put(scope, respID string, items []json.RawMessage) {
	if respID == "" || len(items) == 0 {
		return
	}
	respID = scope + respID
	outs := make([]withheldOutput, len(items))
	for i, it := range items {
		id, _ := parseStrict(it, func(v jsontape.Value) (string, error) { return strOr(v.Get("call_id")), nil })
		outs[i] = withheldOutput{id, it}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string][]withheldOutput{}
	}
	if len(w.order) >= w.max {
		delete(w.m, w.order[0])
		w.order = w.order[1:]
	}
	w.order = append(w.order, respID)
	w.m[respID] = outs
}

func (w *withheldOutputs) get(scope, respID string) []withheldOutput {
	respID = scope + respID
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[respID]
}

// continued returns body, a request continuing response prev for
// scope, with the outputs of the calls withheld from prev put before its
// input, but those the client gives itself; body as it is when there
// are none.
func (w *withheldOutputs) continued(scope, prev string, body []byte) ([]byte, error) {
	add := w.get(scope, prev)
	if len(add) == 0 {
		return body, nil
	}
	return parseStrict(body, func(v jsontape.Value) ([]byte, error) {
		input, err := responsesInput(v.Get("input"))
		if err != nil {
			return nil, err
		}
		given := map[string]bool{}
		_ = arrayOf(v.Get("input"), "input", func(_ int, it jsontape.Value) error {
			if it.Get("type").StrIs("function_call_output") {
				given[strOr(it.Get("call_id"))] = true
			}
			return nil
		})
		var adds []json.RawMessage
		for _, o := range add {
			if !given[o.callID] {
				adds = append(adds, o.item)
			}
		}
		top, _ := members(v, "")
		top["input"] = mustJSON(slices.Concat(adds, input))
		return mustJSON(top), nil
	})
}
