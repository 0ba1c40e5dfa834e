package modelproxy

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// responsesStream is a Responses API stream (typed events, each with its
// sequence_number; items by output_index). Text and every other item
// pass through as they come; a function_call item's events (added,
// arguments deltas, done) are held until its output_item.done, then the
// call is decided. A call released goes out as it came; one withheld is
// dropped, and the items after it are renumbered (output_index) so the
// SDK's accumulator finds each at its place. Before response.completed
// the note of the withheld calls is sent as an assistant message item of
// its own (the events of one), and response.completed's response holds
// the items as sent; the events after an inserted one are renumbered
// (sequence_number).
type responsesStream struct {
	out    *sink
	decide streamDecider
	// withheld receives, at the end, the outputs of the calls withheld
	// (for a request continuing the response: previous_response_id).
	withheld func(respID string, items []json.RawMessage)

	id, model string
	held      map[int][][]byte // output_index -> the held events' data
	heldBytes int
	shift     int // items withheld so far
	sent      int // items sent so far
	seqAdd    int // events inserted so far
	maxSeq    int // the highest upstream sequence_number seen
	fixes     []string
	dropped   map[string]bool // the withheld calls' call_id
	outputs   []json.RawMessage
	noteItem  json.RawMessage // the note's message item, once sent
}

func (openAIResponses) newStream(out *sink, d streamDecider) streamer {
	return &responsesStream{out: out, decide: d, held: map[int][][]byte{}, dropped: map[string]bool{}}
}

// errorEvent is the stream's error event, which the SDK raises as an
// APIError.
func (s *responsesStream) errorEvent(msg string) (string, []byte) {
	return "error", mustJSON(map[string]any{"type": "error", "code": "toolaudit", "message": msg, "param": nil, "sequence_number": 0})
}

type responsesEvent struct {
	Type        string `json:"type"`
	Seq         int    `json:"sequence_number"`
	OutputIndex *int   `json:"output_index"`
	Item        *struct {
		Type      string `json:"type"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"item"`
	Response *struct {
		ID    string `json:"id"`
		Model string `json:"model"`
	} `json:"response"`
}

func (s *responsesStream) handle(ev *sseEvent) error {
	if len(ev.data) == 0 {
		s.out.raw(ev.raw)
		return nil
	}
	var e responsesEvent
	if err := json.Unmarshal(ev.data, &e); err != nil {
		return fmt.Errorf("an upstream event is not understood, so its tool calls cannot be decided: %w", err)
	}
	if e.Response != nil && e.Response.ID != "" {
		s.id, s.model = e.Response.ID, e.Response.Model
	}
	if e.Type == "error" {
		s.out.raw(ev.raw) // the upstream's: the SDK raises it
		return nil
	}
	final := e.Type == "response.completed" || e.Type == "response.incomplete" || e.Type == "response.failed"
	if e.Seq > s.maxSeq && !final {
		s.maxSeq = e.Seq
	}
	switch {
	case final:
		if len(s.held) > 0 {
			return fmt.Errorf("the response ended inside a tool call, which cannot be decided")
		}
		s.note()
		data, err := s.completed(ev.data)
		if err != nil {
			return err
		}
		s.send(e.Type, data)
		if s.withheld != nil && len(s.outputs) > 0 {
			s.withheld(s.id, s.outputs)
		}
		return nil
	case e.OutputIndex == nil:
		s.pass(ev, e.Type)
		return nil
	}
	idx := *e.OutputIndex
	if e.Type == "response.output_item.added" && e.Item != nil && e.Item.Type == "function_call" {
		s.held[idx] = nil
	}
	if _, ok := s.held[idx]; !ok {
		if e.Type == "response.output_item.done" {
			s.sent++
		}
		s.pass(ev, e.Type)
		return nil
	}
	s.held[idx] = append(s.held[idx], ev.data)
	if s.heldBytes += len(ev.data); s.heldBytes > s.out.maxHeld {
		return errHeldTooLong
	}
	if e.Type != "response.output_item.done" {
		return nil
	}
	evs := s.held[idx]
	delete(s.held, idx)
	s.heldBytes = 0
	c := toolCall{id: e.Item.CallID, name: e.Item.Name}
	c.args, c.raw = callArgs(e.Item.Arguments)
	withhold, fix := s.decide(s.id, s.model, c)
	if withhold {
		s.shift++
		s.fixes = append(s.fixes, fix)
		s.dropped[c.id] = true
		s.outputs = append(s.outputs, mustJSON(map[string]any{"type": "function_call_output", "call_id": c.id, "output": fix}))
		return nil
	}
	for _, d := range evs {
		var t struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(d, &t)
		s.send(t.Type, d)
	}
	s.sent++
	return nil
}

// pass sends an upstream event, renumbered when items were withheld or
// events inserted before it.
func (s *responsesStream) pass(ev *sseEvent, typ string) {
	if s.shift == 0 && s.seqAdd == 0 {
		s.out.raw(ev.raw)
		return
	}
	s.send(typ, ev.data)
}

// send writes event data, its output_index less the items withheld
// before it and its sequence_number plus the events inserted.
func (s *responsesStream) send(typ string, data []byte) {
	if s.shift != 0 || s.seqAdd != 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) == nil {
			if v, ok := m["output_index"]; ok && s.shift != 0 {
				if n, err := strconv.Atoi(string(v)); err == nil {
					m["output_index"] = json.RawMessage(strconv.Itoa(n - s.shift))
				}
			}
			if v, ok := m["sequence_number"]; ok && s.seqAdd != 0 {
				if n, err := strconv.Atoi(string(v)); err == nil {
					m["sequence_number"] = json.RawMessage(strconv.Itoa(n + s.seqAdd))
				}
			}
			data = mustJSON(m)
		}
	}
	s.out.event(typ, data)
}

