package sink

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics of one writer kind ("clickhouse"), as const label sink.
type metrics struct {
	rows    prometheus.Counter
	batches prometheus.Counter
	latency prometheus.Histogram
	errors  *prometheus.CounterVec
	clamped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, sink string) *metrics {
	labels := prometheus.Labels{"sink": sink}
	m := &metrics{
		rows: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolaudit_sink_rows_written_total", ConstLabels: labels,
			Help: "Decision rows acknowledged by the store.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolaudit_sink_batches_written_total", ConstLabels: labels,
			Help: "Batches acknowledged by the store.",
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "toolaudit_sink_write_duration_seconds", ConstLabels: labels,
			Help:    "Time of one Write (one batch), successful or not.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1 ms .. 33 s
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolaudit_sink_write_errors_total", ConstLabels: labels,
			Help: "Failed Writes by kind (network, timeout, overload, server, auth, tls: retryable; schema, data: permanent; canceled, closed).",
		}, []string{"kind"}),
		clamped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolaudit_sink_clamped_times_total", ConstLabels: labels,
			Help: "Times outside the store's range (1900-01-01..2262-04-11) written as the nearest bound.",
		}),
	}
	if reg != nil {
		m.rows = register(reg, m.rows)
		m.batches = register(reg, m.batches)
		m.latency = register(reg, m.latency)
		m.errors = register(reg, m.errors)
		m.clamped = register(reg, m.clamped)
	}
	return m
}

// register registers c, or returns the collector already registered under
// the same description so that writers of one kind share their metrics. Any
// other registration error leaves c unregistered (metrics must not stop the
// pipeline).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

// observe records one Write of n rows that took since start and ended in err.
func (m *metrics) observe(n int, start time.Time, err error) {
	m.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		m.errors.WithLabelValues(Kind(err)).Inc()
		return
	}
	m.rows.Add(float64(n))
	m.batches.Inc()
}
