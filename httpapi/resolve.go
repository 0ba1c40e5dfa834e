package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/httpapi/apierror"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// work is one request's state, reused across requests (sync.Pool).
type work struct {
	body  []byte
	elems [][]byte
	dec   schema.CallDecoder
	call  schema.Call
	recs  []audit.Record
	ptrs  []*audit.Record
	hints []suggest.Hints
	out   []byte
}

func newWork() *work { return &work{body: make([]byte, 0, 4096), out: make([]byte, 0, 1024)} }

// reset drops what the request referenced, keeping the buffers (a body or
// an answer beyond 256 KiB is dropped, so that one large request does not
// pin its memory in the pool).
func (wk *work) reset() {
	if cap(wk.body) > 256<<10 {
		wk.body = nil
	}
	if cap(wk.out) > 256<<10 {
		wk.out = nil
	}
	clear(wk.elems)
	wk.elems = wk.elems[:0]
	clear(wk.recs)
	clear(wk.hints)
	wk.call = schema.Call{}
}

// params are a request's query parameters.
type params struct {
	mode   resolve.Mode
	action schema.Action
}

// parseParams reads ?mode= and ?action=; any other parameter is refused
// (a misspelt one must not silently change nothing).
func (h *handler) parseParams(raw string) (params, error) {
	p := params{mode: h.cfg.Resolver.Mode}
	if raw == "" {
		return p, nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return p, fmt.Errorf("query: %w", err)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return p, fmt.Errorf("query parameter %s given %d times", k, len(vs))
		}
		switch k {
		case "mode":
			if p.mode, err = resolve.ParseMode(vs[0]); err != nil {
				return p, err
			}
		case "action":
			if p.action, err = audit.ParseAction(vs[0]); err != nil {
				return p, err
			}
		default:
			return p, fmt.Errorf("unknown query parameter %q (mode and action are known)", k)
		}
	}
	return p, nil
}

// resolve serves POST /v1/resolve.
func (h *handler) resolve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status, code := h.serve(w, r)
	h.answered.WithLabelValues(strconv.Itoa(status), code).Inc()
	if status == http.StatusOK {
		h.latency.Observe(time.Since(start).Seconds())
	}
}

// fail answers an error and returns what resolve counts.
func fail(w http.ResponseWriter, status int, code, message string) (int, string) {
	apierror.Write(w, status, code, message)
	return status, code
}

