package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/toolaudit/toolaudit/analytics"
)

// tags mark every dashboard, for Grafana's search.
var tags = []string{"toolaudit"}

func base(uid, title, description, from string) *dashboard.DashboardBuilder {
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags(tags).
		Editable().
		Timezone(common.TimeZoneUtc).
		Time(from, "now").
		Refresh("1m").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("toolaudit").Type(dashboard.DashboardLinkTypeDashboards).
			Tags(tags).AsDropdown(true).KeepTime(true).IncludeVars(true))
}

// clickHouseVariable is the ClickHouse datasource every ClickHouse panel
// reads.
func clickHouseVariable() *dashboard.DatasourceVariableBuilder {
	return dsVariable(dsClickHouse, "ClickHouse", clickHouseType, ClickHouseUID)
}

// analysisVariable selects the analysis: "live" (resolverd run's), else
// the latest.
func analysisVariable() *dashboard.QueryVariableBuilder {
	return queryVariable(analytics.Variables()[analytics.VarAnalysis], false)
}

func multi(name string) *dashboard.QueryVariableBuilder {
	return queryVariable(analytics.Variables()[name], true)
}

// fleet is the weekly fleet review: which models and surfaces invent
// tools and arguments, how often, and what they invent.
func fleet() *dashboard.DashboardBuilder {
	qs := analytics.Fleet()
	return base(UIDFleet, "toolaudit: fleet overview",
		"Hallucination, unknown-tool and schema-reject rates by model and invocation surface, the class mix, verdicts, and the tool names models invent with the nearest real name. Read from the rollups of resolverd's decisions (see each panel's description for what it counts).",
		"now-7d").
		WithVariable(clickHouseVariable()).
		WithVariable(analysisVariable()).
		WithVariable(multi(analytics.VarRegistry)).
		WithVariable(multi(analytics.VarModel)).
		WithVariable(multi(analytics.VarSurface)).
		WithVariable(multi(analytics.VarSource)).
		Annotation(changeAnnotations()).
		WithRow(row("Headline")).
		WithPanel(statPanel(pick(qs, "fleet.rates"), "percentunit", 16, 5).Decimals(2)).
		WithPanel(statPanel(pick(qs, "fleet.verdicts"), "short", 8, 5)).
		WithRow(row("By model and surface")).
		WithPanel(tablePanel(pick(qs, "fleet.by_model"), 12, 7)).
		WithPanel(tablePanel(pick(qs, "fleet.by_surface"), 12, 7)).
		WithRow(row("Over time")).
		WithPanel(seriesPanel(pick(qs, "fleet.hallucination_by_model"), "percentunit", 12, 9).Interval("1m")).
		WithPanel(seriesPanel(pick(qs, "fleet.hallucination_by_surface"), "percentunit", 12, 9).Interval("1m")).
		WithPanel(seriesPanel(pick(qs, "fleet.classes_over_time"), "short", 16, 8).Interval("1m").
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))).
		WithPanel(malformedPanel(8, 8)).
		WithRow(row("What models invent")).
		// The share is the count's, on another scale: not drawn.
		WithPanel(barPanel(pick(qs, "fleet.class_mix"), "class", 10, 10).
			OverrideByName("share_pct", []dashboard.DynamicConfigValue{{Id: "custom.hideFrom", Value: map[string]any{"viz": true, "legend": true, "tooltip": true}}})).
		WithPanel(tablePanel(pick(qs, "fleet.top_fabricated"), 14, 10))
}

