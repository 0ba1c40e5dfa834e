package upstream

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/internal/promutil"
)

// Metrics are the upstreams' metrics, labelled by upstream name; one set
// serves every upstream of a gateway.
type Metrics struct {
	up          *prometheus.GaugeVec
	restarts    *prometheus.CounterVec
	listings    *prometheus.CounterVec
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
}

// NewMetrics registers the metrics on reg; nil registers them nowhere. It
// fails if they are registered already (one gateway per registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns, sub = "toolaudit", "gateway_upstream"
	m := &Metrics{
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "up",
			Help: "1 while the upstream is connected and its tools of this session are recorded (calls are forwarded), else 0."}, []string{"upstream"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "restarts_total",
			Help: "Sessions with the upstream that ended (or failed to start) and were started again."}, []string{"upstream"}),
		listings: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "listings_total",
			Help: "Listings of the upstream's tools, by result (recorded, failed)."}, []string{"upstream", "result"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "Calls forwarded to the upstream, by result (ok, tool_error, error, timeout, unavailable)."}, []string{"upstream", "result"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "call_seconds",
			Help:    "Time from forwarding a call to the upstream's answer.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 20)}, []string{"upstream"}),
	}
	return m, promutil.Register(reg, m.up, m.restarts, m.listings, m.calls, m.callSeconds)
}

// upstreamMetrics are one upstream's.
type upstreamMetrics struct {
	up          prometheus.Gauge
	restarts    prometheus.Counter
	listings    *prometheus.CounterVec
	calls       *prometheus.CounterVec
	callSeconds prometheus.Observer
}

func (m *Metrics) of(name string) *upstreamMetrics {
	return &upstreamMetrics{
		up:          m.up.WithLabelValues(name),
		restarts:    m.restarts.WithLabelValues(name),
		listings:    m.listings.MustCurryWith(prometheus.Labels{"upstream": name}),
		calls:       m.calls.MustCurryWith(prometheus.Labels{"upstream": name}),
		callSeconds: m.callSeconds.WithLabelValues(name),
	}
}
