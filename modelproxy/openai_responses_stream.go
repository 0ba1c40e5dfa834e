package modelproxy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
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
	held      map[int]*responsesHeld // by output_index
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
	released  map[string]toolCall // the attempt's calls sent, by call_id
	done      map[int]bool        // the attempt's output_index of items done
	added     int                 // the attempt's items added

	tape eventTape
}

func (openAIResponses) newStream(out *sink, d streamDecider) streamer {
	return &responsesStream{out: out, decide: d, held: map[int]*responsesHeld{}, dropped: map[string]bool{}, released: map[string]toolCall{}, done: map[int]bool{}}
}

// errorEvent is the stream's error event, which the SDK raises as an
// APIError.
func (s *responsesStream) errorEvent(msg string) (string, []byte) {
	return "error", mustJSON(map[string]any{"type": "error", "code": "toolaudit", "message": msg, "param": nil, "sequence_number": 0})
}

// maxOutputItems bounds a streamed response's output items.
const maxOutputItems = 1 << 16

// responsesEvent is what the proxy reads of a Responses stream event.
type responsesEvent struct {
	typ         string
	seq         int
	outputIndex int
	hasIndex    bool
	item        jsontape.Value // the event's item, if any
	response    jsontape.Value // the event's response, if any
}

func readResponsesEvent(v jsontape.Value) (responsesEvent, error) {
	f := fieldsOf(v, "event")
	e := responsesEvent{typ: f.str("type"), seq: f.index("sequence_number"), outputIndex: f.index("output_index"),
		hasIndex: present(v.Get("output_index"))}
	item, resp := f.object("item"), f.object("response")
	e.item, e.response = item.v, resp.v
	if err := cmp.Or(item.err, resp.err); err != nil {
		return e, err
	}
	if e.outputIndex < 0 || e.outputIndex >= maxOutputItems {
		// What the stream keeps per item stays bounded.
		return e, fmt.Errorf("output_index %d, not from 0 to %d", e.outputIndex, maxOutputItems-1)
	}
	return e, nil
}

// heldEvent is a held event's type and data.
type heldEvent struct {
	typ  string
	data []byte
}

// responsesHeld is a function_call item's events, held until its
// output_item.done, and what they say of the call: the SDK's snapshot
// takes the added item, the arguments deltas and done, then the done
// item, and a client may act on any of them (the agent SDKs read the
// done item or the final response), so all must be the call decided.
type responsesHeld struct {
	events            []heldEvent
	callID, name      string // the added item's
	deltas, argsDone  strings.Builder
	hasDelta, hasDone bool
}

func (h *responsesHeld) add(typ string, v jsontape.Value) error {
	f := fieldsOf(v, "event")
	switch typ {
	case "response.output_item.added":
		it := f.object("item")
		h.callID, h.name = it.str("call_id"), it.str("name")
		if args := it.str("arguments"); args != "" {
			h.hasDelta = true // the SDK's arguments: the added item's, then the deltas
			h.deltas.WriteString(args)
		}
		return it.err
	case "response.function_call_arguments.delta":
		h.hasDelta = true
		h.deltas.WriteString(f.str("delta"))
	case "response.function_call_arguments.done":
		h.hasDone = true
		h.argsDone.WriteString(f.str("arguments"))
	}
	return f.err
}

// agrees checks the held events against the done item's call c.
func (h *responsesHeld) agrees(c toolCall) error {
	switch {
	case h.callID != "" && h.callID != c.id, h.name != "" && h.name != c.name:
		return fmt.Errorf("call %q %q added as %q %q", c.id, c.name, h.callID, h.name)
	case h.hasDelta && !sameArgs(argsOf(h.deltas.String()), c), h.hasDone && !sameArgs(argsOf(h.argsDone.String()), c):
		return fmt.Errorf("call %q: its arguments events and its item differ", c.id)
	}
	return nil
}

// argsOf is a call of arguments text, for sameArgs.
func argsOf(text string) toolCall {
	var c toolCall
	c.args, c.raw = callArgs(text)
	return c
}

