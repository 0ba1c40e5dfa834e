package modelproxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

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
	named bool // an event line was there (event: with no value names "")
	data  []byte
}

var (
	errLineTooLong = errors.New("an event stream line longer than the limit")
	errBareCR      = errors.New("an event stream line holding a carriage return not before its line feed")
	errEventTooBig = errors.New("an event stream event larger than the limit (max_response_bytes)")
	errBOM         = errors.New("an event stream line starting with a byte order mark")
)

// sseBuffer is what an event stream reader buffers of the upstream: a
// line longer than it is gathered piece by piece up to the line limit,
// so that a stream costs its lines, not the limit (a 1 MiB buffer per
// stream, allocated and cleared, was a tenth of the proxy's CPU at
// 1,000 streams a second: docs/performance.md §15).
const sseBuffer = 4 << 10

// sseReader reads an upstream's events, no line longer than max bytes
// (its '\n' included) and no event (its lines, comments included) longer
// than maxEvent.
type sseReader struct {
	br       *bufio.Reader
	max      int
	maxEvent int
	long     []byte // a line longer than br's buffer, gathered
	// idle, when set, is called before a read that waits for the
	// upstream: all it sent so far was read.
	idle func()
}

func newSSEReader(r io.Reader, max, maxEvent int) *sseReader {
	size := min(sseBuffer, max)
	br, _ := sseBuffers.Get().(*bufio.Reader)
	if br == nil || br.Size() != size {
		br = bufio.NewReaderSize(nil, size)
	}
	br.Reset(r)
	return &sseReader{br: br, max: max, maxEvent: maxEvent}
}

// sseBuffers are the buffers of streams that ended: a stream costs its
// events, not a buffer of its own too.
var sseBuffers sync.Pool

// close gives the reader's buffer to the next stream; r is not used
// again.
func (r *sseReader) close() {
	r.br.Reset(nil) // the upstream's body is not kept
	sseBuffers.Put(r.br)
	r.br = nil
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
//
// An event's data is a view of its raw bytes when it has one data line
// (as the APIs send them all), a copy joining its lines otherwise.
func (r *sseReader) next() (*sseEvent, error) {
	ev := &sseEvent{}
	var data [][]byte // of more than one data line, all of them
	at0, n0 := -1, 0  // the first data line's value, in ev.raw
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
		if len(ev.raw)+len(line) > r.maxEvent {
			return nil, errEventTooBig
		}
		if ev.raw == nil {
			ev.raw = make([]byte, 0, len(line)+2) // and the blank line after it
		}
		at := len(ev.raw)
		ev.raw = append(ev.raw, line...)
		line = ev.raw[at:] // what is read of it is a view of ev.raw
		l := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if bytes.IndexByte(l, '\r') >= 0 {
			// The SDKs end a line at a lone CR too: they would read other
			// lines, and other events, than this reader.
			return nil, errBareCR
		}
		if bytes.HasPrefix(l, []byte("\uFEFF")) {
			// The JS SDKs drop it from every line, other readers keep it:
			// a field the proxy would not see is refused instead.
			return nil, errBOM
		}
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
			ev.event, ev.named = string(value), true
		case "data":
			switch {
			case at0 < 0 && value == nil: // "data" alone: an empty line of data
				at0 = at
			case at0 < 0:
				at0, n0 = at+cap(line)-cap(value), len(value) // value is a view of line
			case data == nil:
				data = [][]byte{ev.raw[at0 : at0+n0], value}
			default:
				data = append(data, value)
			}
		}
		if err == io.EOF {
			break
		}
	}
	switch {
	case data != nil:
		ev.data = bytes.Join(data, []byte("\n"))
	case at0 >= 0:
		ev.data = ev.raw[at0 : at0+n0 : at0+n0] // appending to it does not touch ev.raw
	default:
		ev.data = []byte{}
	}
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
	// unrecorded is record's error (or stop's): the stream then ends with
	// an error event, held and what follows never sent.
	unrecorded error
	// scratch is where an event is built before raw copies it.
	scratch []byte
}

