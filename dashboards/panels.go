package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/barchart"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/toolaudit/toolaudit/analytics"
)

// pick returns the query of that ID; a missing one is a bug of this
// package, which TestClickHouseTargets catches.
func pick(qs []analytics.Query, id string) analytics.Query {
	for _, q := range qs {
		if q.ID == id {
			return q
		}
	}
	panic("dashboards: no analytics query " + id)
}

func statPanel(q analytics.Query, unit string, w, h uint32) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Title(q.Title).Description(q.Description).
		Datasource(clickhouse).
		WithTarget(chTarget("A", q)).
		Unit(unit).
		Span(w).Height(h).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("/.*/")).
		ColorMode(common.BigValueColorModeNone).
		GraphMode(common.BigValueGraphModeNone)
}

func tablePanel(q analytics.Query, w, h uint32) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Title(q.Title).Description(q.Description).
		Datasource(clickhouse).
		WithTarget(chTarget("A", q)).
		// The SDK leaves the footer's reducer null, which its own strict
		// decoder then rejects.
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"})).
		// Rates and shares are fractions; *_pct are percents already.
		OverrideByRegexp(`.*_(rate|share)$`, []dashboard.DynamicConfigValue{{Id: "unit", Value: "percentunit"}, {Id: "decimals", Value: 2}}).
		OverrideByRegexp(`.*_pct$`, []dashboard.DynamicConfigValue{{Id: "unit", Value: "percent"}}).
		Span(w).Height(h)
}

// legend and tooltip are those of every chart: each series named below
// it, and every series' value at the cursor, largest first.
func legend() *common.VizLegendOptionsBuilder {
	return common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)
}

func tooltip() *common.VizTooltipOptionsBuilder {
	return common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)
}

func seriesPanel(q analytics.Query, unit string, w, h uint32) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Title(q.Title).Description(q.Description).
		Datasource(clickhouse).
		WithTarget(chTarget("A", q)).
		Unit(unit).
		Min(0).
		Legend(legend()).Tooltip(tooltip()).
		Span(w).Height(h)
}

// malformedPanel is analytics.Malformed: the unreadable calls, whatever
// the filters.
func malformedPanel(w, h uint32) *timeseries.PanelBuilder {
	return seriesPanel(analytics.Malformed(), "short", w, h).Interval("1m")
}

func barPanel(q analytics.Query, x string, w, h uint32) *barchart.PanelBuilder {
	return barchart.NewPanelBuilder().
		Title(q.Title).Description(q.Description).
		Datasource(clickhouse).
		WithTarget(chTarget("A", q)).
		XField(x).
		ShowValue(common.VisibilityModeAuto).
		Legend(legend()).Tooltip(tooltip()).
		Span(w).Height(h)
}

// promPanel is a Prometheus time series of one or more expressions
// (expr, legend pairs).
func promPanel(title, description, unit string, w, h uint32, exprs ...string) *timeseries.PanelBuilder {
	b := timeseries.NewPanelBuilder().
		Title(title).Description(description).
		Datasource(prom).
		Unit(unit).
		Min(0).
		Legend(legend()).Tooltip(tooltip()).
		Span(w).Height(h)
	for i := 0; i+1 < len(exprs); i += 2 {
		b.WithTarget(promTarget(string(rune('A'+i/2)), exprs[i], exprs[i+1]))
	}
	return b
}

// row is a dashboard row (a section header).
func row(title string) *dashboard.RowBuilder { return dashboard.NewRowBuilder(title) }
