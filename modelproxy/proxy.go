package modelproxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry/declared"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Proxy.
type Options struct {
	Config Config // validated (ParseConfig, Config.Validate)
	// Audit records every decision before its response is answered
	// (*audit.Kafka); nil: none (development only).
	Audit audit.Producer
	// Hints computes the hints of rejections (suggest.New()); nil: none.
	Hints callpath.Hinter
	// ResolverBuild stamps every decision.
	ResolverBuild string
	// Tracer, when set, emits a span per decision in the caller's trace
	// (the request's traceparent; package callpath); nil: none.
	Tracer trace.Tracer
	// Transport reaches the upstreams; nil: http.DefaultTransport's
	// settings with DefaultIdleConns idle connections kept.
	Transport http.RoundTripper
	Logger    *slog.Logger
	// DeclaredSets bounds the declared tool sets kept compiled;
	// 0: declared.DefaultSets.
	DeclaredSets int
}

// DefaultWithheldResponses is how many Responses answers' withheld calls
// the proxy remembers, to give their outputs when a request continues
// one (previous_response_id).
const DefaultWithheldResponses = 10000

// Response headers the proxy adds to a decided response.
const (
	HeaderCalls    = "Toolaudit-Calls"    // tool calls decided
	HeaderRejected = "Toolaudit-Rejected" // of which rejected
	// HeaderWithheld lists the ids of the calls withheld (block),
	// comma-separated.
	HeaderWithheld = "Toolaudit-Withheld"
	// HeaderVersion is the registry version of the declared tools.
	HeaderVersion = "Toolaudit-Registry-Version"
	// HeaderRetries is how many repair requests the proxy sent (retry).
	HeaderRetries = "Toolaudit-Retries"
)

// Proxy is the model API proxy: an http.Handler.
type Proxy struct {
	cfg      Config
	routes   []*Route // longest prefix first
	client   *http.Client
	log      *slog.Logger
	declared *declared.Cache
	steps    map[Policy]*callpath.Step // the step of each policy: its action
	ids      atomic.Uint64
	// withheld are the outputs the proxy supplies for the calls it
	// withheld from Responses answers (withheldOutputs).
	withheld *withheldOutputs
	idPrefix string
}

// New returns a Proxy.
func New(o Options) (*Proxy, error) {
	cfg := o.Config
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	mode, err := resolve.ParseMode(cfg.Mode)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// A route has one upstream host: the default 2 idle connections
		// per host would close and redial most connections at a fleet's
		// rate (docs/performance.md §15).
		t.MaxIdleConns, t.MaxIdleConnsPerHost = DefaultIdleConns, DefaultIdleConns
		tr = t
	}
	res := resolve.Resolver{Mode: mode, Formats: cfg.Formats == "assert"}
	step := callpath.Step{Resolver: res, Hints: o.Hints, Audit: o.Audit, Source: schema.SourceModelProxy,
		ResolverBuild: o.ResolverBuild, PolicyVersion: res.Policy(), Tracer: o.Tracer}
	observe, block := step, step
	observe.Action, block.Action = schema.ActionObserved, schema.ActionEnforced
	p := &Proxy{
		cfg: cfg, log: log,
		client:   &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		declared: declared.NewCache(o.DeclaredSets, signature.Options{Formats: cfg.Formats == "assert"}),
		steps:    map[Policy]*callpath.Step{Observe: &observe, Block: &block, Retry: &block},
		idPrefix: "mp-" + strconv.FormatInt(time.Now().UnixMilli(), 36) + "-",
		withheld: &withheldOutputs{max: DefaultWithheldResponses},
	}
	for i := range cfg.Routes {
		p.routes = append(p.routes, &cfg.Routes[i])
	}
	slices.SortFunc(p.routes, func(a, b *Route) int { return len(b.Prefix) - len(a.Prefix) })
	return p, nil
}