// errHeldTooLong ends a stream whose tool call grows past sink.maxHeld,
// errStreamCalls one whose calls do, in all.
var (
	errHeldTooLong = errors.New("a tool call longer than the limit (max_response_bytes); it cannot be decided and is not sent")
	errStreamCalls = errors.New("tool calls larger in all than the limit (max_response_bytes); the calls past it cannot be decided and are not sent")
)

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
	s.commit()
	if s.err == nil && s.unflushed {
		s.err = s.rc.Flush()
		s.unflushed = false
	}
}

// commit records the pending decisions, then writes what they held. It
// reaches the client at the next flush, or when the handler returns:
// net/http then sends it with the end of the response (the last chunk,
// the trailers) in one write, not two.
func (s *sink) commit() {
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
}

// stop ends the stream at the proxy's next read with err's error event:
// the decisions made so far are recorded and what they hold is sent
// first, what follows is not.
func (s *sink) stop(err error) {
	s.flush()
	if s.unrecorded == nil {
		s.unrecorded = err
	}
}

// end sends the error event (name, data) that ends a stream, dropping
// what is held: the calls of decisions not yet sent are never sent, but
// their decisions are recorded when the audit trail takes them (a call
// rejected stays in the trail however its stream ended).
func (s *sink) end(name string, data []byte) {
	if len(s.pending) > 0 && s.unrecorded == nil {
		_ = s.record(s.pending) // failing, the stream ends all the same
	}
	s.pending, s.held, s.unrecorded = nil, nil, nil
	s.event(name, data)
	s.flush()
}

