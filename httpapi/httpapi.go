package httpapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/httpapi/apierror"
	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/internal/promutil"
	"github.com/toolaudit/toolaudit/internal/ratelog"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// Defaults of Config's limits.
const (
	DefaultMaxBody          = 1 << 20  // bytes of one request's body
	DefaultMaxBatch         = 100      // call events in one request
	DefaultMaxInFlight      = 512      // requests being answered at once
	DefaultMaxInFlightBytes = 64 << 20 // body bytes held at once
)

// Config of the handler. Store is required; the rest may be zero.
type Config struct {
	Store *registry.Store
	// Resolver decides the calls; a request's ?mode= overrides its Mode.
	Resolver resolve.Resolver
	// Suggester computes the hints of rejections; nil makes one.
	Suggester *suggest.Suggester
	// Audit receives every decision before it is answered: with it, a
	// request is answered only once the broker has acknowledged its
	// records, and with 503 when it did not (fail closed). Nil answers
	// without an audit trail.
	Audit audit.Producer
	// Tracer, when set, emits a span per decision in the caller's trace
	// (the request's traceparent; package callpath); nil: none.
	Tracer trace.Tracer
	// ResolverBuild stamps every decision (resolver_build).
	ResolverBuild string

	// Tokens, when set, are required on /v1/* (Authorization: Bearer),
	// and on /metrics, /healthz and /readyz too with AuthProbes.
	Tokens     *bearer.Tokens
	AuthProbes bool

	// MaxBody bounds a request's body (default DefaultMaxBody); MaxBatch
	// the call events of one request (default DefaultMaxBatch).
	MaxBody  int64
	MaxBatch int
	// MaxInFlight bounds the resolve requests being answered at once, and
	// MaxInFlightBytes the bytes of their bodies (a request reserves its
	// Content-Length, or MaxBody when it has none, before it reads):
	// beyond either, a request is answered 503 at once. Defaults
	// DefaultMaxInFlight, DefaultMaxInFlightBytes.
	MaxInFlight      int
	MaxInFlightBytes int64

	// Ready reports readiness for /readyz: nil when ready, else why not
	// (the answer's body). A nil Ready means always ready.
	Ready func() error
	// Decides, when set, says whether the registry is complete enough to
	// decide on (resolverd run: the listings topic read to its end once):
	// until it returns nil, /v1/resolve answers 503 not_ready with its
	// reason. A verdict from a partial registry could allow what the
	// whole one rejects: a trusted server's listing not yet read lets a
	// lower-trust server's same name resolve (M3 missed).
	Decides func() error
	// Gatherer serves /metrics; nil serves no metrics endpoint.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// Registerer receives the API's own metrics; nil registers none.
	Registerer prometheus.Registerer
	// Pprof serves the runtime profiles under /debug/pprof/.
	Pprof bool
}

func (c *Config) defaults() {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Suggester == nil {
		c.Suggester = suggest.New()
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = DefaultMaxBatch
	}
	if c.MaxInFlight <= 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.MaxInFlightBytes <= 0 {
		c.MaxInFlightBytes = DefaultMaxInFlightBytes
	}
	c.MaxInFlightBytes = max(c.MaxInFlightBytes, c.MaxBody)
}

type handler struct {
	cfg      Config
	step     callpath.Step       // a request's copy takes its mode and action
	requests *semaphore.Weighted // MaxInFlight
	bytes    *semaphore.Weighted // MaxInFlightBytes
	work     sync.Pool           // *work
	logEvery ratelog.Every

	decided   *prometheus.CounterVec
	answered  *prometheus.CounterVec
	latency   prometheus.Histogram
	authFails *prometheus.CounterVec
}

// New returns the daemon's HTTP handler. It is safe for concurrent use.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: Config.Store is required")
	}
	cfg.defaults()
	h := &handler{
		cfg:      cfg,
		requests: semaphore.NewWeighted(int64(cfg.MaxInFlight)),
		bytes:    semaphore.NewWeighted(cfg.MaxInFlightBytes),
		logEvery: ratelog.Every{Interval: 10 * time.Second},
		step: callpath.Step{Resolver: cfg.Resolver, Hints: cfg.Suggester, Audit: cfg.Audit,
			Source: schema.SourceAPI, ResolverBuild: cfg.ResolverBuild, Tracer: cfg.Tracer},
	}
	h.work.New = func() any { return newWork() }
	h.decided = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolaudit_api_decisions_total",
		Help: "Decisions returned by POST /v1/resolve, by class and verdict.",
	}, []string{"class", "verdict"})
	h.answered = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolaudit_api_requests_total",
		Help: "POST /v1/resolve requests answered, by HTTP status and error code (\"\" for 200).",
	}, []string{"status", "error"})
	h.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toolaudit_api_resolve_seconds",
		Help:    "Time to read, decode, resolve, audit and answer one POST /v1/resolve.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 4, 8),
	})
	h.authFails = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolaudit_api_auth_failures_total",
		Help: "Requests refused for their bearer token, by reason (missing, invalid, no_tokens).",
	}, []string{"reason"})
	if err := promutil.Register(cfg.Registerer, h.decided, h.answered, h.latency, h.authFails); err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// Every method and path under /v1/ is routed here so that the errors
	// (405, 404) are JSON like the API's others.
	mux.Handle("/v1/resolve", h.auth(http.HandlerFunc(h.resolve)))
	mux.Handle("/v1/", h.auth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apierror.Write(w, http.StatusNotFound, codeNotFound, "no such endpoint: "+r.URL.Path)
	})))
	probe := func(hf http.HandlerFunc) http.Handler {
		if cfg.AuthProbes {
			return h.auth(hf)
		}
		return hf
	}
	mux.Handle("GET /healthz", probe(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	mux.Handle("GET /readyz", probe(Readiness(cfg.Ready).ServeHTTP))
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", probe(promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP))
	}
	if cfg.Pprof {
		mux.Handle("GET /debug/pprof/", probe(pprof.Index))
		mux.Handle("GET /debug/pprof/profile", probe(pprof.Profile))
		mux.Handle("GET /debug/pprof/trace", probe(pprof.Trace))
	}
	return mux, nil
}

// Readiness is the /readyz handler: 200 "ready" while ready returns nil,
// else 503 "not ready: " and the reason. A nil ready is always ready.
func Readiness(ready func() error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil {
			if err := ready(); err != nil {
				http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		io.WriteString(w, "ready\n")
	})
}

// auth requires a valid bearer token when tokens are configured.
func (h *handler) auth(next http.Handler) http.Handler {
	if h.cfg.Tokens == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := h.cfg.Tokens.Authorize(r)
		if err == nil {
			next.ServeHTTP(w, r)
			return
		}
		status, challenge := bearer.Refusal(err, "toolaudit")
		switch {
		case status == http.StatusForbidden:
			h.authFails.WithLabelValues("no_tokens").Inc()
			apierror.Write(w, status, codeForbidden, err.Error())
		default:
			reason := "missing"
			if errors.Is(err, bearer.ErrInvalid) {
				reason = "invalid"
			}
			h.authFails.WithLabelValues(reason).Inc()
			w.Header().Set("WWW-Authenticate", challenge)
			apierror.Write(w, status, codeUnauthorized, fmt.Sprintf("%v: send Authorization: Bearer <token>", err))
		}
	})
}