// note sends the note of the withheld calls as a message item of its own,
// after the items sent.
func (s *responsesStream) note() {
	if len(s.fixes) == 0 {
		return
	}
	text := noteText(s.fixes)
	id := "msg_toolaudit_" + s.id
	part := map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
	item := map[string]any{"type": "message", "id": id, "status": "completed", "role": "assistant", "content": []any{part}}
	idx := s.sent
	for i, e := range []map[string]any{
		{"type": "response.output_item.added", "output_index": idx, "item": map[string]any{"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}}},
		{"type": "response.content_part.added", "item_id": id, "output_index": idx, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}},
		{"type": "response.output_text.delta", "item_id": id, "output_index": idx, "content_index": 0, "delta": text, "logprobs": []any{}},
		{"type": "response.output_text.done", "item_id": id, "output_index": idx, "content_index": 0, "text": text, "logprobs": []any{}},
		{"type": "response.content_part.done", "item_id": id, "output_index": idx, "content_index": 0, "part": part},
		{"type": "response.output_item.done", "output_index": idx, "item": item},
	} {
		// After every upstream event sent so far; the ones after these
		// are renumbered past them (send).
		e["sequence_number"] = s.maxSeq + 1 + i
		s.out.event(e["type"].(string), mustJSON(e))
		s.seqAdd++
	}
	s.sent++
	s.noteItem = mustJSON(item)
}

// completed is the data of the final event (response.completed, or
// incomplete, failed) with its response's output as sent: without the
// withheld calls, with the note's message item.
func (s *responsesStream) completed(data []byte) ([]byte, error) {
	if len(s.dropped) == 0 {
		return data, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("the final event: %w", err)
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(top["response"], &resp); err != nil {
		return nil, fmt.Errorf("the final event's response: %w", err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(resp["output"], &items); err != nil {
		return nil, fmt.Errorf("the final event's output: %w", err)
	}
	out := items[:0]
	for _, raw := range items {
		var it struct {
			Type   string `json:"type"`
			CallID string `json:"call_id"`
		}
		_ = json.Unmarshal(raw, &it)
		if it.Type == "function_call" && s.dropped[it.CallID] {
			continue
		}
		out = append(out, raw)
	}
	if s.noteItem != nil {
		out = append(out, s.noteItem)
	}
	resp["output"] = mustJSON(out)
	top["response"] = mustJSON(resp)
	return mustJSON(top), nil
}

func (s *responsesStream) finish() error {
	if len(s.held) > 0 {
		return fmt.Errorf("the stream ended inside a tool call, which cannot be decided and is not sent")
	}
	return nil
}