// route is the route of path and the rest of the path, or nil.
func (p *Proxy) route(path string) (*Route, string) {
	for _, r := range p.routes {
		if rest, ok := strings.CutPrefix(path, r.Prefix); ok && (rest == "" || rest[0] == '/') {
			return r, rest
		}
	}
	return nil, ""
}

// ServeHTTP answers one request of a model API's client.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r = r.WithContext(withRequestTrace(callpath.ContinueHTTP(r.Context(), r.Header)))
	rt, rest := p.route(r.URL.Path)
	if rt == nil {
		writeError(w, openAIChat{}, http.StatusNotFound, "no route of this proxy serves "+strconv.Quote(r.URL.Path))
		return
	}
	var a api
	var served []string
	for _, x := range rt.apis {
		if x.decided(r.Method, rest) {
			a = x
			break
		}
		served = append(served, x.endpoint())
	}
	if a == nil {
		// Fail closed: what the proxy does not decide (another endpoint,
		// which may return tool calls too) is not passed on undecided.
		writeError(w, rt.apis[0], http.StatusNotFound, fmt.Sprintf("toolaudit: this route serves only %s, whose tool calls it decides, not %s %s", strings.Join(served, " and "), r.Method, rest))
		return
	}
	perRequest := *rt
	perRequest.api = a
	c, err := rt.client(r.Header)
	if err != nil {
		writeError(w, a, http.StatusBadRequest, "toolaudit: "+err.Error())
		return
	}
	if c != nil {
		perRequest.Registry, perRequest.Agent = c.Registry, c.Agent
	}
	rt = &perRequest
	if rt.Registry == "" {
		writeError(w, a, http.StatusForbidden, "toolaudit: this route decides the calls of the clients it lists only, and the request's credential is not one of them")
		return
	}
	body, err := readAll(http.MaxBytesReader(w, r.Body, p.cfg.Limits.MaxRequestBytes), r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, a, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body larger than %d bytes", p.cfg.Limits.MaxRequestBytes))
			return
		}
		writeError(w, a, http.StatusBadRequest, "reading the request body: "+err.Error())
		return
	}
	req, err := parseStrict(body, func(v jsontape.Value) (*request, error) { return a.parseRequest(v, p.cfg.Limits.MaxTools) })
	if err != nil {
		writeError(w, a, http.StatusBadRequest, "toolaudit: "+err.Error())
		return
	}
	decl, err := p.declared.Get(rt.Registry, req.tools)
	if err != nil {
		writeError(w, a, http.StatusBadRequest, "toolaudit: "+err.Error())
		return
	}
	for _, is := range decl.Issues {
		p.log.Warn("declared tool not usable: its calls are rejected", "route", rt.Prefix, "issue", is.String())
	}

	if req.previous != "" {
		if body, err = p.withheld.continued(withheldScope(rt, r.Header), req.previous, body); err != nil {
			writeError(w, a, http.StatusBadRequest, "toolaudit: "+err.Error())
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), p.cfg.Limits.upstreamTimeout)
	defer cancel()
	if req.stream {
		p.serveStream(ctx, w, r, rt, rest, body, req, decl)
		return
	}
	at, status, msg := p.exchange(ctx, r, rt, rest, body)
	if msg != "" {
		writeError(w, a, status, msg)
		return
	}
	if at.up != nil {
		// An upstream error passes through as it is: it holds no call.
		defer at.up.Body.Close()
		copyHeader(w.Header(), at.up.Header)
		w.WriteHeader(at.up.StatusCode)
		_, _ = io.Copy(w, at.up.Body)
		return
	}
	copyHeader(w.Header(), at.header)
	calls := at.resp.calls()
	if len(calls) == 0 {
		w.WriteHeader(at.status)
		_, _ = w.Write(at.body)
		return
	}
	dr, err := p.decide(ctx, rt, req, decl, at.resp.id(), at.resp.model(), calls)
	if err != nil {
		p.refuse(w, a, rt, err)
		return
	}
	out := at.body
	st := retryStats{calls: len(calls), rejected: dr.nRejected}
	switch {
	case rt.policy == Retry && dr.nRejected > 0:
		out, err = p.retry(ctx, r, rt, rest, body, req, decl, at.resp, dr, &st)
		if errors.Is(err, callpath.ErrUnrecorded) {
			p.refuse(w, a, rt, err)
			return
		}
	case rt.policy == Block && dr.nRejected > 0:
		out, err = at.resp.withhold(dr.rejected, dr.note)
		st.withheld = dr.withheld
	}
	if err != nil {
		writeError(w, a, http.StatusBadGateway, "toolaudit: "+err.Error())
		return
	}
	if _, ok := a.(openAIResponses); ok && len(st.withheld) > 0 {
		p.rememberWithheld(withheldScope(rt, r.Header), out, st.withheld)
	}
	h := w.Header()
	h.Set(HeaderCalls, strconv.Itoa(st.calls))
	h.Set(HeaderRejected, strconv.Itoa(st.rejected))
	h.Set(HeaderVersion, decl.Version)
	if len(st.withheld) > 0 {
		h.Set(HeaderWithheld, strings.Join(st.withheld, ","))
	}
	if rt.policy == Retry {
		h.Set(HeaderRetries, strconv.Itoa(st.retries))
	}
	w.WriteHeader(at.status)
	_, _ = w.Write(out)
}

