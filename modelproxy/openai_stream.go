package modelproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	id       string
	model    string
	choices  map[int]*openAIStreamChoice

	t     streamTurn
	text  strings.Builder   // choice 0's content, this attempt
	raws  []json.RawMessage // choice 0's calls, this attempt
	usage json.RawMessage   // summed over the attempts
	done  bool              // the attempt's [DONE], held
	after bool              // earlier attempts sent text: this one's first goes after a blank line
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

type openAIDelta struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function *struct {
		Name      *string `json:"name"`
		Arguments string  `json:"arguments"`
	} `json:"function"`
}

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
	if s.id != "" && !s.t.retry && plainChunk(ev.data) {
		s.out.raw(ev.raw) // text: nothing to read, nothing to change
		return nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(ev.data, &top); err != nil {
		return fmt.Errorf("an upstream chunk is not understood, so its tool calls cannot be decided: %w", err)
	}
	if _, ok := top["error"]; ok {
		s.out.raw(ev.raw)
		return nil
	}
	var h head
	_ = json.Unmarshal(ev.data, &h)
	s.id, s.model = cmpOrStr(h.ID, s.id), cmpOrStr(h.Model, s.model)
	var choices []map[string]json.RawMessage
	if c, ok := top["choices"]; ok {
		if err := json.Unmarshal(c, &choices); err != nil {
			return fmt.Errorf("chunk choices: %w", err)
		}
	}
	s.envelope = map[string]json.RawMessage{}
	for k, v := range top {
		if k != "choices" && k != "usage" {
			s.envelope[k] = v
		}
	}
	if u := top["usage"]; s.t.retry && len(choices) == 0 && len(u) > 0 && string(u) != "null" {
		s.usage = sumUsage(s.usage, u) // sent by end
		return nil
	}
	changed, keep := false, len(choices) == 0
	for _, ch := range choices {
		var ci int
		_ = json.Unmarshal(ch["index"], &ci)
		st := s.choices[ci]
		if st == nil {
			st = &openAIStreamChoice{}
			s.choices[ci] = st
		}
		var delta map[string]json.RawMessage
		_ = json.Unmarshal(ch["delta"], &delta)
		if c, ok := delta["content"]; ok && s.t.retry && ci == 0 {
			var text *string
			_ = json.Unmarshal(c, &text)
			if text != nil && *text != "" {
				if s.t.keep(len(*text), s.out.maxHeld) {
					s.text.WriteString(*text)
				}
				if s.after {
					delta["content"] = mustJSON("\n\n" + *text)
					ch["delta"] = mustJSON(delta)
					changed, s.after = true, false
				}
			}
		}
		if tc, ok := delta["tool_calls"]; ok {
			var ds []openAIDelta
			if err := json.Unmarshal(tc, &ds); err != nil {
				return fmt.Errorf("chunk tool_calls: %w", err)
			}
			for _, d := range ds {
				if st.cur != nil && d.Index != st.cur.index {
					if err := s.complete(ci, st); err != nil {
						return err
					}
				}
				if st.cur == nil {
					st.cur = &openAIStreamCall{index: d.Index}
				}
				c := st.cur
				c.id = cmpOrStr(d.ID, c.id)
				c.typ = cmpOrStr(d.Type, c.typ)
				if d.Function != nil {
					if d.Function.Name != nil {
						c.name += *d.Function.Name
					}
					c.args = append(c.args, d.Function.Arguments...)
				}
				if len(c.args)+len(c.name) > s.out.maxHeld {
					return errHeldTooLong
				}
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
				s.chunk(ci, map[string]any{"content": "\n\n" + noteText(st.fixes)})
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

// complete decides the choice's current call and sends it or not.
func (s *openAIStream) complete(ci int, st *openAIStreamChoice) error {
	c := st.cur
	st.cur = nil
	tc := toolCall{id: c.id, name: c.name}
	tc.args, tc.raw = callArgs(string(c.args))
	withhold, fix := s.decide(s.id, s.model, tc)
	call := map[string]any{"id": c.id, "type": cmpOrStr(c.typ, "function"),
		"function": map[string]any{"name": c.name, "arguments": string(c.args)}}
	if s.t.retry && ci == 0 {
		raw := mustJSON(call)
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
	call["index"] = st.sent
	s.chunk(ci, map[string]any{"tool_calls": []any{call}})
	st.sent++
	return nil
}

// chunk sends a chunk of the stream's envelope with one choice's delta.
func (s *openAIStream) chunk(ci int, delta map[string]any) {
	top := make(map[string]any, len(s.envelope)+1)
	for k, v := range s.envelope {
		top[k] = v
	}
	top["choices"] = []any{map[string]any{"index": ci, "delta": delta, "finish_reason": nil}}
	s.out.event("", mustJSON(top))
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
	resp, err := openAIChat{}.parseResponse(mustJSON(top))
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
			s.chunk(ci, map[string]any{"content": "\n\n" + noteText(st.fixes)})
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

// plainChunk reports whether a chunk holds no tool call, no finish and
// no error: no "tool_calls" or "error" anywhere, and every
// "finish_reason" null. A chunk that only seems to (the words in its
// text) is read whole, which is right too.
func plainChunk(b []byte) bool {
	if bytes.Contains(b, []byte(`"tool_calls"`)) || bytes.Contains(b, []byte(`"error"`)) {
		return false
	}
	key := []byte(`"finish_reason"`)
	for {
		i := bytes.Index(b, key)
		if i < 0 {
			return true
		}
		b = bytes.TrimLeft(b[i+len(key):], " \t\r\n")
		if len(b) == 0 || b[0] != ':' {
			return false
		}
		b = bytes.TrimLeft(b[1:], " \t\r\n")
		if !bytes.HasPrefix(b, []byte("null")) {
			return false
		}
	}
}

func cmpOrStr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
