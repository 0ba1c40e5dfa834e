package ingest

import (
	"encoding/json"
	"fmt"
	"time"
)

// OpenAI Chat Completions shapes.
type openAIResponse struct {
	Object  string         `json:"object"`
	Created json.Number    `json:"created"`
	Model   string         `json:"model"`
	Choices []openAIChoice `json:"choices"`
}

type openAIChoice struct {
	Message *openAIMessage  `json:"message"`
	Delta   json.RawMessage `json:"delta"`
}

type openAIMessage struct {
	Role         string           `json:"role"`
	ToolCalls    []openAIToolCall `json:"tool_calls"`
	FunctionCall *openAIFunction  `json:"function_call"` // deprecated single call
}

type openAIToolCall struct {
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function *openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

var openAIFallback = Meta{Provider: "openai", Surface: "raw_json"}

// convertOpenAI converts a chat completion response or a bare message.
func convertOpenAI(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	var object Meta
	var messages []*openAIMessage
	switch {
	case o.kindOf("choices") == '[':
		var r openAIResponse
		if err := unmarshal(line, &r); err != nil {
			return errShape(err.Error())
		}
		if r.Object == "chat.completion.chunk" {
			return fmt.Errorf("%w: streaming chunk (log the assembled message)", ErrUnsupported)
		}
		if r.Created != "" {
			sec, err := r.Created.Int64()
			if err != nil {
				return errShape("created is not an integer")
			}
			object.Time = time.Unix(sec, 0).UTC()
		}
		object.Model = r.Model
		for i, ch := range r.Choices {
			if ch.Message == nil {
				if len(ch.Delta) > 0 {
					return fmt.Errorf("%w: streaming chunk (log the assembled message)", ErrUnsupported)
				}
				return errShape(fmt.Sprintf("choices[%d] has no message", i))
			}
			messages = append(messages, ch.Message)
		}
	case o.kindOf("tool_calls") != 0, o.kindOf("function_call") != 0, o.kindOf("role") == '"':
		var m openAIMessage
		if err := unmarshal(line, &m); err != nil {
			return errShape(err.Error())
		}
		messages = append(messages, &m)
	default:
		return errShape("neither a chat completion (choices) nor a message (role, tool_calls)")
	}

	var calls []callAt
	for _, m := range messages {
		for _, tc := range m.ToolCalls {
			if tc.Type != "" && tc.Type != "function" {
				c.warn(fmt.Errorf("%w: tool call %s of type %q skipped", ErrUnsupported, tc.ID, tc.Type))
				continue
			}
			if tc.Function == nil {
				return errShape(fmt.Sprintf("tool call %s has no function", tc.ID))
			}
			args, err := openAIArgs(tc.Function.Arguments)
			if err != nil {
				return err
			}
			calls = append(calls, callAt{tc: toolCall{id: tc.ID, name: tc.Function.Name, args: args}, object: object})
		}
		if fc := m.FunctionCall; fc != nil {
			args, err := openAIArgs(fc.Arguments)
			if err != nil {
				return err
			}
			calls = append(calls, callAt{tc: toolCall{name: fc.Name, args: args}, object: object})
		}
	}
	if len(calls) == 0 {
		return nil
	}
	return emitCalls(c, openAIFallback, calls, emit)
}

// openAIArgs reads function.arguments: a JSON string holding the model's
// text (the API's shape), or an object some loggers store already parsed.
func openAIArgs(raw json.RawMessage) (argValue, error) {
	o := object{"a": raw}
	switch o.kindOf("a") {
	case 0, 'n':
		return argValue{}, nil
	case '"':
		var text string
		if err := unmarshal(raw, &text); err != nil {
			return argValue{}, errShape("arguments: " + err.Error())
		}
		return argsFromText(text), nil
	default:
		return argsFromJSON(raw), nil
	}
}
