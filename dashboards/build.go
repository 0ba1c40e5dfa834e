package dashboards

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/schema"
)

// The provisioned datasources (provisioning/datasources/toolaudit.yaml).
// Panels name no datasource uid: they name the dashboard's datasource
// variables (dsClickHouse, dsPrometheus), whose value is one of these
// uids in json/ (provisioning) and the datasource picked on Grafana's
// import page in import/ (UI import, through __inputs).
const (
	ClickHouseUID  = "toolaudit-clickhouse"
	PrometheusUID  = "toolaudit-prometheus"
	clickHouseType = "grafana-clickhouse-datasource"
	prometheusType = "prometheus"
	dsClickHouse   = "ds_clickhouse"
	dsPrometheus   = "ds_prometheus"
)

// The oldest versions that run every panel, and the pinned ones of
// deploy/compose. MinPlugin: 4.0.3 added $__fromTime_ms and $__toTime_ms
// (4.0.0-4.0.2 lack them, and five MCP panels fail); TestVersions checks
// the SQL's macros against the plugin's own macro list of each release
// (testdata/plugin-macros.txt). MinGrafana: the dashboards' schemaVersion
// (SchemaVersion, Grafana 10.4's) and plugin 4.0.3's own floor (9.5).
const (
	MinPlugin     = "4.0.3"
	MinGrafana    = "10.4.0"
	SchemaVersion = 39
	// pluginVersion marks the queries as the plugin's v4 model: without
	// it the plugin migrates them as v3 queries.
	pluginVersion = MinPlugin
)

// The dashboards' uids, stable across regenerations (links use them).
const (
	UIDFleet    = "toolaudit-fleet"
	UIDServers  = "toolaudit-servers"
	UIDIncident = "toolaudit-incident"
	UIDPipeline = "toolaudit-pipeline"
)

func ref(typ, uid string) common.DataSourceRef { return common.DataSourceRef{Type: &typ, Uid: &uid} }

var (
	clickhouse = ref(clickHouseType, "${"+dsClickHouse+"}")
	prom       = ref(prometheusType, "${"+dsPrometheus+"}")
)

// dsVariable is a datasource variable of plugin typ, set to the
// provisioned datasource uid.
func dsVariable(name, label, typ, uid string) *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder(name).Label(label).Type(typ).Current(option(uid, uid))
}

// chTarget is a ClickHouse query of the plugin, built through the SDK's
// unknown-dataquery builder (the SDK has no ClickHouse query type): the
// plugin's v4 SQL-editor model.
func chTarget(refID string, q analytics.Query) cog.Builder[variants.Dataquery] {
	queryType := "table"
	if q.Format == analytics.TimeSeries {
		queryType = "timeseries"
	}
	return variants.NewUnknownDataqueryBuilderFromObject(variants.UnknownDataquery{
		"refId":         refID,
		"datasource":    map[string]any{"type": clickHouseType, "uid": *clickhouse.Uid},
		"editorType":    "sql",
		"format":        int(q.Format),
		"queryType":     queryType,
		"rawSql":        q.SQL,
		"pluginVersion": pluginVersion,
	})
}

func promTarget(refID, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().RefId(refID).Datasource(prom).Expr(expr).LegendFormat(legend).Range()
}

// queryVariable is a variable whose options a ClickHouse query lists,
// re-run when the time range changes, in the query's order (busiest
// first: analytics.Variables). A multi-value one starts at All; a
// single-value one has no saved value, so Grafana selects the first
// option, the busiest.
func queryVariable(v analytics.VariableQuery, multi bool) *dashboard.QueryVariableBuilder {
	sql := v.SQL
	b := dashboard.NewQueryVariableBuilder(v.Name).
		Label(v.Label).
		Datasource(clickhouse).
		Query(dashboard.StringOrMap{String: &sql}).
		Definition(v.SQL).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortDisabled).
		Multi(multi).
		IncludeAll(multi)
	if multi {
		b.Current(option("All", "$__all"))
	}
	return b
}

func option(text, value string) dashboard.VariableOption {
	sel := true
	return dashboard.VariableOption{
		Selected: &sel,
		Text:     dashboard.StringOrArrayOfString{String: &text},
		Value:    dashboard.StringOrArrayOfString{String: &value},
	}
}

// classVariable offers the classes of the taxonomy.
func classVariable() *dashboard.CustomVariableBuilder {
	names := make([]string, len(schema.Classes))
	for i, c := range schema.Classes {
		names[i] = string(c)
	}
	values := strings.Join(names, ",")
	return dashboard.NewCustomVariableBuilder(analytics.VarClass).
		Label("Class").
		Values(dashboard.StringOrMap{String: &values}).
		Multi(true).
		IncludeAll(true).
		Current(option("All", "$__all"))
}

// varTraceURL is the incident dashboard's link to a decision's trace.
const varTraceURL = "trace_url"

// traceURLVariable is where a decision's trace opens: the tracing UI's
// URL, to which the trace id (hex) is appended. Jaeger's UI by default;
// Tempo through Grafana's Explore takes a URL of its own.
func traceURLVariable() *dashboard.TextBoxVariableBuilder {
	def := "http://localhost:16686/trace/"
	return dashboard.NewTextBoxVariableBuilder(varTraceURL).
		Label("Trace link").
		Description("URL of your tracing UI to which a decision's trace id is appended (the trace column's link): Jaeger's http://HOST:16686/trace/, or a Tempo Explore URL ending where the trace id goes").
		DefaultValue(dashboard.StringOrMap{String: &def}).
		Current(option(def, def))
}

