package modelproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// openAIStream is a Chat Completions stream (chat.completion.chunk
// events, then data: [DONE]). Text deltas pass through as they come; a
// tool call's deltas (choices[].delta.tool_calls, by index) are held
// until the call is complete, which is when the next call of the choice
// starts or the choice finishes, then decided. A call released goes out
// whole, in one delta, renumbered so that the client's indexes have no
// gap; one withheld is dropped, and at the choice's finish the note is
// sent as a content delta and, when no call is left, finish_reason
// "tool_calls" becomes "stop".
//
// Under retry (repairStream) each attempt's finish, usage chunk and
// [DONE] are held, and its text and calls kept for the repair request;
// a repair's text follows the earlier text after a blank line;
// end sends the note, the finish (tool_calls when any call was sent),
// the usage summed and [DONE].
type openAIStream struct {
	out      *sink
	decide   streamDecider
	envelope map[string]json.RawMessage // the last chunk without choices and usage
	// envelopeText is the envelope as a chunk holds it (names sorted, as
	// appendObject writes them), choices' value left out at envelopeAt;
	// nil until a chunk is built of it.
	envelopeText []byte
	envelopeAt   int
	id           string
	model        string
	choices      map[int]*openAIStreamChoice

	t     streamTurn
	text  strings.Builder   // choice 0's content, this attempt
	raws  []json.RawMessage // choice 0's calls, this attempt
	usage json.RawMessage   // summed over the attempts
	done  bool              // the attempt's [DONE], held
	after bool              // earlier attempts sent text: this one's first goes after a blank line

	tape eventTape
}

type openAIStreamChoice struct {
	cur            *openAIStreamCall
	sent, withheld int
	fixes          []string
	finish         json.RawMessage // under retry: the attempt's, held
}

type openAIStreamCall struct {
	index         int
	id, typ, name string
	args          []byte
}

func (openAIChat) newStream(out *sink, d streamDecider) streamer {
	return &openAIStream{out: out, decide: d, choices: map[int]*openAIStreamChoice{}}
}

// errorEvent is a data chunk holding an error object, which the SDK
// raises as an APIError.
func (s *openAIStream) errorEvent(msg string) (string, []byte) {
	return "", openAIChat{}.errorBody(502, msg)
}

// openAIDelta is one tool call delta of a chunk, its strings views of
// the chunk's tape (a call's deltas are many: none is copied but into
// the call).
type openAIDelta struct {
	index                    int
	id, typ, name, arguments []byte
}

func readOpenAIDelta(v jsontape.Value) (openAIDelta, error) {
	t := fieldsOf(v, "tool call")
	d := openAIDelta{index: t.index("index"), id: t.bytes("id"), typ: t.bytes("type")}
	f := t.object("function")
	d.name = f.bytes("name")
	d.arguments = f.bytes("arguments")
	return d, f.err
}

// plainChunk reports whether a chunk holds no tool call and no finish:
// text, which passes through as it came.
func plainChunk(v jsontape.Value) bool {
	for it := v.Get("choices").Items(); it.Next(); {
		c := it.Value()
		d := c.Get("delta")
		if d.Get("tool_calls").Exists() || d.Get("function_call").Exists() || c.Get("message").Exists() || !c.Get("finish_reason").IsNull() {
			return false
		}
	}
	return true
}

func (s *openAIStream) release() { s.tape.release() }

