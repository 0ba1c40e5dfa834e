package httpapi

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// MaxBody is the largest call event the resolve API accepts.
const MaxBody = 1 << 20

// Config of the handler. Store is required; the rest may be zero.
type Config struct {
	Store    *registryversions.Store
	Resolver resolve.Resolver
	// Ready reports readiness for /readyz: nil when ready, else why not
	// (the answer's body). A nil Ready means always ready.
	Ready func() error
	// Gatherer serves /metrics; nil serves no metrics endpoint.
	Gatherer prometheus.Gatherer
	Logger   *slog.Logger
	// Registerer receives the API's own metrics; nil registers none.
	Registerer prometheus.Registerer
	// Pprof serves the runtime profiles under /debug/pprof/.
	Pprof bool
}

type handler struct {
	cfg      Config
	decoders sync.Pool
	bufs     sync.Pool
	decided  *prometheus.CounterVec
	latency  prometheus.Histogram
}

// New returns the daemon's HTTP handler. It is safe for concurrent use.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("httpapi: Config.Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	h := &handler{cfg: cfg}
	h.decoders.New = func() any { return new(schema.CallDecoder) }
	h.bufs.New = func() any { b := make([]byte, 0, 4096); return &b }
	h.decided = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolaudit_api_decisions_total",
		Help: "Decisions returned by POST /v1/resolve, by class and verdict.",
	}, []string{"class", "verdict"})
	h.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toolaudit_api_resolve_seconds",
		Help:    "Time to read, decode, resolve and answer one POST /v1/resolve.",
		Buckets: prometheus.ExponentialBuckets(10e-6, 4, 8),
	})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{h.decided, h.latency} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/resolve", h.resolve)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("GET /readyz", Readiness(cfg.Ready))
	if cfg.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{}))
	}
	if cfg.Pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
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

// resolve answers with the decision as JSON, status 200 for every
// decision (a rejection is an answer, not an error). Only a body that
// cannot be read is an HTTP error.
func (h *handler) resolve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	bp := h.bufs.Get().(*[]byte)
	defer h.bufs.Put(bp)
	body, err := readAll(http.MaxBytesReader(w, r.Body, MaxBody), (*bp)[:0])
	*bp = body
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "call event larger than 1 MiB", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	dec := h.decoders.Get().(*schema.CallDecoder)
	defer h.decoders.Put(dec)
	var c schema.Call
	var d schema.Decision
	h.cfg.Resolver.Decide(h.cfg.Store.Snapshot(), dec, body, &c, &d)
	out := d.AppendJSON(body[len(body):])
	w.Header().Set("Content-Type", "application/json")
	w.Write(append(out, '\n'))
	h.decided.WithLabelValues(string(d.Class), string(d.Verdict)).Inc()
	h.latency.Observe(time.Since(start).Seconds())
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
