package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/schema"
)

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("report").Parse(pageTemplate))

// WriteHTML writes the report as one self-contained HTML page: styles
// inline, charts as inline SVG, no script, font or any other resource to
// fetch (its Content-Security-Policy forbids them). Every number shown
// carries its query and column (data-q, data-col) and its exact value
// (data-v), so that a test can compare the page with the queries.
func (r *Report) WriteHTML(w io.Writer) error {
	v := r.view()
	return page.Execute(w, v)
}

type view struct {
	Title, Range, Filters, Created string
	Empty                          bool
	Tiles                          []tile
	ClassBars                      bars
	ModelChart                     lines
	Tables                         []table // the fleet's
	Versions                       table
	Deployments                    []deployment
	MoreDeployments                int
	Session                        *sessionView
	Note                           string
}

// tile is one headline number.
type tile struct {
	Label, Query, Col, Text, Raw string
}

type cell struct{ Col, Text, Raw string }

type table struct {
	ID, Title, Description string
	Columns                []string
	Rows                   [][]cell
}

func newTable(id, title, description string, res *analytics.Result) table {
	t := table{ID: id, Title: title, Description: description}
	if res == nil {
		return t
	}
	t.Columns = res.Columns
	for _, row := range res.Rows {
		cs := make([]cell, len(row))
		for j, val := range row {
			col := res.Columns[j]
			cs[j] = cell{Col: col, Text: Format(col, val), Raw: raw(val)}
		}
		t.Rows = append(t.Rows, cs)
	}
	return t
}

// raw is a value exactly, for data-v: numbers in full precision.
func raw(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case nil:
		return ""
	case time.Time:
		return x.UTC().Format(time.RFC3339Nano)
	}
	return Format("", v)
}

func (r *Report) view() view {
	fleet := analytics.Fleet()
	desc := func(id string) string { return pick(fleet, id).Description }
	v := view{
		Title:   "toolaudit report: " + r.Analysis,
		Range:   r.From.UTC().Format("2006-01-02 15:04:05") + " .. " + r.To.UTC().Format("2006-01-02 15:04:05") + " UTC",
		Filters: "registries: " + list(r.Options.Registries) + "; models: " + list(r.Models),
		Created: r.Created.Format(time.RFC3339),
		Note:    "Counts are decisions as delivered, from the rollups the Grafana dashboards read: a call decided twice after a resolverd crash counts twice. The session's decisions are read exactly (FINAL).",
	}
	if d, _ := num(r.Verdicts, "decisions"); d == 0 {
		v.Empty = true
	}
	for _, t := range []struct{ label, q, col string }{
		{"decisions", "fleet.verdicts", "decisions"},
		{"allowed", "fleet.verdicts", "allowed"},
		{"rejected", "fleet.verdicts", "rejected"},
		{"hallucination rate", "fleet.rates", "hallucination_rate"},
		{"unknown-tool rate", "fleet.rates", "unknown_tool_rate"},
		{"schema-reject rate", "fleet.rates", "schema_reject_rate"},
		{"coercible share of H3", "fleet.rates", "h3_coercible_share"},
		{"near misses among unknown names", "fleet.rates", "near_miss_share"},
	} {
		res := r.Verdicts
		if t.q == "fleet.rates" {
			res = r.Rates
		}
		var val any
		if c := res.Col(t.col); c >= 0 && len(res.Rows) > 0 {
			val = res.Rows[0][c]
		}
		v.Tiles = append(v.Tiles, tile{Label: t.label, Query: t.q, Col: t.col, Text: Format(t.col, val), Raw: raw(val)})
	}
	v.ClassBars = classBars(r.ClassMix)
	v.ModelChart = rateLines(r.ModelSeries, r.From, r.To)
	v.Tables = []table{
		newTable("fleet.class_mix", "Class mix", desc("fleet.class_mix"), r.ClassMix),
		newTable("fleet.by_model", "Models", desc("fleet.by_model"), r.ByModel),
		newTable("fleet.by_surface", "Invocation surfaces", desc("fleet.by_surface"), r.BySurface),
		newTable("fleet.top_fabricated", "Top fabricated tool names", desc("fleet.top_fabricated"), r.Fabricated),
	}
	servers := analytics.Servers()
	v.Versions = newTable("servers.version_in_force", "Registry version in force", pick(servers, "servers.version_in_force").Description, r.Versions)
	for _, d := range r.Deployments {
		v.Deployments = append(v.Deployments, deployment{
			Name:       d.Name,
			Matrix:     newMatrix(d.SharedNames),
			Collisions: newTable("servers.collisions", "Colliding names and who got the calls", pick(servers, "servers.collisions").Description, d.Collisions),
			Classes:    newTable("servers.mcp_classes", "M1-M5 by server", pick(servers, "servers.mcp_classes").Description, d.Classes),
		})
	}
	v.MoreDeployments = r.MoreRegistries
	if s := r.Session; s != nil {
		inc := analytics.Incident()
		v.Session = &sessionView{
			Name:      r.Options.Session,
			Timeline:  newTimeline(s.Decisions),
			Decisions: newTable("incident.session_decisions", "Decisions, in order", pick(inc, "incident.session_decisions").Description, s.Decisions),
			TOCTOU:    newTable("incident.toctou", "Call path against stream (time of check, time of use)", pick(inc, "incident.toctou").Description, s.TOCTOU),
			Changes:   newTable("changes.in_range", "Registry changes in the range", pick(inc, "changes.in_range").Description, s.Changes),
		}
	}
	return v
}

