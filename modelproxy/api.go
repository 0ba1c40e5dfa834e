package modelproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// api is what the proxy knows of one model API: which requests it
// decides, the tools a request declares, the tool calls a response
// returns, the response without the calls withheld, and its error shape.
type api interface {
	// provider is the call events' provider ("openai", "anthropic").
	provider() string
	// decided reports whether a request of method to path (the route's
	// rest) is one whose responses the proxy decides.
	decided(method, path string) bool
	// endpoint names the decided endpoint, for errors.
	endpoint() string
	// parseRequest reads the request's declared tools (at most maxTools);
	// its error is answered 400.
	parseRequest(body jsontape.Value, maxTools int) (*request, error)
	// parseResponse reads a successful response; its error is answered
	// 502 (the calls cannot be decided, so none is returned).
	parseResponse(body jsontape.Value) (response, error)
	// errorBody is an error in the API's own shape.
	errorBody(status int, msg string) []byte
	// newStream reads the API's event stream for out, deciding its
	// calls with d.
	newStream(out *sink, d streamDecider) streamer
}

// request is what the proxy reads of a request.
type request struct {
	stream bool
	// tools are the declared tools the client executes, each as a
	// listing's tool object (name, description, inputSchema).
	tools [][]byte
	// strict names the tools of constrained decoding (OpenAI's and
	// Anthropic's strict: true): their calls' surface is schema_enforced.
	strict map[string]bool
	// visible is the frontier tool_choice sets, when it sets one: the
	// tools it allows (OpenAI allowed_tools), the one it forces, none
	// ("none"); a call off it is H4 (wire contract v1.2).
	visible    []string
	hasVisible bool
	// previous is the response a Responses request continues
	// (previous_response_id), "" none.
	previous string
	// eventIDs counts the call event ids given so far to the request's
	// calls (every attempt's): an id the upstream repeats is made unique,
	// so that no decision replaces another in the store.
	eventIDs map[string]int  // times each id was asked for
	idsTaken map[string]bool // the ids given
}

// frontier sets the request's frontier from tool_choice, read with
// names: the names it allows and whether it limits them (false: any
// declared tool).
func (r *request) frontier(choice jsontape.Value, names func(jsontape.Value) ([]string, bool, error)) error {
	if choice.IsNull() {
		return nil
	}
	v, ok, err := names(choice)
	if err != nil {
		return fmt.Errorf("tool_choice: %w", err)
	}
	r.visible, r.hasVisible = v, ok
	return nil
}

// toolCall is one tool call of a response, for the client to execute.
type toolCall struct {
	id, name string
	args     []byte  // the arguments object's JSON; nil: not JSON, see raw
	raw      *string // the arguments as the model wrote them, when not JSON
}

// response is a parsed response.
type response interface {
	id() string
	model() string
	calls() []toolCall
	// withhold returns the response without the calls rejected[i] marks
	// (indexes of calls()), with note ("" none).
	withhold(rejected []bool, note string) ([]byte, error)
	// encode returns the response as merge left it.
	encode() ([]byte, error)

	// rawCalls are the calls as the response holds them (a tool call
	// object, a tool_use block), in calls() order.
	rawCalls() []json.RawMessage
	// usage is the response's usage object (nil: none).
	usage() json.RawMessage
	// repairable reports whether repair can answer the response: one
	// model turn (OpenAI: one choice).
	repairable() bool
	// repair returns req, the request that got this response, followed
	// by the response's turn and, for each of its calls, results[i] as
	// that call's tool result, an error where isError[i].
	repair(req []byte, results []string, isError []bool) ([]byte, error)
	// merge puts calls (rawCalls of earlier responses, and their
	// toolCalls) before the response's own, makes the turn one that
	// calls tools when there are any, and sets its usage.
	merge(raws []json.RawMessage, calls []toolCall, usage json.RawMessage)
}

