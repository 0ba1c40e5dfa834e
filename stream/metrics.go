package stream

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/schema"
)

// metrics are the pipeline's own metrics; the Kafka clients' come from
// plugin/kprom under toolaudit_kafka_*.
type metrics struct {
	decisions    [schema.NumClasses]prometheus.Counter // by class (and its verdict)
	passthrough  prometheus.Counter
	batchRows    prometheus.Histogram
	flushSeconds prometheus.Histogram
	sinkRetries  prometheus.Counter
	commitErrors prometheus.Counter
	dlqRecords   prometheus.Counter
	assigned     prometheus.Gauge
	pauses       prometheus.Counter

	listingsApplied  prometheus.Counter
	listingsBad      prometheus.Counter
	listingIssues    prometheus.Counter
	listingLateness  prometheus.Histogram
	registries       prometheus.Gauge
	registryVersions prometheus.Gauge
}

// partitionLag is one assigned calls partition's lag, for consumer_lag.
type partitionLag struct {
	topic     string
	partition int32
	lag       int64
}

// newMetrics registers the metrics on reg; a nil reg registers them
// nowhere (they still count, nobody reads them). The two functions are
// read at each scrape: caughtUpAge for listings_caught_up_age_seconds,
// lags for consumer_lag; nil reads as -1 and as no partitions.
func newMetrics(reg prometheus.Registerer, caughtUpAge func() float64, lags func() []partitionLag) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if caughtUpAge == nil {
		caughtUpAge = func() float64 { return -1 }
	}
	if lags == nil {
		lags = func() []partitionLag { return nil }
	}
	const ns, sub = "toolaudit", "stream"
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: ns, Subsystem: sub, Name: name, Help: help}
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts(opts(name, help)))
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts(opts(name, help)))
	}
	m := &metrics{
		passthrough: counter("passthrough_rows_total", "Rows written in passthrough mode (no decision)."),
		batchRows: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "batch_rows",
			Help:    "Rows per sink write.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9),
		}),
		flushSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "flush_seconds",
			Help:    "Time to make a batch durable: DLQ produce, sink write with its retries, offset commit.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}),
		sinkRetries:  counter("sink_retries_total", "Failed sink writes that were retried."),
		commitErrors: counter("commit_errors_total", "Failed offset commits (retried unless the partition left)."),
		dlqRecords:   counter("dlq_records_total", "Undecodable call records produced to the DLQ topic."),
		assigned:     gauge("assigned_partitions", "Calls partitions assigned to this instance."),
		pauses:       counter("partition_pauses_total", "Times a partition's fetching paused because its worker was behind (sink slow or failing)."),

		listingsApplied: counter("listings_applied_total", "Listing events applied to the registry store."),
		listingsBad:     counter("listings_bad_total", "Listing records that could not be decoded and were skipped."),
		listingIssues:   counter("listing_issues_total", "Problems the store found in applied listings (tools skipped, keywords not enforced)."),
		listingLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "listing_lateness_seconds",
			Help:    "Arrival (fetch) time minus observed_at of listings, after the initial catch-up: what ListingHold must cover.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300},
		}),
		registries:       gauge("registries", "Registries known to the store."),
		registryVersions: gauge("registry_versions", "Registry versions known to the store, all registries."),
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts(opts("decisions_total",
		"Decisions made and durably written, by class and verdict.")), []string{"class", "verdict"})
	for i, c := range schema.Classes {
		m.decisions[i] = decisions.WithLabelValues(string(c), string(schema.VerdictOf(c)))
	}
	cs := []prometheus.Collector{
		decisions, m.passthrough, m.batchRows, m.flushSeconds, m.sinkRetries, m.commitErrors,
		m.dlqRecords, m.assigned, m.pauses, m.listingsApplied, m.listingsBad,
		m.listingIssues, m.listingLateness, m.registries, m.registryVersions,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts(opts("listings_caught_up_age_seconds",
			"Now minus the latest time before which every produced listing has been applied; calls wait until it is under ListingHold. -1 before the initial catch-up.")),
			caughtUpAge),
		lagCollector{
			desc: prometheus.NewDesc(prometheus.BuildFQName(ns, sub, "consumer_lag"),
				"Records of an assigned calls partition not yet committed: high watermark (from fetches) minus committed offset.",
				[]string{"topic", "partition"}, nil),
			lags: lags,
		},
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	return m, nil
}

// lagCollector reports consumer_lag at scrape time from the partitions
// assigned then: a partition's lag is the state of its worker and of the
// writer's commits, which neither has to push anywhere, and a partition
// that left has no series.
type lagCollector struct {
	desc *prometheus.Desc
	lags func() []partitionLag
}

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range c.lags() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(l.lag),
			l.topic, strconv.Itoa(int(l.partition)))
	}
}

func ageSeconds(t time.Time) float64 {
	if t.IsZero() {
		return -1
	}
	return time.Since(t).Seconds()
}
