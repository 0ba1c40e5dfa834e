package modelproxy

import (
	"encoding/json"
	"fmt"
)

// anthropicStream is a Messages stream (message_start, content_block_*
// by index, message_delta, message_stop). Text and every block but
// tool_use pass through as they come; a tool_use block's events are held
// from its content_block_start to its content_block_stop, then the call
// (its input the concatenated input_json_delta) is decided and its
// events released or dropped. The blocks after a dropped one are
// renumbered so that the client's indexes have no gap; before
// message_delta the note is sent as a text block and, when no tool_use
// is left, stop_reason "tool_use" becomes "end_turn".
type anthropicStream struct {
	out       *sink
	decide    streamDecider
	id, model string
	dropped   int // blocks withheld so far
	next      int // the client's index of the next block
	sent      int // tool_use blocks released
	fixes     []string
	held      *anthropicHeld
}

type anthropicHeld struct {
	index    int
	id, name string
	input    []byte
	events   []*sseEvent
	size     int // bytes of the events held
}

func (anthropicMessages) newStream(out *sink, d streamDecider) streamer {
	return &anthropicStream{out: out, decide: d}
}

// errorEvent is an error event, which the SDK raises as an APIError.
func (s *anthropicStream) errorEvent(msg string) (string, []byte) {
	return "error", anthropicMessages{}.errorBody(502, msg)
}

func (s *anthropicStream) handle(ev *sseEvent) error {
	switch ev.event {
	case "message_start":
		var m struct {
			Message head `json:"message"`
		}
		_ = json.Unmarshal(ev.data, &m)
		s.id, s.model = m.Message.ID, m.Message.Model
	case "content_block_delta", "content_block_stop":
		if s.held == nil && s.dropped == 0 {
			break // a block passed on as it is: nothing to read
		}
		return s.block(ev)
	case "content_block_start":
		return s.block(ev)
	case "message_delta":
		if s.held != nil {
			if err := s.finish(); err != nil {
				return err
			}
		}
		if len(s.fixes) > 0 {
			s.note()
			var top map[string]json.RawMessage
			var d map[string]json.RawMessage
			if err := parseTop(ev.data, &top, new(head), "delta", &d); err != nil {
				return fmt.Errorf("message_delta: %w", err)
			}
			if s.sent == 0 && string(d["stop_reason"]) == `"tool_use"` {
				d["stop_reason"] = mustJSON("end_turn")
				top["delta"] = mustJSON(d)
				s.out.event(ev.event, mustJSON(top))
				return nil
			}
		}
	}
	s.out.raw(ev.raw)
	return nil
}

// block handles a content block event.
func (s *anthropicStream) block(ev *sseEvent) error {
	var b struct {
		Index int `json:"index"`
		Block *struct {
			Type string `json:"type"`
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"content_block"`
		Delta *struct {
			Type        string `json:"type"`
			PartialJSON string `json:"partial_json"`
		} `json:"delta"`
	}
	if err := json.Unmarshal(ev.data, &b); err != nil {
		return fmt.Errorf("%s is not understood, so its tool call cannot be decided: %w", ev.event, err)
	}
	if h := s.held; h != nil && b.Index == h.index {
		h.events = append(h.events, ev)
		h.size += len(ev.raw)
		if b.Delta != nil {
			h.input = append(h.input, b.Delta.PartialJSON...)
		}
		if h.size > s.out.maxHeld {
			return errHeldTooLong
		}
		if ev.event == "content_block_stop" {
			return s.complete()
		}
		return nil
	}
	if ev.event == "content_block_start" && b.Block != nil && b.Block.Type == "tool_use" {
		if s.held != nil {
			if err := s.complete(); err != nil {
				return err
			}
		}
		s.held = &anthropicHeld{index: b.Index, id: b.Block.ID, name: b.Block.Name, events: []*sseEvent{ev}}
		return nil
	}
	s.send(ev, b.Index)
	return nil
}

// send passes ev on, renumbered when blocks were dropped before it.
func (s *anthropicStream) send(ev *sseEvent, index int) {
	n := index - s.dropped
	if ev.event == "content_block_start" {
		s.next = n + 1
	}
	if s.dropped == 0 {
		s.out.raw(ev.raw)
		return
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(ev.data, &top) != nil {
		s.out.raw(ev.raw)
		return
	}
	top["index"] = mustJSON(n)
	s.out.event(ev.event, mustJSON(top))
}

// complete decides the held tool_use block and sends it or not.
func (s *anthropicStream) complete() error {
	h := s.held
	s.held = nil
	c := toolCall{id: h.id, name: h.name, args: h.input}
	if len(h.input) == 0 {
		c.args = []byte("{}") // a tool without input streams no delta
	} else {
		c.args, c.raw = callArgs(string(h.input))
	}
	withhold, fix := s.decide(s.id, s.model, c)
	if withhold {
		s.dropped++
		s.fixes = append(s.fixes, fix)
		return nil
	}
	for _, ev := range h.events {
		s.send(ev, h.index)
	}
	s.sent++
	return nil
}

// note sends the note of the withheld calls as a text block.
func (s *anthropicStream) note() {
	i := s.next
	s.next++
	s.out.event("content_block_start", mustJSON(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}}))
	s.out.event("content_block_delta", mustJSON(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": noteText(s.fixes)}}))
	s.out.event("content_block_stop", mustJSON(map[string]any{"type": "content_block_stop", "index": i}))
}

func (s *anthropicStream) finish() error {
	if s.held != nil {
		return s.complete()
	}
	return nil
}
