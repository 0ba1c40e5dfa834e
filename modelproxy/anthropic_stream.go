package modelproxy

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
//
// Under retry (repairStream) each attempt's blocks are kept for the
// repair request, its message_delta and message_stop held, and the
// message_start of a repair's stream dropped: its blocks follow the
// client's last (base); end sends the note, the message_delta (tool_use
// when any call was sent) with the usage summed over the attempts, and
// message_stop.
type anthropicStream struct {
	out       *sink
	decide    streamDecider
	id, model string
	base      int // the client's index of the attempt's first block
	dropped   int // blocks of the attempt withheld so far
	next      int // the client's index of the next block
	sent      int // tool_use blocks released
	fixes     []string
	held      *anthropicHeld

	t       streamTurn
	attempt int
	blocks  []*anthropicBlock          // the attempt's, by index
	start   json.RawMessage            // the attempt's message_start usage
	usage   json.RawMessage            // summed over the attempts done
	delta   map[string]json.RawMessage // the last message_delta, held
	stopped bool                       // message_stop, held

	// started counts the attempt's blocks started; open is the index of
	// the one started and not stopped, -1 none.
	started, open int

	tape eventTape
}

// anthropicBlock is a content block of an attempt, accumulated as the
// SDK accumulates it, for the repair request.
type anthropicBlock struct {
	start                   map[string]json.RawMessage
	text, thinking, partial []byte
	signature               json.RawMessage
	citations               []json.RawMessage
}

type anthropicHeld struct {
	index    int
	id, name string
	start    json.RawMessage // the start block's input
	deltas   bool            // input_json_delta seen: the input is their partial_json
	input    []byte
	events   []*sseEvent
	size     int // bytes of the events held
}

func (anthropicMessages) newStream(out *sink, d streamDecider) streamer {
	return &anthropicStream{out: out, decide: d, open: -1}
}

// errorEvent is an error event, which the SDK raises as an APIError.
func (s *anthropicStream) errorEvent(msg string) (string, []byte) {
	return "error", anthropicMessages{}.errorBody(502, msg)
}

func (s *anthropicStream) release() { s.tape.release() }

func (s *anthropicStream) handle(ev *sseEvent) error {
	switch {
	case !ev.named, ev.event == "ping", ev.event == "error", len(ev.data) == 0:
		// The SDKs skip an event without a name (an empty one is a name),
		// ping and one without data, and raise error.
	default:
		// The SDKs parse every other event and act on its data's type,
		// this proxy on the event's name: the two must agree.
		v, err := s.tape.parse(ev)
		if err != nil {
			return fmt.Errorf("%s is not understood, so its tool call cannot be decided: %w", ev.event, err)
		}
		if typ := strOr(v.Get("type")); typ != ev.event {
			return fmt.Errorf("an event named %q holds a %q: the SDKs would read it as the latter, so it is not sent", ev.event, typ)
		}
	}
	if s.t.retry {
		if err := s.keep(ev); err != nil {
			return err
		}
	}
	switch ev.event {
	case "message_start":
		v, _ := s.tape.parse(ev)
		m := v.Get("message")
		if m.Get("content").Len() > 0 {
			// The SDKs start the message from it: its blocks were never
			// streamed as blocks, and cannot be decided.
			return errors.New("message_start holds content blocks, which cannot be decided")
		}
		s.id, s.model, s.start = strOr(m.Get("id")), strOr(m.Get("model")), raw(m.Get("usage"))
		if s.attempt > 0 {
			return nil // the client's message goes on
		}
	case "content_block_start", "content_block_delta", "content_block_stop":
		return s.block(ev)
	case "message_delta":
		if s.held != nil {
			if err := s.finish(); err != nil {
				return err
			}
		}
		v, err := s.tape.parse(ev)
		if err != nil && (s.t.retry || len(s.fixes) > 0) {
			return fmt.Errorf("message_delta: %w", err)
		}
		if s.t.retry {
			top, _ := members(v, "")
			s.delta = top
			s.usage = sumUsage(s.usage, overlay(s.start, top["usage"]))
			return nil // sent by end
		}
		if len(s.fixes) > 0 {
			s.note()
			delta := v.Get("delta")
			if err := object(delta, "message_delta.delta"); err != nil {
				return err
			}
			if s.sent == 0 && delta.Get("stop_reason").StrIs("tool_use") {
				top, _ := members(v, "")
				d, _ := members(delta, "")
				d["stop_reason"] = mustJSON("end_turn")
				top["delta"] = mustJSON(d)
				s.out.event(ev.event, mustJSON(top))
				return nil
			}
		}
	case "message_stop":
		if s.t.retry {
			s.stopped = true
			return nil // sent by end
		}
	}
	s.out.raw(ev.raw)
	return nil
}

