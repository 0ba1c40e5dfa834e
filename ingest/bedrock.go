package ingest

import "encoding/json"

// Bedrock Converse shapes.
type bedrockResponse struct {
	Output *struct {
		Message *bedrockMessage `json:"message"`
	} `json:"output"`
}

type bedrockMessage struct {
	Role    string         `json:"role"`
	Content []bedrockBlock `json:"content"`
}

type bedrockBlock struct {
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
}

var bedrockFallback = Meta{Provider: "bedrock", Surface: "raw_json"}

// convertBedrock converts a Converse response, a bare message or a bare
// {"toolUse":…} block. Converse responses carry no model id or time: give
// them in the envelope or the defaults.
func convertBedrock(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	var blocks []bedrockBlock
	switch {
	case o.kindOf("output") == '{':
		var r bedrockResponse
		if err := unmarshal(line, &r); err != nil {
			return errShape(err.Error())
		}
		if r.Output.Message == nil {
			return errShape("output has no message")
		}
		blocks = r.Output.Message.Content
	case o.kindOf("toolUse") == '{':
		var b bedrockBlock
		if err := unmarshal(line, &b); err != nil {
			return errShape(err.Error())
		}
		blocks = []bedrockBlock{b}
	case o.kindOf("content") == '[':
		var m bedrockMessage
		if err := unmarshal(line, &m); err != nil {
			return errShape(err.Error())
		}
		blocks = m.Content
	default:
		return errShape("neither a Converse response (output.message) nor a message nor a toolUse block")
	}
	var calls []callAt
	for _, b := range blocks {
		if tu := b.ToolUse; tu != nil {
			calls = append(calls, callAt{tc: toolCall{id: tu.ToolUseID, name: tu.Name, args: argsFromJSON(tu.Input)}})
		}
	}
	if len(calls) == 0 {
		return nil
	}
	return emitCalls(c, bedrockFallback, calls, emit)
}
