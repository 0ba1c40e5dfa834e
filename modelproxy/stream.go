package modelproxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/toolaudit/toolaudit/registry/declared"
)

// DefaultMaxSSELine bounds one line of an upstream's event stream.
const DefaultMaxSSELine = 1 << 20

// sseEvent is one server-sent event as the upstream sent it: its bytes
// (blank line included), its event name and its data.
type sseEvent struct {
	raw   []byte
	event string
	data  []byte
}

var errLineTooLong = errors.New("an event stream line longer than the limit")

// readEvent reads the next event; io.EOF when the stream ended with
// none. A line longer than br's buffer is errLineTooLong.
func readEvent(br *bufio.Reader) (*sseEvent, error) {
	ev := &sseEvent{}
	var data [][]byte
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			return nil, errLineTooLong
		}
		if err != nil && (err != io.EOF || len(line) == 0) {
			if err == io.EOF && len(ev.raw) > 0 {
				break // a last event without its blank line
			}
			return nil, err
		}
		ev.raw = append(ev.raw, line...)
		l := bytes.TrimRight(line, "\r\n")
		if len(l) == 0 {
			if len(ev.raw) == len(line) { // blank lines between events
				ev.raw = ev.raw[:0]
				continue
			}
			break
		}
		name, value, _ := bytes.Cut(l, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			ev.event = string(value)
		case "data":
			data = append(data, bytes.Clone(value))
		}
		if err == io.EOF {
			break
		}
	}
	ev.data = bytes.Join(data, []byte("\n"))
	return ev, nil
}

// sink writes events to the client, flushing each at once: text passes
// through as it arrives.
type sink struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
	// maxHeld bounds what a stream holds of one tool call
	// (Limits.MaxResponseBytes).
	maxHeld   int
	unflushed bool
}

// errHeldTooLong ends a stream whose tool call grows past sink.maxHeld.
var errHeldTooLong = errors.New("a tool call longer than the limit (max_response_bytes); it cannot be decided and is not sent")

// raw writes b; it reaches the client at the next flush, which the
// stream's loop calls whenever it has read all the upstream has sent so
// far (and before waiting for a decision): events that came together
// leave together, and none waits for more.
func (s *sink) raw(b []byte) {
	if s.err != nil {
		return
	}
	_, s.err = s.w.Write(b)
	s.unflushed = true
}

func (s *sink) flush() {
	if s.err == nil && s.unflushed {
		s.err = s.rc.Flush()
		s.unflushed = false
	}
}

// event writes an event of name (none when "") with data.
func (s *sink) event(name string, data []byte) {
	var b []byte
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	s.raw(b)
}

// streamer turns an upstream's events into the client's: it passes
// text on as it comes, holds a tool call's events until the call is
// complete and decided, then releases or withholds them, keeping the
// stream valid for the SDKs (indexes, stop reasons).
type streamer interface {
	handle(ev *sseEvent) error
	// finish decides what is still held when the upstream's stream ends.
	finish() error
	// errorEvent is an error in the API's stream shape, which the SDKs
	// raise: the end of a stream whose calls cannot be decided.
	errorEvent(msg string) (name string, data []byte)
}

// streamDecider decides one streamed call and records it: whether it is
// withheld, and its fix text when rejected. Its error is the audit
// trail's: the stream then ends with an error event, the call unsent.
type streamDecider func(respID, model string, c toolCall) (withhold bool, fix string, err error)

// serveStream answers a streaming request: the upstream's event stream,
// its tool calls decided as they complete.
func (p *Proxy) serveStream(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, rest string, body []byte, req *request, decl *declared.Set) {
	a := rt.api
	up, err := p.forward(ctx, r, rt, rest, body)
	if err != nil {
		writeError(w, a, http.StatusBadGateway, "toolaudit: the upstream did not answer: "+err.Error())
		return
	}
	defer up.Body.Close()
	if up.StatusCode < 200 || up.StatusCode > 299 {
		copyHeader(w.Header(), up.Header)
		w.WriteHeader(up.StatusCode)
		_, _ = io.Copy(w, up.Body)
		return
	}
	if ct := up.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		writeError(w, a, http.StatusBadGateway, fmt.Sprintf("toolaudit: the upstream answered a streaming request with %q, not an event stream; its tool calls cannot be decided", ct))
		return
	}
	copyHeader(w.Header(), up.Header)
	w.Header().Set(HeaderVersion, decl.Version)
	w.WriteHeader(up.StatusCode)
	out := &sink{w: w, rc: http.NewResponseController(w), maxHeld: int(p.cfg.Limits.MaxResponseBytes)}
	block := rt.policy != Observe // retry is block when streaming
	decide := func(respID, model string, c toolCall) (bool, string, error) {
		out.flush() // the text before the call does not wait for its audit
		d, err := p.decide(ctx, rt, req, decl, respID, model, []toolCall{c})
		if err != nil {
			return false, "", fmt.Errorf("a tool call could not be recorded in the audit trail, so it is not sent: %w", err)
		}
		return block && d.rejected[0], d.fixes[0], nil
	}
	s := a.newStream(out, decide)
	if rs, ok := s.(*responsesStream); ok {
		rs.withheld = p.withheld.put // for a request continuing the response
	}
	br := bufio.NewReaderSize(up.Body, p.cfg.Limits.MaxSSELineBytes)
	fail := func(msg string) {
		p.log.Error("stream ended", "route", rt.Prefix, "err", msg)
		out.event(s.errorEvent("toolaudit: " + msg))
		out.flush()
	}
	defer out.flush()
	for out.err == nil {
		if br.Buffered() == 0 {
			out.flush()
		}
		ev, err := readEvent(br)
		if err == io.EOF {
			if err := s.finish(); err != nil {
				fail(err.Error())
			}
			return
		}
		if err != nil {
			fail("reading the upstream's event stream: " + err.Error() + "; the calls not yet sent cannot be decided")
			return
		}
		if err := s.handle(ev); err != nil {
			fail(err.Error())
			return
		}
	}
}

// withheldNote opens the note of the calls a response's stream withheld.
const withheldNote = "[toolaudit] Tool calls withheld: they do not resolve against the tools this request declared, and were not returned for execution."

func noteText(fixes []string) string {
	return withheldNote + "\n- " + strings.Join(fixes, "\n- ")
}