// changeAnnotations marks listing changes on a dashboard's time series.
func changeAnnotations() *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().
		Name("Listing changes").
		Datasource(clickhouse).
		Enable(true).
		IconColor("orange").
		Target(chTarget("annotations", analytics.ChangeAnnotations()))
}

// groupingToMatrix turns (row, column, value) rows into a matrix table.
func groupingToMatrix(row, column, value string) dashboard.DataTransformerConfig {
	return dashboard.DataTransformerConfig{Id: "groupingToMatrix", Options: map[string]any{
		"rowField": row, "columnField": column, "valueField": value, "emptyValue": "zero",
	}}
}

// link is a field's data link: a click opens url (Grafana interpolates
// ${__value.raw}, variables and ${__url_time_range}).
func link(title, url string) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: "links", Value: []map[string]any{{"title": title, "url": url}}}
}

// Marshal is a dashboard as the committed JSON: indented, a final newline.
func Marshal(d dashboard.Dashboard) ([]byte, error) {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("dashboards: marshal %s: %w", *d.Uid, err)
	}
	return append(b, '\n'), nil
}

// input is an entry of an exported dashboard's __inputs: a datasource
// Grafana's import page asks for, substituted for ${Name} in the JSON.
type input struct {
	Name        string `json:"name"`
	Label       string `json:"label"`
	Description string `json:"description"`
	Type        string `json:"type"`
	PluginID    string `json:"pluginId"`
	PluginName  string `json:"pluginName"`
}

// require is an entry of __requires: what the import page says the
// dashboard needs.
type require struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Version string `json:"version"`
}

// importInputs are the datasource inputs of UI import, by datasource
// variable.
var importInputs = map[string]input{
	dsClickHouse: {"DS_CLICKHOUSE", "ClickHouse", "The ClickHouse that holds resolverd's tables (its default database)", "datasource", clickHouseType, "ClickHouse"},
	dsPrometheus: {"DS_PROMETHEUS", "Prometheus", "The Prometheus that scrapes resolverd's /metrics", "datasource", prometheusType, "Prometheus"},
}

// MarshalImport is a dashboard for Grafana's import page (Dashboards >
// New > Import): as Marshal, with __inputs and __requires first and each
// datasource variable set to ${DS_...}, which the import replaces by the
// datasource picked for that input. It changes d's variables.
func MarshalImport(d dashboard.Dashboard) ([]byte, error) {
	var inputs []input
	for i, v := range d.Templating.List {
		in, ok := importInputs[v.Name]
		if v.Type != "datasource" || !ok {
			continue
		}
		d.Templating.List[i].Current = ptr(option("${"+in.Name+"}", "${"+in.Name+"}"))
		inputs = append(inputs, in)
	}
	reqs := []require{{"grafana", "grafana", "Grafana", MinGrafana}}
	for _, in := range inputs {
		version := ""
		if in.PluginID == clickHouseType {
			version = MinPlugin
		}
		reqs = append(reqs, require{"datasource", in.PluginID, in.PluginName, version})
	}
	b, err := Marshal(d)
	if err != nil {
		return nil, err
	}
	head, err := json.MarshalIndent(struct {
		Inputs   []input   `json:"__inputs"`
		Requires []require `json:"__requires"`
	}{inputs, reqs}, "", "  ")
	if err != nil {
		return nil, err
	}
	// Both objects are indented alike: join their members.
	return append(append(head[:len(head)-2], ",\n"...), b[2:]...), nil
}

func ptr[T any](v T) *T { return &v }

// Dashboard is one generated dashboard and its file under json/.
type Dashboard struct {
	File string
	dashboard.Dashboard
}

// All builds every dashboard.
func All() ([]Dashboard, error) {
	var out []Dashboard
	for _, b := range []struct {
		file  string
		build func() *dashboard.DashboardBuilder
	}{
		{"fleet-overview.json", fleet},
		{"mcp-servers.json", servers},
		{"incident-drilldown.json", incident},
		{"pipeline-health.json", pipeline},
	} {
		d, err := b.build().Build()
		if err != nil {
			return nil, fmt.Errorf("dashboards: %s: %w", b.file, err)
		}
		numberPanels(&d)
		d.SchemaVersion = SchemaVersion
		out = append(out, Dashboard{File: b.file, Dashboard: d})
	}
	return out, nil
}

// numberPanels gives every panel and row its id, 1, 2, ... in layout
// order: Grafana keys panel links, the panel editor and view=panel URLs
// by them.
func numberPanels(d *dashboard.Dashboard) {
	var n uint32
	for i := range d.Panels {
		n++
		switch p := d.Panels[i]; {
		case p.Panel != nil:
			id := n
			p.Panel.Id = &id
		case p.RowPanel != nil:
			p.RowPanel.Id = n
		}
	}
}

// Expr is one Prometheus expression of a dashboard panel.
type Expr struct {
	Dashboard, Panel, Expr string
}

// PromQL returns every Prometheus expression of the dashboards, as
// Grafana sends it but for $__rate_interval, which Grafana fills in.
func PromQL() ([]Expr, error) {
	ds, err := All()
	if err != nil {
		return nil, err
	}
	var out []Expr
	for _, d := range ds {
		for _, p := range d.Panels {
			if p.Panel == nil {
				continue
			}
			for _, tg := range p.Panel.Targets {
				q, ok := tg.(prometheus.Dataquery)
				if !ok {
					continue
				}
				title := ""
				if p.Panel.Title != nil {
					title = *p.Panel.Title
				}
				out = append(out, Expr{Dashboard: d.File, Panel: title, Expr: q.Expr})
			}
		}
	}
	return out, nil
}
