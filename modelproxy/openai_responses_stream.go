package modelproxy

import (
	"encoding/json"
	"fmt"
	"slices"
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
//
// Under retry (repairStream) each attempt's final event is held and its
// output items kept for the repair request; a repair's stream goes on
// without its response.created and response.in_progress, its items
// after the client's last (base) and its events numbered after the
// last sent; end sends the note and the final event of the last
// attempt, its output the items sent in every attempt, its usage the
// sum.
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

	t         streamTurn
	attempt   int
	base      int               // the client's output_index of the attempt's first item
	items     []json.RawMessage // the attempt's output items
	sentThis  []json.RawMessage // the items the attempt sent
	earlier   []json.RawMessage // the items earlier attempts sent
	usage     json.RawMessage   // summed over the attempts
	finalType string            // the attempt's final event, held
	finalData []byte
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
		if s.t.retry {
			var f struct {
				Response struct {
					Usage json.RawMessage `json:"usage"`
				} `json:"response"`
			}
			_ = json.Unmarshal(ev.data, &f)
			if u := f.Response.Usage; len(u) > 0 && string(u) != "null" {
				s.usage = sumUsage(s.usage, u)
			}
			s.finalType, s.finalData = e.Type, ev.data
			return nil // sent by end
		}
		return s.final(e.Type, ev.data, nil, nil)
	case e.OutputIndex == nil:
		if s.attempt > 0 && e.Response != nil {
			return nil // a repair's response.created, in_progress: the client's goes on
		}
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
			if item := itemOf(ev.data); s.t.retry && s.t.keep(len(item), s.out.maxHeld) {
				s.items, s.sentThis = append(s.items, item), append(s.sentThis, item)
			}
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
	item := itemOf(ev.data)
	kept := s.t.retry && s.t.keep(len(item), s.out.maxHeld)
	if kept {
		s.items = append(s.items, item)
	}
	if !s.t.decided(c, withhold, fix) {
		s.shift++
		s.dropped[c.id] = true
		if withhold {
			s.fixes = append(s.fixes, fix)
			s.outputs = append(s.outputs, mustJSON(map[string]any{"type": "function_call_output", "call_id": c.id, "output": fix}))
		}
		return nil
	}
	if kept {
		s.sentThis = append(s.sentThis, item)
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
	if s.shift == 0 && s.seqAdd == 0 && s.base == 0 {
		s.out.raw(ev.raw)
		return
	}
	s.send(typ, ev.data)
}

// send writes event data, its output_index less the items withheld
// before it (plus the client's items of earlier attempts) and its
// sequence_number plus the events inserted (and those of earlier
// attempts).
func (s *responsesStream) send(typ string, data []byte) {
	if s.shift != 0 || s.seqAdd != 0 || s.base != 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(data, &m) == nil {
			if v, ok := m["output_index"]; ok && s.shift != s.base {
				if n, err := strconv.Atoi(string(v)); err == nil {
					m["output_index"] = json.RawMessage(strconv.Itoa(n - s.shift + s.base))
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
	for _, e := range []map[string]any{
		{"type": "response.output_item.added", "output_index": idx, "item": map[string]any{"type": "message", "id": id, "status": "in_progress", "role": "assistant", "content": []any{}}},
		{"type": "response.content_part.added", "item_id": id, "output_index": idx, "content_index": 0, "part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}},
		{"type": "response.output_text.delta", "item_id": id, "output_index": idx, "content_index": 0, "delta": text, "logprobs": []any{}},
		{"type": "response.output_text.done", "item_id": id, "output_index": idx, "content_index": 0, "text": text, "logprobs": []any{}},
		{"type": "response.content_part.done", "item_id": id, "output_index": idx, "content_index": 0, "part": part},
		{"type": "response.output_item.done", "output_index": idx, "item": item},
	} {
		// After every upstream event sent so far; the ones after these
		// are renumbered past them (send).
		e["sequence_number"] = s.maxSeq + s.seqAdd + 1
		s.out.event(e["type"].(string), mustJSON(e))
		s.seqAdd++
	}
	s.sent++
	s.noteItem = mustJSON(item)
}

// completed is the data of the final event (response.completed, or
// incomplete, failed) with its response's output as sent: the items
// earlier attempts sent (retry), its own without the calls withheld or
// dropped, the note's message item; and usage, when given.
func (s *responsesStream) completed(data []byte, earlier []json.RawMessage, usage json.RawMessage) ([]byte, error) {
	if len(s.dropped) == 0 && earlier == nil && usage == nil {
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
	out := slices.Clone(earlier)
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
	if usage != nil {
		resp["usage"] = usage
	}
	top["response"] = mustJSON(resp)
	return mustJSON(top), nil
}

func (s *responsesStream) finish() error {
	if len(s.held) > 0 {
		return fmt.Errorf("the stream ended inside a tool call, which cannot be decided and is not sent")
	}
	return nil
}

// itemOf is the item of an output_item.done event's data.
func itemOf(data []byte) json.RawMessage {
	var d struct {
		Item json.RawMessage `json:"item"`
	}
	_ = json.Unmarshal(data, &d)
	return d.Item
}

func (s *responsesStream) retrying() { s.t.retry = true }

// turn is the attempt's response: its output items.
func (s *responsesStream) turn() (response, *streamTurn, bool, error) {
	if !s.t.withheld() || s.finalType != "response.completed" {
		return nil, &s.t, false, nil
	}
	top := map[string]json.RawMessage{"id": mustJSON(s.id), "object": mustJSON("response"), "model": mustJSON(s.model), "output": mustJSON(s.items)}
	resp, err := openAIResponses{}.parseResponse(mustJSON(top))
	return resp, &s.t, true, err
}

func (s *responsesStream) again() {
	s.t.again()
	s.attempt++
	s.base, s.shift = s.sent, 0
	s.seqAdd += s.maxSeq + 1 // after the last event sent
	s.maxSeq = 0
	s.held, s.heldBytes = map[int][][]byte{}, 0
	s.fixes, s.dropped, s.outputs, s.noteItem = nil, map[string]bool{}, nil, nil
	s.earlier, s.sentThis = append(s.earlier, s.sentThis...), nil
	s.items, s.finalType, s.finalData = nil, "", nil
}

// end sends the note of the last attempt's withheld calls and its final
// event, whose response's output is the items sent in every attempt and
// the note, its usage the sum of the attempts'.
func (s *responsesStream) end() error {
	if s.finalData == nil {
		s.note()
		return nil
	}
	var usage json.RawMessage
	if s.attempt > 0 {
		usage = s.usage
	}
	return s.final(s.finalType, s.finalData, s.earlier, usage)
}

// final sends the note and the final event (typ, data), its output as
// sent (completed), and hands the withheld calls' outputs on for a
// request continuing the response.
func (s *responsesStream) final(typ string, data []byte, earlier []json.RawMessage, usage json.RawMessage) error {
	s.note()
	data, err := s.completed(data, earlier, usage)
	if err != nil {
		return err
	}
	s.send(typ, data)
	if s.withheld != nil && len(s.outputs) > 0 {
		s.withheld(s.id, s.outputs)
	}
	return nil
}
