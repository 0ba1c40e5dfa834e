package modelproxy

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/toolaudit/toolaudit/jsontape"
)

// TestReadKinds: a member of the wrong kind is an error naming it, as
// encoding/json's was; absent and null read as the zero value; names
// match exactly.
func TestReadKinds(t *testing.T) {
	chat := func(v jsontape.Value) (any, error) { return openAIChat{}.parseResponse(v) }
	messages := func(v jsontape.Value) (any, error) { return anthropicMessages{}.parseResponse(v) }
	responses := func(v jsontape.Value) (any, error) { return openAIResponses{}.parseResponse(v) }
	chatReq := func(v jsontape.Value) (any, error) { return openAIChat{}.parseRequest(v, 8) }
	msgReq := func(v jsontape.Value) (any, error) { return anthropicMessages{}.parseRequest(v, 8) }
	for _, tc := range []struct {
		name string
		read func(jsontape.Value) (any, error)
		body string
		err  string // "" none
	}{
		{"chat id a number", chat, `{"id":5,"choices":[]}`, "id: number, not a string"},
		{"chat choices null", chat, `{"id":"x","choices":null}`, ""},
		{"chat choices absent", chat, `{"id":"x"}`, "choices: absent, not an array"},
		{"chat choice not an object", chat, `{"choices":[3]}`, "choices[0] is not an object"},
		{"chat arguments an object", chat, `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":{}}}]}}]}`, "choices[0].message.tool_calls[0]: function: arguments: object, not a string"},
		{"chat Function only", chat, `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","Function":{"name":"f","arguments":"{}"}}]}}]}`, `type "function" without its call`},
		{"chat function null", chat, `{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":null}]}}]}`, `type "function" without its call`},
		{"messages name a bool", messages, `{"content":[{"type":"tool_use","id":"t","name":true,"input":{}}]}`, "content[0]: name: true, not a string"},
		{"messages block a string", messages, `{"content":["x"]}`, "content[0]: block: string, not an object"},
		{"responses arguments null", responses, `{"output":[{"type":"function_call","call_id":"c","name":"f","arguments":null}]}`, ""},
		{"chat request stream a string", chatReq, `{"stream":"yes"}`, "stream: string, not a boolean"},
		{"chat request tools an object", chatReq, `{"tools":{}}`, "tools: object, not an array"},
		{"chat request too many tools", chatReq, `{"tools":[1,2,3,4,5,6,7,8,9]}`, "declares 9 tools"},
		{"messages request strict a number", msgReq, `{"tools":[{"name":"f","input_schema":{},"strict":1}]}`, "tools[0]: strict: number, not a boolean"},
		{"messages request choice name a number", msgReq, `{"tools":[],"tool_choice":{"type":"tool","name":1}}`, "tool_choice: name: number, not a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseStrict([]byte(tc.body), tc.read)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// TestChoiceIndex: a chunk's choice index is bounded, so that a stream's
// state is.
func TestChoiceIndex(t *testing.T) {
	for body, ok := range map[string]bool{`{"index":0}`: true, `{}`: true, `{"index":127}`: true, `{"index":128}`: false, `{"index":-1}`: false, `{"index":1.5}`: false} {
		var tape jsontape.Tape
		if err := tape.Parse([]byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := choiceIndex(tape.Root()); (err == nil) != ok {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// TestCheckProto: a __proto__ member anywhere in an upstream body or
// event is refused, but inside a tool's input object.
func TestCheckProto(t *testing.T) {
	for body, ok := range map[string]bool{
		`{"a":1}`:          true,
		`{"__proto__":{}}`: false,
		`{"choices":[{"delta":{"__proto__":{"tool_calls":[]}}}]}`:         false,
		`{"a":[[{"b":{"\u005f_proto__":1}}]]}`:                            false,
		`{"content":[{"type":"tool_use","input":{"__proto__":{"x":1}}}]}`: true,
		`{"s":"__proto__"}`: true,
	} {
		var tape jsontape.Tape
		if err := tape.Parse([]byte(body)); err != nil {
			t.Fatal(err)
		}
		if err := checkProto(tape.Root()); (err == nil) != ok {
			t.Errorf("%s: %v", body, err)
		}
	}
}

// readAll reads what the body holds whatever length it declared, and
// keeps the bound of the reader it is given.
func TestReadAll(t *testing.T) {
	body := strings.Repeat("x", 1000)
	for _, tc := range []struct {
		name   string
		length int64
		r      io.Reader
		want   string
		err    error
	}{
		{"declared", 1000, strings.NewReader(body), body, nil},
		{"none declared", -1, strings.NewReader(body), body, nil},
		{"declared shorter", 10, strings.NewReader(body), body, nil},
		{"declared longer", 5000, strings.NewReader(body), body, nil},
		{"declared past the presize", maxPresize + 1, strings.NewReader(body), body, nil},
		{"empty", 0, strings.NewReader(""), "", nil},
		{"bounded", 1000, io.LimitReader(strings.NewReader(body), 100), body[:100], nil},
		{"one byte a read", 1000, iotest.OneByteReader(strings.NewReader(body)), body, nil},
		{"failing", 1000, io.MultiReader(strings.NewReader("ab"), iotest.ErrReader(io.ErrUnexpectedEOF)), "ab", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAll(tc.r, tc.length)
			if string(got) != tc.want || !errors.Is(err, tc.err) {
				t.Errorf("%d bytes, %v; want %d, %v", len(got), err, len(tc.want), tc.err)
			}
		})
	}
}
