package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// rate is Grafana's rate window for Prometheus panels.
const rate = "[$__rate_interval]"

func quantile(q, metric string) string {
	return "histogram_quantile(" + q + ", sum by (le) (rate(" + metric + "_bucket" + rate + ")))"
}

// pipeline is resolverd's health, from its /metrics (Prometheus): the
// stream's throughput and backlog, the sink, the dead-letter topic, the
// listings and the API.
func pipeline() *dashboard.DashboardBuilder {
	return base(UIDPipeline, "toolaudit: pipeline health",
		"resolverd's own metrics, scraped by Prometheus: decisions per second, consumer lag, sink latency and retries, dead-lettered records, listing lateness, the registry history's writes and the API's latency.",
		"now-3h").
		WithVariable(dsVariable(dsPrometheus, "Prometheus", prometheusType, PrometheusUID)).
		WithRow(row("Throughput and backlog")).
		WithPanel(promPanel("Decisions per second", "Decisions made and durably written, by class (all instances).", "ops", 12, 8,
			"sum by (class) (rate(toolaudit_stream_decisions_total"+rate+"))", "{{class}}")).
		WithPanel(promPanel("Consumer lag", "Records of each calls partition not yet committed, per instance: grows while the sink is slow or failing.", "short", 12, 8,
			"sum by (instance, partition) (toolaudit_stream_consumer_lag)", "{{instance}} p{{partition}}")).
		WithPanel(promPanel("Rejected share", "Share of the decisions that reject the call.", "percentunit", 8, 7,
			`sum(rate(toolaudit_stream_decisions_total{verdict="reject"}`+rate+`)) / sum(rate(toolaudit_stream_decisions_total`+rate+`))`, "rejected")).
		WithPanel(promPanel("Batch size", "Rows per sink write, median: large inserts are what ClickHouse takes cheaply.", "short", 8, 7,
			quantile("0.5", "toolaudit_stream_batch_rows"), "median rows")).
		WithPanel(promPanel("Partition pauses", "Times per second a partition's fetching paused because its worker was behind.", "ops", 8, 7,
			"sum(rate(toolaudit_stream_partition_pauses_total"+rate+"))", "pauses")).
		WithRow(row("Sink")).
		WithPanel(promPanel("Sink write latency", "Time of one INSERT into ClickHouse, and of making a batch durable (DLQ, insert with retries, commit).", "s", 12, 8,
			quantile("0.5", "toolaudit_sink_write_duration_seconds"), "insert p50",
			quantile("0.99", "toolaudit_sink_write_duration_seconds"), "insert p99",
			quantile("0.99", "toolaudit_stream_flush_seconds"), "flush p99")).
		WithPanel(promPanel("Sink retries and commit errors", "Failed sink writes that were retried, and failed offset commits, per second: a failing sink stalls the pipeline, it drops nothing.", "ops", 12, 8,
			"sum(rate(toolaudit_stream_sink_retries_total"+rate+"))", "sink retries",
			"sum(rate(toolaudit_stream_commit_errors_total"+rate+"))", "commit errors")).
		WithPanel(promPanel("Dead-lettered records", "Undecodable call records produced to the DLQ topic, per second (each is also a MALFORMED decision).", "ops", 12, 7,
			"sum(rate(toolaudit_stream_dlq_records_total"+rate+"))", "DLQ records")).
		WithPanel(promPanel("Registry history", "Rows of the registry history written to table registry_changes and dropped because the queue was full (a restart writes them again), per second.", "ops", 12, 7,
			"sum(rate(toolaudit_registry_history_changes_written_total"+rate+"))", "written",
			"sum(rate(toolaudit_registry_history_changes_dropped_total"+rate+"))", "dropped")).
		WithPanel(promPanel("Approval history", "Approval events copied from the approvals topic to table approval_events (again at every start: they collapse), dropped because the table cannot take them, skipped because they do not decode, and failed writes (retried), per second.", "ops", 12, 7,
			"sum(rate(toolaudit_approval_history_events_written_total"+rate+"))", "written",
			"sum(rate(toolaudit_approval_history_events_dropped_total"+rate+"))", "dropped",
			"sum(rate(toolaudit_approval_history_bad_events_total"+rate+"))", "bad",
			"sum(rate(toolaudit_approval_history_write_errors_total"+rate+"))", "write errors")).
		WithRow(row("Listings")).
		WithPanel(promPanel("Listing lateness", "Arrival minus observed_at of listings after the initial catch-up: --listing-hold must cover it.", "s", 12, 8,
			quantile("0.5", "toolaudit_stream_listing_lateness_seconds"), "p50",
			quantile("0.99", "toolaudit_stream_listing_lateness_seconds"), "p99",
			"max(toolaudit_stream_listings_caught_up_age_seconds)", "caught-up age")).
		WithPanel(promPanel("Registries and versions", "Registries and registry versions known to the store, and listings applied per second.", "short", 12, 8,
			"max(toolaudit_stream_registries)", "registries",
			"max(toolaudit_stream_registry_versions)", "versions",
			"sum(rate(toolaudit_stream_listings_applied_total"+rate+"))", "listings/s")).
		WithRow(row("API")).
		WithPanel(promPanel("API latency", "Time to read, decode, resolve and answer one POST /v1/resolve.", "s", 12, 8,
			quantile("0.5", "toolaudit_api_resolve_seconds"), "p50",
			quantile("0.99", "toolaudit_api_resolve_seconds"), "p99")).
		WithPanel(promPanel("API decisions per second", "Decisions answered by POST /v1/resolve, by class.", "ops", 12, 8,
			"sum by (class) (rate(toolaudit_api_decisions_total"+rate+"))", "{{class}}"))
}