// finalCalls checks the final response's function calls: each one the
// stream released, as released, or one it withheld.
func (s *responsesStream) finalCalls(output jsontape.Value) error {
	for it := output.Items(); it.Next(); {
		item := it.Value()
		if typ := strOr(item.Get("type")); typ != "function_call" {
			if err := undecidedItem(typ, item); err != nil {
				return fmt.Errorf("the final event's response holds %w", err)
			}
			continue
		}
		f := fieldsOf(item, "item")
		c, err := responsesCall(f)
		if err != nil {
			return fmt.Errorf("the final event's response: %w", err)
		}
		if s.dropped[c.id] {
			continue
		}
		r, ok := s.released[c.id]
		if !ok || r.name != c.name || !sameArgs(r, c) {
			return fmt.Errorf("the final event's response holds a function call (call_id %q) other than the one streamed as an item, which cannot be decided", c.id)
		}
	}
	return nil
}

func (s *responsesStream) release() { s.tape.release() }

func (s *responsesStream) handle(ev *sseEvent) error {
	if len(ev.data) == 0 {
		s.out.raw(ev.raw)
		return nil
	}
	v, err := s.tape.parse(ev)
	var e responsesEvent
	if err == nil {
		e, err = readResponsesEvent(v)
	}
	if err != nil {
		return fmt.Errorf("an upstream event is not understood, so its tool calls cannot be decided: %w", err)
	}
	if id := strOr(e.response.Get("id")); id != "" {
		s.id, s.model = id, strOr(e.response.Get("model"))
	}
	if e.typ == "error" {
		s.out.raw(ev.raw) // the upstream's: the SDK raises it
		return nil
	}
	final := e.typ == "response.completed" || e.typ == "response.incomplete" || e.typ == "response.failed"
	if e.seq > s.maxSeq && !final {
		s.maxSeq = e.seq
	}
	if out := e.response.Get("output"); !final && out.Len() > 0 {
		// The SDK's snapshot of the response is each such event's
		// response: a call there was never streamed as an item.
		for it := out.Items(); it.Next(); {
			item := it.Value()
			typ := strOr(item.Get("type"))
			if typ == "function_call" || undecidedItem(typ, item) != nil {
				return fmt.Errorf("a %s event whose response holds calls not streamed as items, which cannot be decided", e.typ)
			}
		}
	}
	switch {
	case final:
		if len(s.held) > 0 {
			return fmt.Errorf("the response ended inside a tool call, which cannot be decided")
		}
		if err := s.finalCalls(e.response.Get("output")); err != nil {
			return err
		}
		if s.t.retry {
			if u := e.response.Get("usage"); present(u) {
				s.usage = sumUsage(s.usage, u.Raw())
			}
			s.finalType, s.finalData = e.typ, ev.data
			return nil // sent by end
		}
		return s.final(e.typ, ev.data, nil, nil)
	case !e.hasIndex:
		if s.attempt > 0 && e.response.Exists() {
			return nil // a repair's response.created, in_progress: the client's goes on
		}
		s.pass(ev, e.typ)
		return nil
	}
	idx := e.outputIndex
	// The SDK appends the item of each output_item.added whatever its
	// index, and applies every other event at its index (renumbered past
	// the items withheld): items must be added one after the other, each
	// event be of an item added and not done, and no item be added while
	// a function call is held (the client would get it first).
	switch {
	case e.typ == "response.output_item.added" && (idx != s.added || len(s.held) > 0):
		return fmt.Errorf("output_item.added at output_index %d after %d items, %d function calls held: items out of order or interleaved, so the calls cannot be decided", idx, s.added, len(s.held))
	case e.typ == "response.output_item.added":
		s.added++
	case idx >= s.added || s.done[idx]:
		return fmt.Errorf("a %s at output_index %d, not of an item added and not done: so the calls cannot be decided", e.typ, idx)
	}
	if e.typ == "response.output_item.done" {
		s.done[idx] = true
	}
	isCall := e.item.Get("type").StrIs("function_call")
	if typ := strOr(e.item.Get("type")); e.item.Exists() && !isCall {
		if err := undecidedItem(typ, e.item); err != nil {
			return fmt.Errorf("an upstream event holds %w", err)
		}
	}
	if e.typ == "response.output_item.added" && isCall {
		s.held[idx] = &responsesHeld{}
	}
	if _, ok := s.held[idx]; !ok {
		if isCall {
			// The SDK puts an item of output_item.done at its index
			// whatever was added there.
			return fmt.Errorf("a function call item at output_index %d that was not added as one, which cannot be decided", idx)
		}
		if e.typ == "response.output_item.done" {
			s.sent++
			if item := raw(e.item); s.t.retry && s.t.keep(len(item), s.out.maxHeld) {
				s.items, s.sentThis = append(s.items, item), append(s.sentThis, item)
			}
		}
		s.pass(ev, e.typ)
		return nil
	}
	h := s.held[idx]
	h.events = append(h.events, heldEvent{e.typ, ev.data})
	if s.heldBytes += len(ev.data); s.heldBytes > s.out.maxHeld {
		return errHeldTooLong
	}
	if e.typ != "response.output_item.done" {
		return h.add(e.typ, v)
	}
	delete(s.held, idx)
	s.heldBytes = 0
	c, err := responsesCall(fieldsOf(e.item, "item"))
	if err == nil {
		err = h.agrees(c)
	}
	if err != nil {
		return fmt.Errorf("an upstream event is not understood, so its tool calls cannot be decided: item: %w", err)
	}
	withhold, fix := s.decide(s.id, s.model, c)
	item := raw(e.item)
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
	s.released[c.id] = c
	for _, he := range h.events {
		s.send(he.typ, he.data)
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
		if m, err := parseStrict(data, func(v jsontape.Value) (map[string]json.RawMessage, error) { return members(v, "") }); err == nil {
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
	type final struct {
		top, resp map[string]json.RawMessage
		out       []json.RawMessage
	}
	f, err := parseStrict(data, func(v jsontape.Value) (final, error) {
		f := final{out: slices.Clone(earlier)}
		f.top, _ = members(v, "")
		r := v.Get("response")
		if r.Kind() != jsontape.Object {
			return f, typeError("the final event's response", r, "an object")
		}
		f.resp, _ = members(r, "")
		err := arrayOf(r.Get("output"), "the final event's output", func(_ int, it jsontape.Value) error {
			if !it.Get("type").StrIs("function_call") || !s.dropped[strOr(it.Get("call_id"))] {
				f.out = append(f.out, it.Raw())
			}
			return nil
		})
		return f, err
	})
	if err != nil {
		return nil, err
	}
	top, resp, out := f.top, f.resp, f.out
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

func (s *responsesStream) retrying() { s.t.retry = true }

// turn is the attempt's response: its output items.
func (s *responsesStream) turn() (response, *streamTurn, bool, error) {
	if !s.t.withheld() || s.finalType != "response.completed" {
		return nil, &s.t, false, nil
	}
	top := map[string]json.RawMessage{"id": mustJSON(s.id), "object": mustJSON("response"), "model": mustJSON(s.model), "output": mustJSON(s.items)}
	resp, err := parseStrict(mustJSON(top), openAIResponses{}.parseResponse)
	return resp, &s.t, true, err
}

func (s *responsesStream) again() {
	s.t.again()
	s.attempt++
	s.base, s.shift = s.sent, 0
	s.seqAdd += s.maxSeq + 1 // after the last event sent
	s.maxSeq = 0
	s.held, s.heldBytes = map[int]*responsesHeld{}, 0
	s.fixes, s.dropped, s.released, s.outputs, s.noteItem = nil, map[string]bool{}, map[string]toolCall{}, nil, nil
	s.done, s.added = map[int]bool{}, 0
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