type sessionView struct {
	Name                       string
	Timeline                   timeline
	Decisions, TOCTOU, Changes table
}

type deployment struct {
	Name                string
	Matrix              matrix
	Collisions, Classes table
}

// classColor is each class's color: green for OK, reds for the model's
// mistakes (H), blues for the deployment's (M), grey for MALFORMED.
func classColor(c string) string {
	switch schema.Class(c) {
	case schema.OK:
		return "#3a9a4a"
	case schema.H1:
		return "#c62828"
	case schema.H2:
		return "#e65100"
	case schema.H3:
		return "#f9a825"
	case schema.H4:
		return "#ad1457"
	case schema.H5:
		return "#8d6e63"
	case schema.M1:
		return "#283593"
	case schema.M2:
		return "#1565c0"
	case schema.M3:
		return "#00838f"
	case schema.M4:
		return "#6a1b9a"
	case schema.M5:
		return "#4527a0"
	}
	return "#9e9e9e"
}

// bars is the class mix as a horizontal bar chart.
type bars struct {
	Width, Height int
	Bars          []bar
}

type bar struct {
	Label, Text, Raw, Color string
	Y, W, TextX             int
}

func classBars(res *analytics.Result) bars {
	const barH, left, maxW = 22, 90, 420
	b := bars{Width: left + maxW + 90}
	if res == nil {
		return b
	}
	var top float64
	for i := range res.Rows {
		n, _ := analytics.Float(res.Rows[i][res.Col("decisions")])
		top = math.Max(top, n)
	}
	for i, row := range res.Rows {
		n, _ := analytics.Float(row[res.Col("decisions")])
		class := Format("class", row[res.Col("class")])
		w := 0
		if top > 0 {
			w = max(1, int(math.Round(maxW*n/top)))
		}
		b.Bars = append(b.Bars, bar{Label: class, Text: Format("decisions", row[res.Col("decisions")]), Raw: raw(row[res.Col("decisions")]),
			Color: classColor(class), Y: i * barH, W: w, TextX: left + w + 6})
	}
	b.Height = len(b.Bars)*barH + 4
	return b
}

// lines is a time series chart: one polyline per series.
type lines struct {
	Width, Height, Left, Top, PlotW, PlotH int
	YMax, XFrom, XTo                       string
	Series                                 []series
}

type series struct {
	Name, Color, Points string
	Dots                []dot
}

type dot struct {
	X, Y              float64
	Title, Raw, Label string
}

var palette = []string{"#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#455a64", "#9e9d24"}

// rateLines charts fleet.hallucination_by_model: x the range, y the rate.
func rateLines(res *analytics.Result, from, to time.Time) lines {
	l := lines{Width: 860, Height: 280, Left: 56, Top: 12, PlotW: 640, PlotH: 220,
		XFrom: from.UTC().Format("2006-01-02 15:04"), XTo: to.UTC().Format("2006-01-02 15:04")}
	if res == nil || len(res.Rows) == 0 {
		return l
	}
	ti, mi, ri := res.Col("time"), res.Col("model"), res.Col("rate")
	ymax := 0.0
	for _, row := range res.Rows {
		if v, ok := analytics.Float(row[ri]); ok {
			ymax = math.Max(ymax, v)
		}
	}
	ymax = niceCeil(ymax)
	l.YMax = Format("max_rate", ymax)
	span := to.Sub(from).Seconds()
	byModel := map[string]*series{}
	var order []string
	for _, row := range res.Rows {
		v, ok := analytics.Float(row[ri])
		t, okt := row[ti].(time.Time)
		if !ok || !okt {
			continue
		}
		m := Format("model", row[mi])
		s := byModel[m]
		if s == nil {
			s = &series{Name: m}
			byModel[m] = s
			order = append(order, m)
		}
		x := float64(l.Left) + float64(l.PlotW)*math.Min(1, math.Max(0, t.Sub(from).Seconds()/span))
		y := float64(l.Top) + float64(l.PlotH)*(1-v/ymax)
		s.Dots = append(s.Dots, dot{X: round1(x), Y: round1(y), Raw: raw(v),
			Title: m + " " + t.UTC().Format("2006-01-02 15:04") + ": " + Format("rate", v)})
	}
	slices.Sort(order)
	for i, m := range order {
		s := byModel[m]
		s.Color = palette[i%len(palette)]
		for _, d := range s.Dots {
			s.Points += fmt.Sprintf("%g,%g ", d.X, d.Y)
		}
		l.Series = append(l.Series, *s)
	}
	return l
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// niceCeil is the axis' top: a round number at or above v.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	for _, c := range []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1} {
		if v <= c {
			return c
		}
	}
	return math.Ceil(v)
}

