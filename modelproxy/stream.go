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

	"github.com/toolaudit/toolaudit/audit"
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

// sseBuffer is what an event stream reader buffers of the upstream: a
// line longer than it is gathered piece by piece up to the line limit,
// so that a stream costs its lines, not the limit (a 1 MiB buffer per
// stream, allocated and cleared, was a tenth of the proxy's CPU at
// 1,000 streams a second: docs/performance.md §15).
const sseBuffer = 4 << 10

// sseReader reads an upstream's events, no line longer than max bytes
// (its '\n' included).
type sseReader struct {
	br   *bufio.Reader
	max  int
	long []byte // a line longer than br's buffer, gathered
	// idle, when set, is called before a read that waits for the
	// upstream: all it sent so far was read.
	idle func()
}

func newSSEReader(r io.Reader, max int) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, min(sseBuffer, max)), max: max}
}

// line is the next line, valid until the next call; errLineTooLong past
// max.
func (r *sseReader) line() ([]byte, error) {
	r.waiting()
	l, err := r.br.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		if len(l) > r.max {
			return nil, errLineTooLong
		}
		return l, err
	}
	r.long = append(r.long[:0], l...)
	for errors.Is(err, bufio.ErrBufferFull) {
		r.waiting()
		l, err = r.br.ReadSlice('\n')
		if len(r.long)+len(l) > r.max {
			return nil, errLineTooLong
		}
		r.long = append(r.long, l...)
	}
	return r.long, err
}

func (r *sseReader) waiting() {
	if r.idle != nil && r.br.Buffered() == 0 {
		r.idle()
	}
}

// next reads the next event; io.EOF when the stream ended with none.
func (r *sseReader) next() (*sseEvent, error) {
	ev := &sseEvent{}
	var data [][]byte
	for {
		line, err := r.line()
		if errors.Is(err, errLineTooLong) {
			return nil, err
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

// sink writes events to the client, flushing each at once (text passes
// through as it arrives) but what follows a decided call: that is held
// until the call's decision is recorded. The decisions made since the
// last flush are recorded together at the next one, so that the calls
// of a response that arrive together cost one acknowledgement, not one
// each in turn.
type sink struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error
	// maxHeld bounds what a stream holds of one tool call
	// (Limits.MaxResponseBytes).
	maxHeld   int
	unflushed bool
	// record records decisions, acknowledged (callpath.Step.Record).
	record func([]*audit.Record) error
	// pending are the decisions not yet recorded; held is what was
	// written since the first of them.
	pending []*audit.Record
	held    []byte
	// unrecorded is record's error: the stream then ends with an error
	// event, held and what follows never sent.
	unrecorded error
}

// errHeldTooLong ends a stream whose tool call grows past sink.maxHeld.
var errHeldTooLong = errors.New("a tool call longer than the limit (max_response_bytes); it cannot be decided and is not sent")

// raw writes b; it reaches the client at the next flush, which the
// stream's loop calls whenever it has read all the upstream has sent so
// far: events that came together leave together, and none waits for
// more.
func (s *sink) raw(b []byte) {
	switch {
	case s.err != nil || s.unrecorded != nil:
	case len(s.pending) > 0:
		s.held = append(s.held, b...)
	default:
		_, s.err = s.w.Write(b)
		s.unflushed = true
	}
}

// decided adds a call's decision records: what is written from now on
// waits until they are recorded, at the next flush.
func (s *sink) decided(recs ...*audit.Record) {
	if len(s.pending) == 0 {
		s.flush() // the text before the call does not wait for its audit
	}
	s.pending = append(s.pending, recs...)
}

// flush records the pending decisions, then sends what was written.
func (s *sink) flush() {
	if len(s.pending) > 0 && s.err == nil && s.unrecorded == nil {
		if err := s.record(s.pending); err != nil {
			s.unrecorded = fmt.Errorf("a tool call could not be recorded in the audit trail, so it is not sent: %w", err)
			s.pending, s.held = nil, nil
			return
		}
		clear(s.pending)
		s.pending = s.pending[:0]
		_, s.err = s.w.Write(s.held)
		s.held = s.held[:0]
		s.unflushed = true
	}
	if s.err == nil && s.unflushed {
		s.err = s.rc.Flush()
		s.unflushed = false
	}
}

// end sends the error event (name, data) that ends a stream, dropping
// what is held: the calls of decisions not recorded are never sent.
func (s *sink) end(name string, data []byte) {
	s.pending, s.held, s.unrecorded = nil, nil, nil
	s.event(name, data)
	s.flush()
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

// streamDecider decides one streamed call: whether it is withheld, and
// its fix text when rejected. The decision is recorded before anything
// written after it reaches the client (sink.decided).
type streamDecider func(respID, model string, c toolCall) (withhold bool, fix string)

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
	step := p.steps[rt.policy]
	out := &sink{w: w, rc: http.NewResponseController(w), maxHeld: int(p.cfg.Limits.MaxResponseBytes),
		record: func(recs []*audit.Record) error { return step.Record(ctx, recs...) }}
	block := rt.policy != Observe // retry is block when streaming
	decide := func(respID, model string, c toolCall) (bool, string) {
		d, recs := p.decideUnrecorded(ctx, rt, req, decl, respID, model, []toolCall{c})
		out.decided(recs...)
		return block && d.rejected[0], d.fixes[0]
	}
	s := a.newStream(out, decide)
	if rs, ok := s.(*responsesStream); ok {
		rs.withheld = p.withheld.put // for a request continuing the response
	}
	sr := newSSEReader(up.Body, p.cfg.Limits.MaxSSELineBytes)
	sr.idle = out.flush // before the proxy waits for the upstream
	fail := func(msg string) {
		p.log.Error("stream ended", "route", rt.Prefix, "err", msg)
		out.end(s.errorEvent("toolaudit: " + msg))
	}
	for {
		ev, err := sr.next()
		switch {
		case out.unrecorded != nil:
			fail(out.unrecorded.Error())
			return
		case out.err != nil:
			return // the client is gone
		case err == io.EOF:
			if err := s.finish(); err != nil {
				fail(err.Error())
				return
			}
			if out.flush(); out.unrecorded != nil {
				fail(out.unrecorded.Error())
			}
			return
		case err != nil:
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