// block handles a content block event.
func (s *anthropicStream) block(ev *sseEvent) error {
	b, err := readBlockEvent(&s.tape, ev)
	if err != nil {
		return fmt.Errorf("%s is not understood, so its tool call cannot be decided: %w", ev.event, err)
	}
	// The SDKs add a block at each start whatever its index, and apply a
	// delta to the block at its index: blocks must come one after the
	// other, each from its start to its stop, for the two to agree.
	switch {
	case ev.event == "content_block_start" && (s.open >= 0 || b.index != s.started):
		return fmt.Errorf("content_block_start of index %d after %d blocks (open: %d): blocks out of order, so the calls cannot be decided", b.index, s.started, s.open)
	case ev.event == "content_block_start":
		s.open, s.started = b.index, s.started+1
	case b.index != s.open:
		return fmt.Errorf("%s of index %d, not the open block's (%d): blocks out of order, so the calls cannot be decided", ev.event, b.index, s.open)
	case ev.event == "content_block_stop":
		s.open = -1
	}
	if h := s.held; h != nil && b.index == h.index {
		h.events = append(h.events, ev)
		h.size += len(ev.raw)
		if b.deltaType == "input_json_delta" {
			// The SDKs read a tool_use's input from these alone, once
			// there is one (none other changes it).
			h.deltas = true
			h.input = append(h.input, b.partialJSON...)
		}
		if h.size > s.out.maxHeld {
			return errHeldTooLong
		}
		if ev.event == "content_block_stop" {
			return s.complete()
		}
		return nil
	}
	if ev.event == "content_block_start" && b.typ == "tool_use" {
		if s.held != nil {
			if err := s.complete(); err != nil {
				return err
			}
		}
		s.held = &anthropicHeld{index: b.index, id: b.id, name: b.name, start: b.input, events: []*sseEvent{ev}}
		return nil
	}
	s.send(ev, b.index)
	return nil
}

// blockEvent is what the proxy reads of a content block event.
type blockEvent struct {
	index         int
	typ, id, name string          // content_block_start's block
	input         json.RawMessage // and its input
	deltaType     string          // content_block_delta's
	partialJSON   string
}

func readBlockEvent(t *eventTape, ev *sseEvent) (blockEvent, error) {
	v, err := t.parse(ev)
	if err != nil {
		return blockEvent{}, err
	}
	f := fieldsOf(v, "event")
	b := blockEvent{index: f.index("index")}
	cb := f.object("content_block")
	b.typ, b.id, b.name, b.input = cb.str("type"), cb.str("id"), cb.str("name"), raw(cb.v.Get("input"))
	d := f.object("delta")
	b.deltaType, b.partialJSON = d.str("type"), d.str("partial_json")
	return b, cmp.Or(cb.err, d.err)
}

// send passes ev on, renumbered when blocks were dropped before it or
// an earlier attempt's blocks came first.
func (s *anthropicStream) send(ev *sseEvent, index int) {
	n := s.base + index - s.dropped
	if ev.event == "content_block_start" {
		s.next = n + 1
	}
	if s.base == 0 && s.dropped == 0 {
		s.out.raw(ev.raw)
		return
	}
	v, err := s.tape.parse(ev)
	if err != nil {
		s.out.raw(ev.raw)
		return
	}
	top, _ := members(v, "")
	top["index"] = mustJSON(n)
	s.out.event(ev.event, mustJSON(top))
}