// rememberWithheld keeps the outputs of the calls withheld from the
// Responses answer out (its id, and each call's fix text from the
// answer's note), for a request that continues it.
func (p *Proxy) rememberWithheld(scope string, out []byte, ids []string) {
	var r struct {
		ID     string `json:"id"`
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
	}
	if json.Unmarshal(out, &r) != nil || len(r.Output) == 0 || len(r.Output[len(r.Output)-1].Content) == 0 {
		return
	}
	note := r.Output[len(r.Output)-1].Content[0].Text
	items := make([]json.RawMessage, len(ids))
	for i, id := range ids {
		items[i] = mustJSON(map[string]any{"type": "function_call_output", "call_id": id, "output": note})
	}
	p.withheld.put(scope, r.ID, items)
}

// refuse answers a response whose decisions the audit trail did not
// take: 503, and no call.
func (p *Proxy) refuse(w http.ResponseWriter, a api, rt *Route, err error) {
	w.Header().Del("Content-Type")
	p.log.Error("decisions not recorded: the response is refused", "route", rt.Prefix, "err", err)
	writeError(w, a, http.StatusServiceUnavailable, "toolaudit: the tool calls of this response could not be recorded in the audit trail, so none is returned: "+err.Error())
}

// attempt is one exchange with the upstream: a successful response read
// and parsed, or (up) an answer that is not 2xx, its body unread.
type attempt struct {
	up     *http.Response
	status int
	header http.Header
	body   []byte
	resp   response
}

// exchange sends body to the route's upstream and reads the answer; a
// failure is the status and message to answer the client.
func (p *Proxy) exchange(ctx context.Context, r *http.Request, rt *Route, rest string, body []byte) (*attempt, int, string) {
	up, err := p.forward(ctx, r, rt, rest, body)
	if err != nil {
		p.log.Warn("upstream unreachable", "route", rt.Prefix, "err", err)
		return nil, http.StatusBadGateway, "toolaudit: the upstream did not answer: " + err.Error()
	}
	if up.StatusCode < 200 || up.StatusCode > 299 {
		return &attempt{up: up}, 0, ""
	}
	defer up.Body.Close()
	out, err := readAll(io.LimitReader(up.Body, p.cfg.Limits.MaxResponseBytes+1), up.ContentLength)
	if err != nil {
		return nil, http.StatusBadGateway, "toolaudit: reading the upstream response: " + err.Error()
	}
	if int64(len(out)) > p.cfg.Limits.MaxResponseBytes {
		return nil, http.StatusBadGateway, fmt.Sprintf("toolaudit: the upstream response is larger than %d bytes; its tool calls cannot be decided", p.cfg.Limits.MaxResponseBytes)
	}
	resp, err := parseStrict(out, func(v jsontape.Value) (response, error) {
		if err := checkProto(v); err != nil {
			return nil, err
		}
		return rt.api.parseResponse(v)
	})
	if err != nil {
		return nil, http.StatusBadGateway, "toolaudit: the upstream response is not understood, so its tool calls cannot be decided: " + err.Error()
	}
	return &attempt{status: up.StatusCode, header: up.Header, body: out, resp: resp}, 0, ""
}

