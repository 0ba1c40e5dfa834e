package receiver

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/toolaudit/toolaudit/otlp"
)

type metrics struct {
	requests *prometheus.CounterVec
	items    map[otlp.Signal]prometheus.Counter
	rejected prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	const ns, sub = "toolaudit", "otlp_receiver"
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "requests_total",
			Help: "OTLP export requests answered, by signal, transport and outcome (a gRPC code: OK, InvalidArgument, Unavailable, ...)."},
			[]string{"signal", "transport", "code"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "rejected_items_total",
			Help: "Tool calls in stored exports that cannot be checked (each a MALFORMED decision), as the partial-success answers count them."}),
	}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "tool_calls_total",
		Help: "Tool calls in the exports stored, by signal."}, []string{"signal"})
	m.items = map[otlp.Signal]prometheus.Counter{
		otlp.Traces: calls.WithLabelValues("traces"),
		otlp.Logs:   calls.WithLabelValues("logs"),
	}
	for _, c := range []prometheus.Collector{m.requests, m.rejected, calls} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("otlp receiver: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) request(sig otlp.Signal, transport string, code codes.Code) {
	m.requests.WithLabelValues(signalName(sig), transport, code.String()).Inc()
}