func (h *handler) serve(w http.ResponseWriter, r *http.Request) (int, string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return fail(w, http.StatusMethodNotAllowed, codeMethod, r.Method+" is not allowed: POST a call event or an array of them")
	}
	p, err := h.parseParams(r.URL.RawQuery)
	if err != nil {
		return fail(w, http.StatusBadRequest, codeBadRequest, err.Error())
	}
	if h.cfg.Decides != nil {
		if err := h.cfg.Decides(); err != nil {
			return fail(w, http.StatusServiceUnavailable, codeNotReady, "no verdict from a partial registry: "+err.Error())
		}
	}
	maxBody := h.cfg.MaxBody
	if r.ContentLength > maxBody {
		return fail(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("body of %d bytes: at most %d", r.ContentLength, maxBody))
	}
	// Bounded work in flight: beyond it, answer at once rather than queue
	// (a queue would hold connections and memory for clients that gave up).
	if !h.requests.TryAcquire(1) {
		return fail(w, http.StatusServiceUnavailable, codeOverloaded, fmt.Sprintf("more than %d requests in flight; retry", h.cfg.MaxInFlight))
	}
	defer h.requests.Release(1)
	reserve := r.ContentLength
	if reserve < 0 {
		reserve = maxBody // unknown length (chunked): it may use the limit
	}
	reserve = max(reserve, 1)
	if !h.bytes.TryAcquire(reserve) {
		return fail(w, http.StatusServiceUnavailable, codeOverloaded, fmt.Sprintf("more than %d body bytes in flight; retry", h.cfg.MaxInFlightBytes))
	}
	defer h.bytes.Release(reserve)

	wk := h.work.Get().(*work)
	defer func() { wk.reset(); h.work.Put(wk) }()
	body, err := readAll(http.MaxBytesReader(w, r.Body, maxBody), wk.body[:0])
	wk.body = body
	if err != nil {
		var tooBig *http.MaxBytesError
		var ne net.Error
		switch {
		case errors.As(err, &tooBig):
			return fail(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("body larger than %d bytes", maxBody))
		case errors.As(err, &ne) && ne.Timeout():
			return fail(w, http.StatusRequestTimeout, codeTimeout, "the body did not arrive within the read timeout")
		}
		return fail(w, http.StatusBadRequest, codeBadRequest, "cannot read the body: "+err.Error())
	}
	trimmed := bytes.TrimSpace(body)
	batch := false
	switch {
	case len(trimmed) == 0:
		return fail(w, http.StatusBadRequest, codeBadRequest, "empty body: send a call event (a JSON object) or an array of them")
	case trimmed[0] == '{':
		wk.elems = append(wk.elems[:0], trimmed)
	case trimmed[0] == '[':
		batch = true
		if wk.elems, err = splitArray(trimmed, h.cfg.MaxBatch, wk.elems[:0]); err != nil {
			if errors.Is(err, errTooMany) {
				return fail(w, http.StatusRequestEntityTooLarge, codeTooLarge, fmt.Sprintf("more than %d call events in one request", h.cfg.MaxBatch))
			}
			return fail(w, http.StatusBadRequest, codeBadRequest, "the body is not an array of call events: "+err.Error())
		}
	default:
		return fail(w, http.StatusBadRequest, codeBadRequest, "the body is neither a call event (a JSON object) nor an array of them")
	}

	h.decide(wk, p)
	if err := h.step.Record(callpath.ContinueHTTP(r.Context(), r.Header), wk.ptrs...); err != nil {
		if ok, n := h.logEvery.Allow(); ok {
			h.cfg.Logger.Warn("decisions not answered: the audit trail did not take them", "calls", len(wk.ptrs), "err", err, "suppressed", n)
		}
		return fail(w, http.StatusServiceUnavailable, codeAuditDown,
			"the decision could not be recorded in the audit trail, so it is not answered (fail closed); retry")
	}
	out := wk.out[:0]
	if batch {
		out = append(out, '[')
	}
	for i := range wk.ptrs {
		if i > 0 {
			out = append(out, ',')
		}
		out = callpath.AppendAnswer(out, wk.ptrs[i], &wk.hints[i])
	}
	if batch {
		out = append(out, ']')
	}
	wk.out = append(out, '\n')
	w.Header().Set("Content-Type", contentTypeJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.Write(wk.out)
	for _, rec := range wk.ptrs {
		h.decided.WithLabelValues(string(rec.Decision.Class), string(rec.Decision.Verdict)).Inc()
	}
	return http.StatusOK, ""
}

// decide decides every call of the request into wk.recs, with hints,
// under the request's mode and action.
func (h *handler) decide(wk *work, p params) {
	n := len(wk.elems)
	if cap(wk.recs) < n {
		wk.recs = make([]audit.Record, n)
		wk.hints = make([]suggest.Hints, n)
	}
	wk.recs, wk.hints = wk.recs[:n], wk.hints[:n]
	wk.ptrs = wk.ptrs[:0]
	vs := h.cfg.Store.Snapshot()
	st := h.step
	// The stamp is the resolver's (resolve.Resolver.Policy), as the
	// stream's, re-analysis', check's and the gateway's: the request's
	// mode with the daemon's formats and approvals policy.
	st.Resolver.Mode, st.Action = p.mode, p.action
	st.PolicyVersion = st.Resolver.Policy()
	for i, e := range wk.elems {
		rec := &wk.recs[i]
		st.Decide(vs, &wk.dec, e, &wk.call, rec)
		// Hints read the call, which the next Decide replaces.
		wk.hints[i] = st.Hint(vs, &wk.call, rec)
		wk.ptrs = append(wk.ptrs, rec)
	}
}

func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