// complete decides the held tool_use block and sends it or not.
func (s *anthropicStream) complete() error {
	h := s.held
	s.held = nil
	// As the SDKs read it: the partial_json of the deltas when there is
	// any ({} when they are empty), else the start block's input.
	c := toolCall{id: h.id, name: h.name}
	switch {
	case h.deltas && len(h.input) > 0:
		c.args, c.raw = callArgs(string(h.input))
	case h.deltas || h.start == nil:
		c.args = []byte("{}")
	default:
		c.args = h.start
	}
	withhold, fix := s.decide(s.id, s.model, c)
	if !s.t.decided(c, withhold, fix) {
		s.dropped++
		if withhold {
			s.fixes = append(s.fixes, fix)
		}
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

func (s *anthropicStream) retrying() { s.t.retry = true }

// keep accumulates the attempt's content blocks (retry).
func (s *anthropicStream) keep(ev *sseEvent) error {
	if ev.event != "content_block_start" && ev.event != "content_block_delta" || !s.t.keep(len(ev.data), s.out.maxHeld) {
		return nil
	}
	v, err := s.tape.parse(ev)
	f := fieldsOf(v, "event")
	i := f.index("index")
	start, serr := members(v.Get("content_block"), "content_block")
	df := f.object("delta")
	d := df.v
	text, thinking, partial := df.str("text"), df.str("thinking"), df.str("partial_json")
	if err := cmp.Or(err, serr, df.err); err != nil {
		return fmt.Errorf("%s is not understood, so its tool call cannot be decided: %w", ev.event, err)
	}
	if ev.event == "content_block_start" {
		if i != len(s.blocks) || start == nil {
			s.t.lost = true // blocks out of order: the turn cannot be rebuilt
			return nil
		}
		s.blocks = append(s.blocks, &anthropicBlock{start: start})
		return nil
	}
	if i < 0 || i >= len(s.blocks) || d.IsNull() {
		s.t.lost = true
		return nil
	}
	b := s.blocks[i]
	switch {
	case present(d.Get("text")):
		b.text = append(b.text, text...)
	case present(d.Get("thinking")):
		b.thinking = append(b.thinking, thinking...)
	case present(d.Get("partial_json")):
		b.partial = append(b.partial, partial...)
	case present(d.Get("signature")):
		b.signature = d.Get("signature").Raw()
	case present(d.Get("citation")):
		b.citations = append(b.citations, d.Get("citation").Raw())
	}
	return nil
}

// turn is the attempt's message, its blocks as the SDK accumulates them.
func (s *anthropicStream) turn() (response, *streamTurn, bool, error) {
	if !s.t.withheld() || s.delta == nil {
		return nil, &s.t, false, nil
	}
	content := make([]json.RawMessage, len(s.blocks))
	for i, b := range s.blocks {
		m := maps.Clone(b.start)
		if err := b.fill(m); err != nil {
			return nil, &s.t, true, fmt.Errorf("content block %d: %w", i, err)
		}
		content[i] = mustJSON(m)
	}
	msg := map[string]json.RawMessage{"id": mustJSON(s.id), "type": mustJSON("message"), "role": mustJSON("assistant"),
		"model": mustJSON(s.model), "content": mustJSON(content), "stop_reason": mustJSON("tool_use")}
	resp, err := parseStrict(mustJSON(msg), anthropicMessages{}.parseResponse)
	return resp, &s.t, true, err
}

// fill puts what the block's deltas carried into its start object m.
func (b *anthropicBlock) fill(m map[string]json.RawMessage) error {
	add := func(k string, v []byte) {
		var prev string
		_ = json.Unmarshal(m[k], &prev)
		m[k] = mustJSON(prev + string(v))
	}
	if b.text != nil {
		add("text", b.text)
	}
	if b.thinking != nil {
		add("thinking", b.thinking)
	}
	if b.signature != nil {
		m["signature"] = b.signature
	}
	if b.citations != nil {
		m["citations"] = mustJSON(b.citations)
	}
	if len(b.partial) > 0 {
		if !json.Valid(b.partial) {
			return errors.New("its input is not JSON")
		}
		m["input"] = b.partial
	}
	return nil
}

func (s *anthropicStream) again() {
	s.t.again()
	s.attempt++
	s.base, s.dropped, s.fixes, s.held = s.next, 0, nil, nil
	s.started, s.open = 0, -1
	s.blocks, s.start, s.delta, s.stopped = nil, nil, nil, false
}

// end sends the note of the last attempt's withheld calls, the held
// message_delta (stop_reason tool_use when calls were sent, end_turn
// when none was and the last attempt's were withheld), its usage the sum
// of the attempts', and message_stop.
func (s *anthropicStream) end() error {
	if len(s.fixes) > 0 {
		s.note()
	}
	if s.delta != nil {
		var d map[string]json.RawMessage
		_ = json.Unmarshal(s.delta["delta"], &d)
		if d == nil {
			d = map[string]json.RawMessage{}
		}
		switch {
		case s.sent > 0:
			d["stop_reason"] = mustJSON("tool_use")
		case len(s.fixes) > 0 && string(d["stop_reason"]) == `"tool_use"`:
			d["stop_reason"] = mustJSON("end_turn")
		}
		s.delta["delta"] = mustJSON(d)
		if s.usage != nil {
			s.delta["usage"] = s.usage
		}
		s.out.event("message_delta", mustJSON(s.delta))
	}
	if s.stopped {
		s.out.event("message_stop", []byte(`{"type":"message_stop"}`))
	}
	return nil
}

// overlay is usage a with b's members put over it (message_start's
// usage and message_delta's, whose counters are the message's totals).
func overlay(a, b json.RawMessage) json.RawMessage {
	var x, y map[string]json.RawMessage
	if json.Unmarshal(a, &x) != nil || x == nil {
		return b
	}
	if json.Unmarshal(b, &y) != nil {
		return a
	}
	maps.Copy(x, y)
	return mustJSON(x)
}