// servers is the MCP servers' review: collisions and shadowing, the
// multi-server classes per server, drift and stale definitions with the
// listing changes that caused them, the registry version in force, and
// the approved definitions (what waits for a review, the verdicts).
func servers() *dashboard.DashboardBuilder {
	qs := analytics.Servers()
	return base(UIDServers, "toolaudit: MCP servers",
		"One MCP deployment (registry): which servers provide the same tool names (ties and shadowing) and who got the calls, M1-M5 by server, stale definitions (M4) and drift with the listing changes that caused them, the registry version in force, and the approved definitions: what waits for a review and who approved or rejected what.",
		"now-7d").
		WithVariable(clickHouseVariable()).
		WithVariable(analysisVariable()).
		WithVariable(queryVariable(analytics.MCPRegistry(), false)).
		WithVariable(multi(analytics.VarSource)).
		Annotation(changeAnnotations()).
		WithRow(row("Collisions and shadowing")).
		WithPanel(tablePanel(pick(qs, "servers.shared_names"), 10, 9).
			WithTransformation(groupingToMatrix("server", "other", "shared_names"))).
		WithPanel(tablePanel(pick(qs, "servers.collisions"), 14, 9)).
		WithRow(row("By server")).
		WithPanel(tablePanel(pick(qs, "servers.mcp_classes"), 12, 8)).
		WithPanel(tablePanel(pick(qs, "servers.version_in_force"), 12, 8)).
		WithPanel(seriesPanel(pick(qs, "servers.stale_by_server"), "short", 12, 8).Interval("1d")).
		WithPanel(seriesPanel(pick(qs, "servers.drift_by_server"), "short", 12, 8).Interval("1d")).
		WithPanel(tablePanel(pick(qs, "servers.stale_tools"), 24, 8)).
		WithRow(row("Registry history")).
		WithPanel(tablePanel(pick(qs, "changes.in_range"), 24, 10)).
		WithRow(row("Approved definitions")).
		WithPanel(tablePanel(pick(qs, "approvals.pending"), 24, 8)).
		WithPanel(tablePanel(pick(qs, "approvals.recent"), 24, 8))
}

// incident is the drill-down during an incident: what did this agent
// session call, what was rejected and why, what changed in the registry
// just before.
func incident() *dashboard.DashboardBuilder {
	qs := analytics.Incident()
	// The link keeps every filter and the range.
	sessionLink := "/d/" + UIDIncident + "?var-session=${__value.raw:percentencode}"
	for _, v := range []string{dsClickHouse, analytics.VarAnalysis, analytics.VarRegistry, analytics.VarModel, analytics.VarAgent, analytics.VarSource, analytics.VarClass} {
		sessionLink += "&${" + v + ":queryparam}"
	}
	sessionLink += "&${__url_time_range}"
	return base(UIDIncident, "toolaudit: incident drill-down",
		"Pick a session (it opens on the one with the most rejections; type another, or click one in the sessions table): its decisions in order with the reason, path, resolved server and tool, registry version and digests; the calls whose gate and stream decisions differ; and the registry changes inside the range.",
		"now-6h").
		WithVariable(clickHouseVariable()).
		WithVariable(analysisVariable()).
		WithVariable(multi(analytics.VarRegistry)).
		WithVariable(multi(analytics.VarModel)).
		WithVariable(multi(analytics.VarAgent)).
		WithVariable(multi(analytics.VarSource)).
		WithVariable(classVariable()).
		WithVariable(queryVariable(analytics.Variables()[analytics.VarSession], false).
			Description("session_id of the calls to show: the session with the most rejections in the range unless another is picked or typed")).
		WithVariable(traceURLVariable()).
		Annotation(changeAnnotations()).
		WithRow(row("Sessions")).
		WithPanel(tablePanel(pick(qs, "incident.sessions"), 24, 8).
			OverrideByName("session", []dashboard.DynamicConfigValue{link("Open this session", sessionLink)})).
		WithRow(row("The session")).
		WithPanel(tablePanel(pick(qs, "incident.session_decisions"), 24, 12).
			OverrideByName("trace", []dashboard.DynamicConfigValue{link("Open the trace", "${"+varTraceURL+"}${__value.raw}")})).
		WithPanel(tablePanel(pick(qs, "incident.toctou"), 24, 6)).
		WithPanel(malformedPanel(24, 6)).
		WithRow(row("Registry changes")).
		WithPanel(tablePanel(pick(qs, "changes.in_range"), 24, 8))
}