// event writes an event of name (none when "") with data.
func (s *sink) event(name string, data []byte) {
	b := s.scratch[:0]
	if name != "" {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	s.raw(b) // a copy: held, or the writer's (which keeps none)
	if cap(b) <= sseBuffer {
		s.scratch = b
	}
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
	// release frees what the stream parsed with; called when it ended.
	release()
}

// streamDecider decides one streamed call: whether it is withheld, and
// its fix text when rejected. The decision is recorded before anything
// written after it reaches the client (sink.decided).
type streamDecider func(respID, model string, c toolCall) (withhold bool, fix string)

// repairStream is a streamer a retry can continue: it holds the end of
// each attempt's stream (the finish, the usage, the last event) so that
// the stream of a repair request can follow in the client's stream, as
// one answer.
type repairStream interface {
	streamer
	// retrying makes the stream hold its end; called before the first
	// event.
	retrying()
	// turn is the attempt's model turn as a response, for its repair
	// request, its calls' decisions (t), and whether it is to be
	// repaired: it ended with calls withheld, in one model turn. An
	// error: the turn cannot be rebuilt.
	turn() (resp response, t *streamTurn, repair bool, err error)
	// again begins the next attempt, the stream of the repair request.
	again()
	// end sends what the last attempt's stream held: the note of its
	// withheld calls, its finish, the usage summed over every attempt,
	// the stream's last event. An error: that end cannot be rebuilt.
	end() error
}

// streamTurn is what a stream under retry keeps of one attempt: its
// calls' decisions, for the repair request; and the calls sent
// to the client in any attempt, of which a repeat is dropped (no call
// runs twice).
//
// What is kept of an attempt's turn is bounded as a response is
// (Limits.MaxResponseBytes): a turn longer than that, or one that cannot
// be rebuilt, is lost: answered as under block, not repaired.
type streamTurn struct {
	retry    bool
	rejected []bool
	fixes    []string
	sent     []toolCall
	earlier  int  // of sent, those of earlier attempts
	size     int  // bytes of the turn kept
	lost     bool // not kept whole: not repaired
}

// keep counts n more bytes of the turn against max; false once the
// turn is past it.
func (t *streamTurn) keep(n, max int) bool {
	if !t.lost {
		t.size += n
		t.lost = t.size > max
	}
	return !t.lost
}

// decided notes a call's decision; it reports whether the call is to be
// sent: withheld or a repeat of one sent, it is not.
func (t *streamTurn) decided(c toolCall, withhold bool, fix string) bool {
	if !t.retry {
		return !withhold
	}
	t.rejected = append(t.rejected, withhold)
	t.fixes = append(t.fixes, fix)
	// A repeat is of a call an earlier attempt sent (the repair asking
	// again for one kept): the calls of one turn, or of a response's
	// several choices, are the model's own.
	if withhold || repeats(c, t.sent[:t.earlier]) {
		return false
	}
	t.sent = append(t.sent, c)
	return true
}

// withheld reports whether the attempt withheld a call.
func (t *streamTurn) withheld() bool { return slices.Contains(t.rejected, true) }

// again forgets the attempt's calls (not those sent).
func (t *streamTurn) again() {
	t.rejected, t.fixes, t.size, t.lost, t.earlier = nil, nil, 0, false, len(t.sent)
}

// serveStream answers a streaming request: the upstream's event stream,
// its tool calls decided as they complete. Under retry a stream whose
// calls are withheld is continued by the stream of a repair request (the
// conversation so far, the attempt's turn, a tool result per call, as
// retry sends it), up to the route's retries within its retry deadline:
// the client reads one stream, the attempts' text and the calls that
// resolve, the finish and usage (summed) of the whole.
func (p *Proxy) serveStream(ctx context.Context, w http.ResponseWriter, r *http.Request, rt *Route, rest string, body []byte, req *request, decl *declared.Set) {
	a := rt.api
	up, err := p.forward(ctx, r, rt, rest, body)
	if err != nil {
		writeError(w, a, http.StatusBadGateway, "toolaudit: the upstream did not answer: "+err.Error())
		return
	}
	defer func() { up.Body.Close() }()
	if up.StatusCode < 200 || up.StatusCode > 299 {
		copyHeader(w.Header(), up.Header)
		w.WriteHeader(up.StatusCode)
		_, _ = io.Copy(w, up.Body)
		return
	}
	if !eventStream(up) {
		writeError(w, a, http.StatusBadGateway, fmt.Sprintf("toolaudit: the upstream answered a streaming request with %q, not an event stream; its tool calls cannot be decided", up.Header.Get("Content-Type")))
		return
	}
	h := w.Header()
	copyHeader(h, up.Header)
	h.Set(HeaderVersion, decl.Version)
	// What is decided comes after the headers: the trailers say it.
	h.Set("Trailer", strings.Join([]string{HeaderCalls, HeaderRejected, HeaderWithheld, HeaderRetries}, ", "))
	w.WriteHeader(up.StatusCode)
	step := p.steps[rt.policy]
	out := &sink{w: w, rc: http.NewResponseController(w), maxHeld: int(p.cfg.Limits.MaxResponseBytes),
		record: func(recs []*audit.Record) error { return step.Record(ctx, recs...) }}
	var st retryStats
	actx := newAttempt(ctx)
	block := rt.policy != Observe // a retry withholds what it cannot repair
	var decided int
	decide := func(respID, model string, c toolCall) (bool, string) {
		// A stream's calls, in all, are bounded as a response's are: what
		// the proxy keeps of them (ids, notes, the audit's records) stays
		// within max_response_bytes however long the stream.
		if decided += len(c.id) + len(c.name) + len(c.args); c.raw != nil {
			decided += len(*c.raw)
		}
		if decided > out.maxHeld {
			out.stop(errStreamCalls)
			return true, ""
		}
		d, recs := p.decideUnrecorded(actx, rt, req, decl, respID, model, []toolCall{c})
		out.decided(recs...)
		st.calls++
		if d.rejected[0] {
			st.rejected++
			if block {
				st.withheld = append(st.withheld, c.id)
			}
		}
		return block && d.rejected[0], d.fixes[0]
	}
	s := a.newStream(out, decide)
	defer s.release()
	if rs, ok := s.(*responsesStream); ok {
		scope := withheldScope(rt, r.Header)
		rs.withheld = func(id string, items []json.RawMessage) { p.withheld.put(scope, id, items) } // for a request continuing the response
	}
	rs, retrying := s.(repairStream)
	retrying = retrying && rt.policy == Retry
	if retrying {
		rs.retrying()
	}
	defer func() {
		h.Set(HeaderCalls, strconv.Itoa(st.calls))
		h.Set(HeaderRejected, strconv.Itoa(st.rejected))
		h.Set(HeaderWithheld, strings.Join(st.withheld, ","))
		if rt.policy == Retry {
			h.Set(HeaderRetries, strconv.Itoa(st.retries))
		}
	}()
	var dctx context.Context
	for {
		if !p.pipe(rt, s, out, up.Body) || !retrying {
			return
		}
		resp, t, repair, err := rs.turn()
		if repair && t.lost {
			p.log.Warn("a streamed turn not kept whole (longer than max_response_bytes, or out of order) is not repaired: block answer", "route", rt.Prefix)
			repair = false
		}
		if repair && err == nil && dctx == nil {
			var cancel context.CancelFunc
			dctx, cancel = context.WithTimeout(ctx, rt.retryDeadline)
			defer cancel()
		}
		var next []byte
		if repair && err == nil && st.retries < rt.Retries && dctx.Err() == nil {
			next, err = resp.repair(body, repairResults(t.rejected, t.fixes), t.rejected)
		}
		if !repair || next == nil || err != nil {
			if err != nil {
				p.log.Warn("repair request not built: block answer", "route", rt.Prefix, "err", err)
			}
			p.endStream(rt, rs, out)
			return
		}
		out.flush() // what the attempt passed on does not wait for the next
		nu, err := p.forward(dctx, r, rt, rest, next)
		switch {
		case err != nil:
		case nu.StatusCode < 200 || nu.StatusCode > 299:
			err = fmt.Errorf("upstream answered %d", nu.StatusCode)
		case !eventStream(nu):
			err = fmt.Errorf("upstream answered %q, not an event stream", nu.Header.Get("Content-Type"))
		}
		if err != nil {
			if nu != nil {
				nu.Body.Close()
			}
			p.log.Warn("repair request failed: block answer", "route", rt.Prefix, "attempt", st.retries+1, "err", err)
			p.endStream(rt, rs, out)
			return
		}
		up.Body.Close()
		up, body = nu, next
		st.retries++
		st.withheld = st.withheld[:0]
		actx = newAttempt(ctx)
		rs.again()
	}
}

// endStream sends the last attempt's held end and what is pending.
func (p *Proxy) endStream(rt *Route, rs repairStream, out *sink) {
	if err := rs.end(); err != nil {
		p.failStream(rt, rs, out, err.Error())
		return
	}
	p.flushEnd(rt, rs, out)
}

func eventStream(up *http.Response) bool {
	return strings.HasPrefix(up.Header.Get("Content-Type"), "text/event-stream")
}

// pipe reads one attempt's upstream stream to its end into s; false when
// the stream was ended (an error event) or the client is gone.
func (p *Proxy) pipe(rt *Route, s streamer, out *sink, body io.Reader) bool {
	sr := newSSEReader(body, p.cfg.Limits.MaxSSELineBytes, int(p.cfg.Limits.MaxResponseBytes))
	defer sr.close()
	sr.idle = out.flush // before the proxy waits for the upstream
	for {
		ev, err := sr.next()
		switch {
		case out.unrecorded != nil:
			p.failStream(rt, s, out, out.unrecorded.Error())
			return false
		case out.err != nil:
			return false // the client is gone
		case err == io.EOF:
			if err := s.finish(); err != nil {
				p.failStream(rt, s, out, err.Error())
				return false
			}
			return p.flushEnd(rt, s, out)
		case err != nil:
			p.failStream(rt, s, out, "reading the upstream's event stream: "+err.Error()+"; the calls not yet sent cannot be decided")
			return false
		}
		if err := s.handle(ev); err != nil {
			p.failStream(rt, s, out, err.Error())
			return false
		}
	}
}

// flushEnd records what is pending and writes what is held, sent when
// the handler returns or, before a repair request, by its flush; false
// when the decisions could not be recorded (the stream is then ended) or
// the client is gone.
func (p *Proxy) flushEnd(rt *Route, s streamer, out *sink) bool {
	if out.commit(); out.unrecorded != nil {
		p.failStream(rt, s, out, out.unrecorded.Error())
		return false
	}
	return out.err == nil
}

// failStream ends the stream with an error event in the API's shape.
func (p *Proxy) failStream(rt *Route, s streamer, out *sink, msg string) {
	p.log.Error("stream ended", "route", rt.Prefix, "err", msg)
	out.end(s.errorEvent("toolaudit: " + msg))
}

// withheldNote opens the note of the calls a response's stream withheld.
const withheldNote = "[toolaudit] Tool calls withheld: they do not resolve against the tools this request declared, and were not returned for execution."

func noteText(fixes []string) string {
	return withheldNote + "\n- " + strings.Join(fixes, "\n- ")
}
