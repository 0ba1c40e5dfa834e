// Package dashboards generates toolaudit's Grafana dashboards from Go
// (github.com/grafana/grafana-foundation-sdk/go): fleet overview, MCP
// servers, incident drill-down (ClickHouse, through the
// grafana-clickhouse-datasource plugin) and pipeline health
// (Prometheus). The generated JSON is committed under json/ (for
// provisioning: its datasource variables set to the provisioned
// datasources) and import/ (for Grafana's import page: the same with
// __inputs), with the provisioning files under provisioning/ (the
// ClickHouse and Prometheus datasources, and a provider that loads
// json/); README.md says how to load them, which plugin and Grafana
// versions they need, and what was tested.
//
// Every ClickHouse query comes from package analytics, which tests each
// one on the real engine with the plugin's macro expansion; the SDK has no
// ClickHouse query type, so targets are built with its unknown-dataquery
// builder in the plugin's v4 SQL model. After editing, regenerate:
//
//	go run ./cmd/dashboardsgen
//
// TestGenerated fails while the committed JSON differs from what the code
// generates.
package dashboards