// decisions are a response's decisions.
type decisions struct {
	rejected  []bool
	nRejected int
	withheld  []string
	fixes     []string // per call: the fix text of a rejected one
	note      string
}

// decide decides calls (of response respID, by model) against the
// declared tools and records the decisions (acknowledged) before
// returning.
func (p *Proxy) decide(ctx context.Context, rt *Route, req *request, decl *declared.Set, respID, model string, calls []toolCall) (*decisions, error) {
	d, recs := p.decideUnrecorded(ctx, rt, req, decl, respID, model, calls)
	if len(recs) > 0 {
		if err := p.steps[rt.policy].Record(ctx, recs...); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// decideUnrecorded is decide but the recording: the records to record
// before any of the decisions is acted on.
func (p *Proxy) decideUnrecorded(ctx context.Context, rt *Route, req *request, decl *declared.Set, respID, model string, calls []toolCall) (*decisions, []*audit.Record) {
	step := p.steps[rt.policy]
	recs := make([]*audit.Record, len(calls))
	hints := make([]suggest.Hints, len(calls))
	var dec schema.CallDecoder
	var c schema.Call
	now := time.Now().UTC().Truncate(time.Millisecond)
	traceID, spanID := attemptOf(ctx)
	for i, tc := range calls {
		ev := schema.Call{
			EventID: req.eventID(p.eventID(respID, tc.id)), EmittedAt: now, Registry: rt.Registry, AgentID: rt.Agent,
			Model: model, Provider: rt.api.provider(), Surface: "raw_json", Tool: tc.name,
			TraceID: traceID, SpanID: spanID,
		}
		if req.strict[tc.name] {
			ev.Surface = "schema_enforced"
		}
		ev.Visible, ev.HasVisible = req.visible, req.hasVisible
		event := schema.AppendCall(nil, &ev, schema.CallArgs{JSON: tc.args, Raw: tc.raw})
		rec := &audit.Record{}
		step.Decide(decl.Snap, &dec, event, &c, rec)
		hints[i] = step.Hint(decl.Snap, &c, rec)
		recs[i] = rec
	}
	d := &decisions{rejected: make([]bool, len(calls)), fixes: make([]string, len(calls))}
	var note strings.Builder
	for i, rec := range recs {
		if rec.Decision.Verdict != schema.Reject {
			continue
		}
		d.rejected[i] = true
		d.nRejected++
		d.withheld = append(d.withheld, calls[i].id)
		if note.Len() == 0 {
			note.WriteString(withheldNote)
		}
		d.fixes[i] = fixText(calls[i].name, &rec.Decision, &hints[i])
		note.WriteString("\n- ")
		note.WriteString(d.fixes[i])
	}
	d.note = note.String()
	if p.log.Enabled(ctx, slog.LevelDebug) { // its arguments are not built for nothing
		p.log.Debug("response decided", "route", rt.Prefix, "calls", len(calls), "rejected", d.nRejected, "registry_version", decl.Version)
	}
	return d, recs
}

// eventID is id, or, when the request's calls had it before (an
// upstream that repeats a response's or a call's id), id#2, id#3...
func (r *request) eventID(id string) string {
	if r.eventIDs == nil {
		r.eventIDs, r.idsTaken = map[string]int{}, map[string]bool{}
	}
	for n := r.eventIDs[id] + 1; ; n++ {
		out := id
		if n > 1 {
			out = id + "#" + strconv.Itoa(n)
		}
		if !r.idsTaken[out] { // an upstream's own id may be one made here
			r.eventIDs[id], r.idsTaken[out] = n, true
			return out
		}
	}
}

// eventID is a call event's id: the response's id and the call's, which
// the API makes unique, or the proxy's own when either is missing.
func (p *Proxy) eventID(resp, call string) string {
	if resp != "" && call != "" {
		return resp + "/" + call
	}
	return p.idPrefix + strconv.FormatUint(p.ids.Add(1), 10)
}

// fixText says what is wrong with a rejected call and what would be
// right: the class and reason, where, and the hints.
func fixText(name string, d *schema.Decision, h *suggest.Hints) string {
	var b strings.Builder
	b.WriteString(strconv.Quote(name))
	b.WriteString(": ")
	b.WriteString(string(d.Class))
	b.WriteString(" ")
	b.WriteString(d.Reason)
	if d.Path != "" {
		b.WriteString(" at ")
		b.WriteString(d.Path)
	}
	if len(h.Tools) > 0 {
		b.WriteString("; nearest declared tools: ")
		b.WriteString(strings.Join(h.Tools, ", "))
	}
	if len(h.Missing) > 0 {
		b.WriteString("; missing required: ")
		b.WriteString(strings.Join(h.Missing, ", "))
	}
	if len(h.Keys) > 0 {
		b.WriteString("; declared keys nearest: ")
		b.WriteString(strings.Join(h.Keys, ", "))
	}
	if len(h.Expected) > 0 {
		b.WriteString("; expected: ")
		b.Write(h.Expected)
	}
	return b.String()
}

// hopHeaders are not forwarded (RFC 9110, 7.6.1), nor are the body's
// framing and encoding, which the proxy sets itself (Go's transport asks
// for gzip and decodes it: the proxy reads the body it decides).
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length", "Accept-Encoding", "Content-Encoding",
}

// forward sends the request to the route's upstream: the client's
// headers (its credentials, Authorization or x-api-key, among them:
// passed on, never logged or kept) but the hop-by-hop ones.
func (p *Proxy) forward(ctx context.Context, r *http.Request, rt *Route, rest string, body []byte) (*http.Response, error) {
	u := *rt.upstream
	u.Path = rt.upstream.Path + rest
	u.RawPath = ""
	u.RawQuery = r.URL.RawQuery
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	copyHeader(req.Header, r.Header)
	return p.client.Do(req)
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = slices.Clone(vs)
	}
	for _, k := range hopHeaders {
		dst.Del(k)
	}
	if c := src.Get("Connection"); c != "" {
		for _, f := range strings.Split(c, ",") {
			dst.Del(strings.TrimSpace(f))
		}
	}
}