// matrix is servers.shared_names as a server x server table.
type matrix struct {
	Servers []string
	Rows    []matrixRow
}

type matrixRow struct {
	Server string
	Cells  []matrixCell
}

type matrixCell struct {
	Other, Text, Raw string
	Style            template.CSS
}

func newMatrix(res *analytics.Result) matrix {
	var m matrix
	if res == nil || len(res.Rows) == 0 {
		return m
	}
	si, oi, ni := res.Col("server"), res.Col("other"), res.Col("shared_names")
	val := map[[2]string]float64{}
	seen := map[string]bool{}
	top := 0.0
	for _, row := range res.Rows {
		s, o := Format("", row[si]), Format("", row[oi])
		n, _ := analytics.Float(row[ni])
		val[[2]string{s, o}] = n
		seen[s], seen[o] = true, true
		top = math.Max(top, n)
	}
	for s := range seen {
		m.Servers = append(m.Servers, s)
	}
	slices.Sort(m.Servers)
	for _, s := range m.Servers {
		row := matrixRow{Server: s}
		for _, o := range m.Servers {
			n := val[[2]string{s, o}]
			c := matrixCell{Other: o, Text: strconv.FormatFloat(n, 'f', -1, 64), Raw: strconv.FormatFloat(n, 'f', -1, 64)}
			switch {
			case s == o:
				c.Text, c.Raw, c.Style = "", "", "background:#eee"
			case n > 0:
				c.Style = template.CSS(fmt.Sprintf("background:rgba(198,40,40,%.2f)", 0.15+0.65*n/top))
			}
			row.Cells = append(row.Cells, c)
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

// timeline is a session's decisions on a time axis, one lane per source.
type timeline struct {
	Width, Height, Left, PlotW int
	From, To                   string
	Lanes                      []lane
	Marks                      []mark
	Classes                    []mark // one per class present, for the legend
}

type lane struct {
	Name string
	Y    int
}

type mark struct {
	X, Y         float64
	Color, Title string
	Class, Raw   string
}

func newTimeline(res *analytics.Result) timeline {
	tl := timeline{Width: 860, Left: 80, PlotW: 740}
	if res == nil || len(res.Rows) == 0 {
		return tl
	}
	ti, si, ci, tooli, reasoni := res.Col("time"), res.Col("source"), res.Col("class"), res.Col("tool"), res.Col("reason")
	var first, last time.Time
	laneOf := map[string]int{}
	for _, row := range res.Rows {
		t, _ := row[ti].(time.Time)
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
		src := Format("", row[si])
		if _, ok := laneOf[src]; !ok {
			laneOf[src] = len(laneOf)
		}
	}
	var names []string
	for n := range laneOf {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		laneOf[n] = i
		tl.Lanes = append(tl.Lanes, lane{Name: n, Y: 24 + 36*i})
	}
	tl.Height = 24 + 36*len(names) + 24
	span := last.Sub(first).Seconds()
	tl.From, tl.To = first.UTC().Format("15:04:05.000"), last.UTC().Format("15:04:05.000")
	for _, row := range res.Rows {
		t, _ := row[ti].(time.Time)
		x := float64(tl.Left) + float64(tl.PlotW)/2
		if span > 0 {
			x = float64(tl.Left) + float64(tl.PlotW)*t.Sub(first).Seconds()/span
		}
		class := Format("class", row[ci])
		src := Format("", row[si])
		if !slices.ContainsFunc(tl.Classes, func(m mark) bool { return m.Class == class }) {
			tl.Classes = append(tl.Classes, mark{Class: class, Color: classColor(class)})
		}
		tl.Marks = append(tl.Marks, mark{X: round1(x), Y: float64(tl.Lanes[laneOf[src]].Y), Color: classColor(class), Class: class, Raw: raw(row[ti]),
			Title: t.UTC().Format("15:04:05.000") + " " + src + " " + Format("", row[tooli]) + ": " + class + " " + Format("", row[reasoni])})
	}
	slices.SortFunc(tl.Classes, func(a, b mark) int { return schema.Class(a.Class).Index() - schema.Class(b.Class).Index() })
	return tl
}
