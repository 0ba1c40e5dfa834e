package ingest

import (
	"encoding/json"
)

// Anthropic Messages shapes.
type anthropicMessage struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Model   string          `json:"model"`
	Content json.RawMessage `json:"content"`
	blocks  []anthropicBlock
}

type anthropicBlock struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Name       string          `json:"name"`
	ServerName string          `json:"server_name"` // mcp_tool_use
	Input      json.RawMessage `json:"input"`
}

var anthropicFallback = Meta{Provider: "anthropic", Surface: "raw_json"}

// convertAnthropic converts a Messages response, a bare message or a bare
// content block. tool_use and mcp_tool_use blocks become calls; Anthropic's
// own server tools (server_tool_use) are not the registry's and are skipped.
func convertAnthropic(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	var m anthropicMessage
	switch typ := o.str("type"); {
	case typ == "tool_use" || typ == "mcp_tool_use":
		var b anthropicBlock
		if err := unmarshal(line, &b); err != nil {
			return errShape(err.Error())
		}
		m.blocks = []anthropicBlock{b}
	case o.kindOf("content") != 0 && (typ == "message" || o.kindOf("role") == '"'):
		if err := unmarshal(line, &m); err != nil {
			return errShape(err.Error())
		}
		switch (object{"c": m.Content}).kindOf("c") {
		case '[':
			if err := unmarshal(m.Content, &m.blocks); err != nil {
				return errShape("content: " + err.Error())
			}
		case '"':
			// plain text: no tool use
		default:
			return errShape("content is neither blocks nor text")
		}
	default:
		return errShape("neither a message (content) nor a tool_use block")
	}

	object := Meta{Model: m.Model}
	var calls []callAt
	for _, b := range m.blocks {
		switch b.Type {
		case "tool_use":
			calls = append(calls, callAt{tc: toolCall{id: b.ID, name: b.Name, args: argsFromJSON(b.Input)}, object: object})
		case "mcp_tool_use":
			mo := object
			mo.Surface, mo.Server = "mcp", b.ServerName
			calls = append(calls, callAt{tc: toolCall{id: b.ID, name: b.Name, args: argsFromJSON(b.Input)}, object: mo})
		}
	}
	if len(calls) == 0 {
		return nil
	}
	return emitCalls(c, anthropicFallback, calls, emit)
}