func writeError(w http.ResponseWriter, a api, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(a.errorBody(status, msg))
}

type requestTraceKey struct{}

// withRequestTrace gives the client's request a trace id: the caller's
// (traceparent), else a new one. Every call event of the request's
// responses carries it (trace_id), and each response's own span id
// (span_id): the attempts of a retry, which are other responses with
// other calls, are one trace in the audit rows, each attempt a span.
func withRequestTrace(ctx context.Context) context.Context {
	id := trace.SpanContextFromContext(ctx).TraceID()
	if !id.IsValid() {
		rand.Read(id[:])
	}
	return context.WithValue(ctx, requestTraceKey{}, id)
}

type attemptKey struct{}

// newAttempt fixes the span id of one response whose calls are decided
// one by one (a stream's): every call of it carries the same.
func newAttempt(ctx context.Context) context.Context {
	var sp trace.SpanID
	rand.Read(sp[:])
	return context.WithValue(ctx, attemptKey{}, sp)
}

// attemptOf is the trace id of ctx's request and the span id of one of
// its responses (newAttempt's, else a new one), hex; "" for both outside
// a request.
func attemptOf(ctx context.Context) (traceID, spanID string) {
	id, ok := ctx.Value(requestTraceKey{}).(trace.TraceID)
	if !ok {
		return "", ""
	}
	sp, ok := ctx.Value(attemptKey{}).(trace.SpanID)
	if !ok {
		rand.Read(sp[:])
	}
	return id.String(), sp.String()
}
