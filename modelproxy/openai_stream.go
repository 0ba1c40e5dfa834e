package modelproxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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
type openAIStream struct {
	out      *sink
	decide   streamDecider
	envelope map[string]json.RawMessage // the last chunk without choices and usage
	id       string
	model    string
	choices  map[int]*openAIStreamChoice
}

type openAIStreamChoice struct {
	cur            *openAIStreamCall
	sent, withheld int
	fixes          []string
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
		s.out.raw(ev.raw)
		return nil
	}
	if s.id != "" && plainChunk(ev.data) {
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
			if st.withheld > 0 {
				s.chunk(ci, map[string]any{"content": "\n\n" + noteText(st.fixes)})
				if st.sent == 0 && string(fin) == `"tool_calls"` {
					ch["finish_reason"] = mustJSON("stop")
					changed = true
				}
			}
			keep = true
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
	if withhold {
		st.withheld++
		st.fixes = append(st.fixes, fix)
		return nil
	}
	s.chunk(ci, map[string]any{"tool_calls": []any{map[string]any{
		"index": st.sent, "id": c.id, "type": cmpOrStr(c.typ, "function"),
		"function": map[string]any{"name": c.name, "arguments": string(c.args)},
	}}})
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
	cis := make([]int, 0, len(s.choices))
	for ci := range s.choices {
		cis = append(cis, ci)
	}
	slices.Sort(cis)
	for _, ci := range cis {
		if st := s.choices[ci]; st.cur != nil {
			if err := s.complete(ci, st); err != nil {
				return err
			}
		}
	}
	return nil
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
