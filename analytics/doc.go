// Package analytics is the one home of the fleet analytics' ClickHouse
// queries: every panel of the Grafana dashboards (package dashboards) and
// every section of `resolverd report` runs one of them, so the report's
// numbers are the dashboards'.
//
// Queries are written in the dialect of the grafana-clickhouse-datasource
// plugin: Grafana template variables (${registry:sqlstring}) and the
// plugin's macros ($__timeFilter, $__fromTime, $__toTime, $__interval_s,
// $__conditionalAll, ...). Expand fills them in as the plugin does,
// step by step (its doc names the plugin's source it follows), so that
// tests run the very SQL Grafana would send, and the report runs it
// without Grafana.
//
// # What each query reads, and how exact it is
//
// No query reads table decisions over a time range: decisions is sorted
// by call key, so a range of it is a scan of whole months (seconds at
// 100M rows). The fleet and server panels read the rollups of
// schema/ddl/0007_analytics.sql, fed at insert by materialized views:
//
//   - decisions_rollup_minute and decisions_rollup_hour (counts by
//     registry, model, provider, surface, source, class): the minute tier
//     for ranges up to TierSeconds (two days), the hour tier beyond, the
//     other cut by a constant condition; the range, half-open, is
//     rounded out to whole buckets (period.go: the one rule of a range,
//     and how adjacent periods compare exactly);
//   - decisions_by_tool_day and fabricated_names_day: whole UTC days;
//   - sessions_by_hour, registry_versions_seen, call_path_decisions.
//
// Rollups count decisions as delivered. They equal decisions FINAL unless
// a resolverd crash or partition move made calls be decided again before
// their offsets were committed: those count twice (at most the writer's
// batches in flight per move), or under two classes if the second decision
// differs. Each Query's Description says so where it applies. The session
// drill-down and the time-of-check/time-of-use view read decisions with
// FINAL through its primary key (the call keys found in sessions_by_hour's
// call_keys, session_calls for history before migration 0011, or
// call_path_decisions): exact. The registry
// history (registry_changes) is exact: every listing change, replayed;
// so are the approved definitions' queries, which read it with the
// approvals' history (approval_events), both with FINAL.
//
// Rates (Hallucination, UnknownTool, SchemaReject) are over the decisions
// that are not MALFORMED; classes.go defines each group once. A
// MALFORMED decision has no registry, model, surface or session that can
// be trusted: Malformed counts them whatever those filters say.
//
// # Read-only, as Grafana's user
//
// No query carries a SETTINGS clause or writes: Grafana's ClickHouse user
// should have readonly = 1, which refuses any setting, even a query's.
// The tests run every query as such a user.
//
// # As a dashboard opens
//
// Variables lists what has decisions in the time range, busiest first:
// a variable with no saved value opens on its first option. Where a
// query has a LIMIT, its title says so and the rows cut are the oldest
// or the least.
//
// Report are the queries `resolverd report` adds: one per section over
// every registry at once, ranked by the calls affected, with the totals
// of what their LIMIT cut.
package analytics
