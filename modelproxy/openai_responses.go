package modelproxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
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

func (openAIResponses) parseRequest(body []byte, maxTools int) (*request, error) {
	var r struct {
		Stream     bool              `json:"stream"`
		Tools      []json.RawMessage `json:"tools"`
		ToolChoice json.RawMessage   `json:"tool_choice"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	if len(r.Tools) > maxTools {
		return nil, errTooManyTools(len(r.Tools), maxTools)
	}
	req := &request{strict: map[string]bool{}, stream: r.Stream}
	for i, raw := range r.Tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, fmt.Errorf("tools[%d]: %w", i, err)
		}
		switch {
		case t.Type == "function":
			req.tools = append(req.tools, listingTool(t.Name, t.Description, t.Parameters))
			// Responses functions are strict unless strict: false.
			if t.Strict == nil || *t.Strict {
				req.strict[t.Name] = true
			}
		case responsesServerTool(t.Type):
		default:
			// computer use, shell, apply_patch, custom: the client executes
			// their calls, which are not function calls with an arguments
			// object; refused rather than passed on undecided.
			return nil, fmt.Errorf("tools[%d]: type %q is not supported by this proxy (function tools and the API's own tools only)", i, t.Type)
		}
	}
	return req, req.frontier(r.ToolChoice, responsesChoice)
}

// responsesChoice reads a Responses tool_choice: "none" allows no tool,
// {"type":"function","name":...} only it, allowed_tools the function
// tools it lists; auto and required every declared tool.
func responsesChoice(raw json.RawMessage) ([]string, bool, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{}, s == "none", nil
	}
	var c struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Tools []struct {
			Type string `json:"type"`
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, err
	}
	switch c.Type {
	case "function":
		return []string{c.Name}, true, nil
	case "allowed_tools":
		names := []string{}
		for _, t := range c.Tools {
			if t.Type == "function" {
				names = append(names, t.Name)
			}
		}
		return names, true, nil
	}
	return nil, false, nil
}

// openAIResponsesResponse is a response object, its members kept as they
// are but output and usage.
type openAIResponsesResponse struct {
	callItems // the output items, the function_call ones the calls
	top       map[string]json.RawMessage
}

func (openAIResponses) parseResponse(body []byte) (response, error) {
	r := &openAIResponsesResponse{}
	if err := parseTop(body, &r.top, &r.head, "output", &r.items); err != nil {
		return nil, err
	}
	for i, raw := range r.items {
		var it struct {
			Type      string `json:"type"`
			CallID    string `json:"call_id"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		}
		if err := json.Unmarshal(raw, &it); err != nil {
			return nil, fmt.Errorf("output[%d]: %w", i, err)
		}
		switch it.Type {
		case "function_call":
			c := toolCall{id: it.CallID, name: it.Name}
			c.args, c.raw = callArgs(it.Arguments)
			r.add(i, c)
		case "computer_call", "local_shell_call", "shell_call", "apply_patch_call", "custom_tool_call":
			return nil, fmt.Errorf("output[%d]: a %s, which this proxy does not decide", i, it.Type)
		}
	}
	return r, nil
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
	var top map[string]json.RawMessage
	if err := json.Unmarshal(req, &top); err != nil {
		return nil, err
	}
	input, err := responsesInput(top["input"])
	if err != nil {
		return nil, err
	}
	for _, raw := range r.items {
		var it struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(raw, &it)
		if it.Type == "function_call" || it.Type == "message" {
			input = append(input, raw)
		}
	}
	for k, c := range r.all {
		input = append(input, mustJSON(map[string]any{"type": "function_call_output", "call_id": c.id, "output": results[k]}))
	}
	top["input"] = mustJSON(input)
	return mustJSON(top), nil
}

// responsesInput is a request's input as a list of items.
func responsesInput(raw json.RawMessage) ([]json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		return []json.RawMessage{mustJSON(map[string]any{"role": "user", "content": raw})}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("input: %w", err)
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
	m     map[string][]json.RawMessage
}

func (w *withheldOutputs) put(respID string, items []json.RawMessage) {
	if respID == "" || len(items) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string][]json.RawMessage{}
	}
	if len(w.order) >= w.max {
		delete(w.m, w.order[0])
		w.order = w.order[1:]
	}
	w.order = append(w.order, respID)
	w.m[respID] = items
}

func (w *withheldOutputs) get(respID string) []json.RawMessage {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[respID]
}

// continued returns body with the outputs of the calls withheld from
// the response it continues (previous_response_id) put before its input,
// but those the client gives itself; body as it is when there are none.
func (w *withheldOutputs) continued(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var prev string
	if p, ok := top["previous_response_id"]; !ok || json.Unmarshal(p, &prev) != nil || prev == "" {
		return body, nil
	}
	items := w.get(prev)
	if len(items) == 0 {
		return body, nil
	}
	input, err := responsesInput(top["input"])
	if err != nil {
		return nil, err
	}
	given := map[string]bool{}
	for _, raw := range input {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		if json.Unmarshal(raw, &it) == nil && it.Type == "function_call_output" {
			given[it.CallID] = true
		}
	}
	var add []json.RawMessage
	for _, raw := range items {
		var it struct {
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(raw, &it)
		if !given[it.CallID] {
			add = append(add, raw)
		}
	}
	top["input"] = mustJSON(slices.Concat(add, input))
	return mustJSON(top), nil
}
