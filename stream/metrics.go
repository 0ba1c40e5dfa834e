package stream

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/registry"
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

	listingsApplied prometheus.Counter
	listingsBad     prometheus.Counter
	listingIssues   prometheus.Counter
	unenforced      prometheus.Counter
	listingLateness prometheus.Histogram

	checkpointsWritten prometheus.Counter
	checkpointErrors   prometheus.Counter
	checkpointBytes    prometheus.Gauge
	checkpointLoaded   prometheus.Gauge

	otlpRecords  prometheus.Counter
	otlpRefused  prometheus.Counter
	otlpSkipped  prometheus.Counter
	otlpListings prometheus.Counter
	otlpPaired   prometheus.Counter
}

// partitionLag is one assigned calls partition's lag, for consumer_lag.
type partitionLag struct {
	topic     string
	partition int32
	lag       int64
}

// newMetrics registers the metrics on reg, with the size of store (nil:
// none); a nil reg registers them
// nowhere (they still count, nobody reads them). The two functions are
// read at each scrape: caughtUpAge for listings_caught_up_age_seconds,
// lags for consumer_lag; nil reads as -1 and as no partitions.
func newMetrics(reg prometheus.Registerer, store *registry.Store, caughtUpAge func() float64, lags func() []partitionLag) (*metrics, error) {
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
		unenforced:      counter("decisions_unenforced_total", "H3 decisions refused because the arguments reached a part of the tool's contract the checker does not enforce (the reason begins \"not enforced:\"); also in decisions_total."),
		listingLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: sub, Name: "listing_lateness_seconds",
			Help:    "Arrival (fetch) time minus observed_at of listings, after the initial catch-up: what ListingHold must cover.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300},
		}),
		checkpointsWritten: counter("registry_checkpoints_written_total", "Registry checkpoints written to the checkpoint topic."),
		checkpointErrors:   counter("registry_checkpoint_errors_total", "Registry checkpoints that could not be written."),
		checkpointBytes:    gauge("registry_checkpoint_bytes", "Size of the last registry checkpoint written."),
		checkpointLoaded:   gauge("registry_checkpoint_loaded", "1 when this instance started from a registry checkpoint, 0 when it read the listings topic from the start."),

		otlpRecords:  counter("otlp_records_total", "Records of the OpenTelemetry topics decoded (each yields the rows of its calls)."),
		otlpRefused:  counter("otlp_records_refused_total", "Records of the OpenTelemetry topics sent to the DLQ: not OTLP, over a limit, or an item without a time."),
		otlpSkipped:  counter("otlp_items_skipped_total", "Spans and log records that are no tool call and no tool definitions (a chat span without tool calls, an HTTP span)."),
		otlpListings: counter("otlp_mcp_listings_produced_total", "MCP tools/list results read in traces and produced to the listings topic (applied there before the calls of their record are decided)."),
		otlpPaired:   counter("otlp_calls_seen_again_total", "Tool calls the partition decided from an earlier record (the same call on another span, its execute_tool or MCP span, a batch delivered twice): not decided again."),
	}
	decisions := prometheus.NewCounterVec(prometheus.CounterOpts(opts("decisions_total",
		"Decisions made and durably written, by class and verdict.")), []string{"class", "verdict"})
	for i, c := range schema.Classes {
		m.decisions[i] = decisions.WithLabelValues(string(c), string(schema.VerdictOf(c)))
	}
	cs := []prometheus.Collector{
		decisions, m.passthrough, m.batchRows, m.flushSeconds, m.sinkRetries, m.commitErrors,
		m.dlqRecords, m.assigned, m.pauses, m.listingsApplied, m.listingsBad,
		m.listingIssues, m.unenforced, m.listingLateness,
		m.checkpointsWritten, m.checkpointErrors, m.checkpointBytes, m.checkpointLoaded,
		m.otlpRecords, m.otlpRefused, m.otlpSkipped, m.otlpListings, m.otlpPaired,
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
	cs = append(cs, storeCollectors(store)...)
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

// storeCollectors expose the registry store's size, read at scrape time
// (registry.Stats). registries and registry_versions keep their
// names from before.
func storeCollectors(store *registry.Store) []prometheus.Collector {
	if store == nil {
		return nil
	}
	const ns, sub = "toolaudit", "stream"
	stat := func(counter bool, name, help string, f func(registry.Stats) int64) prometheus.Collector {
		o := prometheus.Opts{Namespace: ns, Subsystem: sub, Name: name, Help: help}
		v := func() float64 { return float64(f(store.Stats())) }
		if counter {
			return prometheus.NewCounterFunc(prometheus.CounterOpts(o), v)
		}
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts(o), v)
	}
	type s = registry.Stats
	return []prometheus.Collector{
		stat(false, "registries", "Registries known to the store.", func(s s) int64 { return s.Registries }),
		stat(false, "registry_versions", "Registry versions known to the store, all registries.", func(s s) int64 { return s.Versions }),
		stat(true, "registry_listings_total", "Listing events applied to the store since start (a checkpoint loaded counts none).", func(s s) int64 { return s.Listings }),
		stat(true, "registry_duplicate_listings_total", "Listings that changed nothing: same server, observed_at and content as one applied before.", func(s s) int64 { return s.Duplicates }),
		stat(true, "registry_relistings_total", "Listings at a new instant with the content their server already had.", func(s s) int64 { return s.Relistings }),
		stat(false, "registry_points", "Listed instants the store keeps (unchanged relistings only within the late window).", func(s s) int64 { return s.Points }),
		stat(false, "registry_server_states", "Server states kept: one per change of a server.", func(s s) int64 { return s.States }),
		stat(false, "registry_definitions", "Distinct tool definitions (digests) kept, each compiled once.", func(s s) int64 { return s.Definitions }),
		stat(false, "registry_contents", "Distinct listed server contents kept.", func(s s) int64 { return s.Contents }),
		stat(false, "registry_bytes", "Estimated memory held by the registry history.", func(s s) int64 { return s.Bytes }),
	}
}