func (s *openAIStream) handle(ev *sseEvent) error {
	if string(ev.data) == "[DONE]" || len(ev.data) == 0 {
		if err := s.finish(); err != nil {
			return err
		}
		if s.t.retry && string(ev.data) == "[DONE]" {
			s.done = true
			return nil
		}
		s.out.raw(ev.raw)
		return nil
	}
	v, err := s.tape.parse(ev)
	if err != nil {
		return fmt.Errorf("an upstream chunk is not understood, so its tool calls cannot be decided: %w", err)
	}
	cv := v.Get("choices")
	if v.Get("error").Exists() {
		if cv.Exists() {
			// The SDK raises a chunk's error when it is truthy and reads
			// its choices otherwise: neither is sent undecided.
			return errors.New("an upstream chunk holds both an error and choices")
		}
		s.out.raw(ev.raw)
		return nil
	}
	if k := cv.Kind(); k != jsontape.Invalid && k != jsontape.Null && k != jsontape.Array {
		return typeError("chunk choices", cv, "an array")
	}
	if s.id != "" && !s.t.retry && plainChunk(v) {
		s.out.raw(ev.raw) // text: nothing to change
		return nil
	}
	setStr(&s.id, v.Get("id").Str())
	setStr(&s.model, v.Get("model").Str())
	if s.envelope != nil && callsOnly(v) {
		// Held until each call is complete: the chunk itself is dropped,
		// so it is not rebuilt (most chunks of a call).
		for it := cv.Items(); it.Next(); {
			c := it.Value()
			ci, err := choiceIndex(c)
			if err != nil {
				return err
			}
			if err := s.callDeltas(ci, s.choice(ci), c.Get("delta").Get("tool_calls")); err != nil {
				return err
			}
		}
		return nil
	}
	top, _ := members(v, "")
	s.envelope, s.envelopeText = map[string]json.RawMessage{}, nil
	for k, v := range top {
		if k != "choices" && k != "usage" {
			s.envelope[k] = v
		}
	}
	if u := v.Get("usage"); s.t.retry && cv.Len() == 0 && present(u) {
		s.usage = sumUsage(s.usage, u.Raw()) // sent by end
		return nil
	}
	choices := make([]map[string]json.RawMessage, 0, cv.Len())
	changed, keep := false, cv.Len() == 0
	for it := cv.Items(); it.Next(); {
		c := it.Value()
		if c.Kind() != jsontape.Object {
			return typeError("chunk choice", c, "an object")
		}
		if c.Get("message").Exists() {
			// The SDK's accumulator takes a choice's other members as
			// they are: a message there would replace the one streamed.
			return errors.New("a chunk's choice holds a message, which cannot be decided")
		}
		ch, _ := members(c, "")
		choices = append(choices, ch)
		ci, err := choiceIndex(c)
		if err != nil {
			return err
		}
		st := s.choice(ci)
		dv := c.Get("delta")
		delta, err := members(dv, "delta")
		if err != nil {
			return err
		}
		if dv.Get("function_call").Exists() {
			return errors.New("a chunk's delta.function_call: a deprecated function call, not decided by this proxy")
		}
		if text := dv.Get("content").Str(); s.t.retry && ci == 0 && len(text) > 0 {
			if s.t.keep(len(text), s.out.maxHeld) {
				s.text.Write(text)
			}
			if s.after {
				delta["content"] = mustJSON("\n\n" + string(text))
				ch["delta"] = mustJSON(delta)
				changed, s.after = true, false
			}
		}
		if tc := dv.Get("tool_calls"); tc.Exists() {
			if err := s.callDeltas(ci, st, tc); err != nil {
				return err
			}
			delete(delta, "tool_calls")
			ch["delta"] = mustJSON(delta)
			changed = true
		}
		fin := ch["finish_reason"]
		if len(fin) > 0 && string(fin) != "null" {
			if st.cur != nil {
				if err := s.complete(ci, st); err != nil {
					return err
				}
			}
			switch {
			case s.t.retry:
				st.finish = fin // sent by end
				ch["finish_reason"] = json.RawMessage("null")
				changed = true
			case st.withheld > 0:
				s.chunk(ci, contentDelta("\n\n"+noteText(st.fixes)))
				if st.sent == 0 && string(fin) == `"tool_calls"` {
					ch["finish_reason"] = mustJSON("stop")
					changed = true
				}
				keep = true
			default:
				keep = true
			}
		}
		if len(delta) > 0 {
			keep = true
		}
	}
	switch {
	case !changed:
		s.out.raw(ev.raw)
	case keep:
		top["choices"] = mustJSON(choices)
		s.out.event(ev.event, mustJSON(top))
	}
	return nil
}

// maxChoices bounds a stream's choices (the API's n is at most 128), so
// that what the proxy keeps of them stays bounded however long the stream.
const maxChoices = 128

