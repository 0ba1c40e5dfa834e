package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/internal/promutil"
)

// metrics are the gateway's own; the upstreams' are package upstream's.
type metrics struct {
	calls     *prometheus.CounterVec
	refused   *prometheus.CounterVec
	listings  *prometheus.CounterVec
	gone      prometheus.Counter
	decided   prometheus.Histogram
	forwarded prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer, sessions func() int) (*metrics, error) {
	const ns, sub = "toolaudit", "gateway"
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "calls_total",
			Help: "tools/call requests decided, by class and outcome (rejected, forwarded, upstream_error, audit_unavailable)."}, []string{"class", "outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "refused_total",
			Help: "Requests refused at a limit (sessions: sessions or subscriptions/listen streams; in_flight), for authentication (unauthorized), or a bare name before every upstream listed (not_ready); an oversize body is the MCP SDK's 413, not counted."}, []string{"limit"}),
		listings: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "listings_total",
			Help: "Upstream listings, by result: produced (and applied), unchanged (not produced again), unusable (the server withdrawn), failed (not produced; retried)."}, []string{"result"}),
		gone: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "sessions_gone_total",
			Help: "Sessions closed because their client's event stream closed and it sent nothing for limits.session_grace (a client gone without DELETE)."}),
		decided: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "decide_seconds",
			Help:    "Time to decide a call and record it in the audit trail (the gateway's own latency before forwarding).",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 18)}),
		forwarded: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "call_seconds",
			Help:    "Time from receiving a forwarded call to the upstream's answer.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 20)}),
	}
	open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "sessions",
		Help: "Client sessions open."}, func() float64 { return float64(sessions()) })
	return m, promutil.Register(reg, m.calls, m.refused, m.listings, m.gone, m.decided, m.forwarded, open)
}