// listingTool is a declared tool as a listing's tool object.
func listingTool(name, description string, inputSchema json.RawMessage) []byte {
	b := append([]byte(`{"name":`), schema.AppendString(nil, name)...)
	if description != "" {
		b = append(b, `,"description":`...)
		b = schema.AppendString(b, description)
	}
	b = append(b, `,"inputSchema":`...)
	if len(inputSchema) == 0 || string(inputSchema) == "null" {
		// No parameters: OpenAI documents an omitted parameters as an
		// empty parameter list.
		inputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return append(append(b, inputSchema...), '}')
}

// openSchema is the inputSchema of a tool the API defines (Anthropic's
// bash, text_editor, computer, memory): the client executes it but the
// request carries no schema, so its name is checked and its arguments
// are not.
var openSchema = json.RawMessage(`{"type":"object"}`)

// callArgs reads a call's arguments as the model wrote them: JSON
// (decided as it is: an object, or MALFORMED), or else the text
// (arguments_raw, MALFORMED).
func callArgs(text string) ([]byte, *string) {
	if b := bytes.TrimSpace([]byte(text)); json.Valid(b) {
		return b, nil
	}
	return nil, &text
}

// errTooManyTools is answered 400.
func errTooManyTools(n, most int) error {
	return fmt.Errorf("the request declares %d tools; this proxy takes at most %d", n, most)
}

// statusText names an HTTP status for an error's type.
func statusKind(status int) string {
	switch {
	case status == http.StatusNotFound:
		return "not_found"
	case status == http.StatusRequestEntityTooLarge:
		return "too_large"
	case status == http.StatusForbidden:
		return "forbidden"
	case status >= 500:
		return "server"
	}
	return "invalid_request"
}

// head is what every response carries for its call events.
type head struct {
	ID    string `json:"id"`
	Model string `json:"model"`
}

// parsed is what every parsed response holds: its head and its calls.
type parsed struct {
	head head
	all  []toolCall
}

func (p *parsed) id() string        { return p.head.ID }
func (p *parsed) model() string     { return p.head.Model }
func (p *parsed) calls() []toolCall { return p.all }

// readTop reads a response's top-level members and its head.
func readTop(v jsontape.Value, h *head) (map[string]json.RawMessage, error) {
	f := fieldsOf(v, "response")
	h.ID, h.Model = f.str("id"), f.str("model")
	top, _ := members(v, "")
	return top, f.err
}

// newRequest reads what every API's request says alike: stream, and
// the tools array (at most maxTools).
func newRequest(v jsontape.Value, maxTools int) (*request, error) {
	stream, err := boolean(v.Get("stream"), "stream")
	if err != nil {
		return nil, err
	}
	tools := v.Get("tools")
	if k := tools.Kind(); k != jsontape.Array && !tools.IsNull() {
		return nil, typeError("tools", tools, "an array")
	}
	if tools.Len() > maxTools {
		return nil, errTooManyTools(tools.Len(), maxTools)
	}
	return &request{stream: stream, strict: map[string]bool{}}, nil
}

// withMessages returns request req with add appended to its messages.
func withMessages(req []byte, add ...json.RawMessage) ([]byte, error) {
	return parseStrict(req, func(v jsontape.Value) ([]byte, error) {
		top, _ := members(v, "")
		msgs, err := items(v.Get("messages"), "messages")
		if err != nil {
			return nil, err
		}
		top["messages"] = mustJSON(append(msgs, add...))
		return mustJSON(top), nil
	})
}

// callItems is a list of items (Anthropic content blocks, Responses
// output items) of which some are the calls: uses[k] is the index of
// calls()[k].
type callItems struct {
	parsed
	items []json.RawMessage
	uses  []int
}

func (c *callItems) add(i int, call toolCall) {
	c.uses = append(c.uses, i)
	c.all = append(c.all, call)
}

// kept returns the items without the calls rejected marks, and how many
// calls are left.
func (c *callItems) kept(rejected []bool) ([]json.RawMessage, int) {
	drop := make(map[int]bool, len(c.uses))
	for k, i := range c.uses {
		if rejected[k] {
			drop[i] = true
		}
	}
	out := make([]json.RawMessage, 0, len(c.items)+1)
	for i, raw := range c.items {
		if !drop[i] {
			out = append(out, raw)
		}
	}
	return out, len(c.uses) - len(drop)
}

func (c *callItems) rawCalls() []json.RawMessage {
	raws := make([]json.RawMessage, len(c.uses))
	for k, i := range c.uses {
		raws[k] = c.items[i]
	}
	return raws
}

// prepend puts raws (the calls' items) and their calls first.
func (c *callItems) prepend(raws []json.RawMessage, calls []toolCall) {
	uses := make([]int, 0, len(raws)+len(c.uses))
	for i := range raws {
		uses = append(uses, i)
	}
	for _, i := range c.uses {
		uses = append(uses, i+len(raws))
	}
	c.items, c.uses, c.all = slices.Concat(raws, c.items), uses, slices.Concat(calls, c.all)
}