// choiceIndex is a chunk choice's index, from 0 to maxChoices-1.
func choiceIndex(c jsontape.Value) (int, error) {
	ci, err := index(c.Get("index"), "choice index")
	if err == nil && (ci < 0 || ci >= maxChoices) {
		err = fmt.Errorf("choice index %d, not from 0 to %d", ci, maxChoices-1)
	}
	return ci, err
}

// choice is the state of choice ci.
func (s *openAIStream) choice(ci int) *openAIStreamChoice {
	st := s.choices[ci]
	if st == nil {
		st = &openAIStreamChoice{}
		s.choices[ci] = st
	}
	return st
}

// callDeltas adds a chunk's tool call deltas (tc) to choice ci's calls:
// a delta of another index completes the current call.
func (s *openAIStream) callDeltas(ci int, st *openAIStreamChoice, tc jsontape.Value) error {
	return arrayOf(tc, "chunk tool_calls", func(_ int, dv jsontape.Value) error {
		d, err := readOpenAIDelta(dv)
		if err != nil {
			return fmt.Errorf("chunk tool_calls: %w", err)
		}
		if st.cur != nil && d.index != st.cur.index {
			if err := s.complete(ci, st); err != nil {
				return err
			}
		}
		if st.cur == nil {
			st.cur = &openAIStreamCall{index: d.index}
		}
		c := st.cur
		setStr(&c.id, d.id)
		setStr(&c.typ, d.typ)
		if len(d.name) > 0 {
			c.name += string(d.name)
		}
		c.args = append(c.args, d.arguments...)
		if len(c.args)+len(c.name) > s.out.maxHeld {
			return errHeldTooLong
		}
		return nil
	})
}

// callsOnly reports whether every choice of chunk v is tool call deltas
// and nothing else (no text, no finish): nothing of it is sent as it is.
func callsOnly(v jsontape.Value) bool {
	cv := v.Get("choices")
	if cv.Len() == 0 {
		return false
	}
	for it := cv.Items(); it.Next(); {
		c := it.Value()
		if c.Kind() != jsontape.Object {
			return false
		}
		for m := c.Members(); m.Next(); {
			switch string(m.Name()) {
			case "index":
			case "finish_reason", "logprobs":
				if !m.Value().IsNull() {
					return false
				}
			case "delta":
				d := m.Value()
				if d.Kind() != jsontape.Object || d.Len() != 1 || !d.Get("tool_calls").Exists() {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// complete decides the choice's current call and sends it or not.
func (s *openAIStream) complete(ci int, st *openAIStreamChoice) error {
	c := st.cur
	st.cur = nil
	tc := toolCall{id: c.id, name: c.name}
	tc.args, tc.raw = callArgs(string(c.args))
	withhold, fix := s.decide(s.id, s.model, tc)
	if s.t.retry && ci == 0 {
		raw := appendChatCall(nil, c, -1)
		if s.t.keep(len(raw), s.out.maxHeld) {
			s.raws = append(s.raws, raw)
		}
	}
	if !s.t.decided(tc, withhold, fix) {
		if withhold {
			st.withheld++
			st.fixes = append(st.fixes, fix)
		}
		return nil
	}
	delta := append([]byte(`{"tool_calls":[`), appendChatCall(nil, c, st.sent)...)
	s.chunk(ci, append(delta, "]}"...))
	st.sent++
	return nil
}

// appendChatCall appends the tool call c as a Chat Completions message
// holds it, with its index in the client's stream (none when < 0).
func appendChatCall(b []byte, c *openAIStreamCall, index int) []byte {
	b = append(b, `{"function":{"arguments":`...)
	b = schema.AppendString(b, string(c.args))
	b = append(b, `,"name":`...)
	b = schema.AppendString(b, c.name)
	b = append(b, `},"id":`...)
	b = schema.AppendString(b, c.id)
	if index >= 0 {
		b = append(b, `,"index":`...)
		b = strconv.AppendInt(b, int64(index), 10)
	}
	b = append(b, `,"type":`...)
	b = schema.AppendString(b, cmpOrStr(c.typ, "function"))
	return append(b, '}')
}

// contentDelta is a delta of text.
func contentDelta(text string) []byte {
	return append(schema.AppendString([]byte(`{"content":`), text), '}')
}

// chunk sends a chunk of the stream's envelope with one choice's delta
// (a JSON object).
func (s *openAIStream) chunk(ci int, delta []byte) {
	if s.envelopeText == nil {
		// The envelope's members around "choices", as appendObject sorts
		// them: built once, not for each chunk.
		choices := "choices"
		s.envelopeText, s.envelopeAt = appendObjectHole(nil, s.envelope, &choices)
	}
	c := append(make([]byte, 0, len(s.envelopeText)+len(delta)+64), s.envelopeText[:s.envelopeAt]...)
	c = append(c, `[{"delta":`...)
	c = append(c, delta...)
	c = append(c, `,"finish_reason":null,"index":`...)
	c = strconv.AppendInt(c, int64(ci), 10)
	c = append(c, "}]"...)
	s.out.event("", append(c, s.envelopeText[s.envelopeAt:]...))
}

func (s *openAIStream) finish() error {
	for _, ci := range s.choiceIndexes() {
		if st := s.choices[ci]; st.cur != nil {
			if err := s.complete(ci, st); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *openAIStream) choiceIndexes() []int {
	cis := make([]int, 0, len(s.choices))
	for ci := range s.choices {
		cis = append(cis, ci)
	}
	slices.Sort(cis)
	return cis
}

func (s *openAIStream) retrying() { s.t.retry = true }

// turn is the attempt's message: its text and every call, as Chat
// Completions returns it. Only a stream of one choice is repaired.
func (s *openAIStream) turn() (response, *streamTurn, bool, error) {
	st := s.choices[0]
	if len(s.choices) != 1 || st == nil || st.withheld == 0 || st.finish == nil {
		return nil, &s.t, false, nil
	}
	content := json.RawMessage("null")
	if s.text.Len() > 0 {
		content = mustJSON(s.text.String())
	}
	msg := map[string]json.RawMessage{"role": mustJSON("assistant"), "content": content, "tool_calls": mustJSON(s.raws)}
	choice := map[string]json.RawMessage{"index": json.RawMessage("0"), "message": mustJSON(msg), "finish_reason": st.finish}
	top := map[string]json.RawMessage{"id": mustJSON(s.id), "object": mustJSON("chat.completion"), "model": mustJSON(s.model),
		"choices": mustJSON([]map[string]json.RawMessage{choice})}
	resp, err := parseStrict(mustJSON(top), openAIChat{}.parseResponse)
	return resp, &s.t, true, err
}

func (s *openAIStream) again() {
	s.after = s.after || s.text.Len() > 0
	s.t.again()
	s.text.Reset()
	s.raws, s.done = nil, false
	for _, st := range s.choices {
		st.cur, st.withheld, st.fixes, st.finish = nil, 0, nil, nil
	}
}

// end sends each choice's note and finish, tool_calls when calls were
// sent (of any attempt), stop when none was and the last attempt's were
// withheld; the usage summed; [DONE].
func (s *openAIStream) end() error {
	for _, ci := range s.choiceIndexes() {
		st := s.choices[ci]
		if st.withheld > 0 {
			s.chunk(ci, contentDelta("\n\n"+noteText(st.fixes)))
		}
		if st.finish == nil {
			continue
		}
		fin := st.finish
		switch {
		case st.sent > 0:
			fin = mustJSON("tool_calls")
		case st.withheld > 0 && string(fin) == `"tool_calls"`:
			fin = mustJSON("stop")
		}
		top := s.envelopeCopy()
		top["choices"] = mustJSON([]map[string]json.RawMessage{{"index": mustJSON(ci), "delta": json.RawMessage("{}"), "finish_reason": fin}})
		s.out.event("", mustJSON(top))
	}
	if s.usage != nil {
		top := s.envelopeCopy()
		top["choices"], top["usage"] = json.RawMessage("[]"), s.usage
		s.out.event("", mustJSON(top))
	}
	if s.done {
		s.out.raw([]byte("data: [DONE]\n\n"))
	}
	return nil
}

func (s *openAIStream) envelopeCopy() map[string]json.RawMessage {
	top := maps.Clone(s.envelope)
	if top == nil {
		top = map[string]json.RawMessage{}
	}
	return top
}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
