package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/schema"
)

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("report").Parse(strings.Replace(pageTemplate, "{{.CSP}}", CSP, 1)))

// CSP is the page's Content-Security-Policy: it fetches nothing, runs no
// script; only its inline styles and data: images apply.
const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

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
	Title, Range, Filters, Created, Bucket, PrevNote string
	// From, To, PrevFrom and PrevTo are the range and the period before
	// (RFC 3339), for data- attributes; RangeNote and PrevRange as read.
	From, To, PrevFrom, PrevTo, RangeNote, PrevRange string
	Empty                                            bool
	Tiles                                            []tile
	Problems                                         []problemView
	ClassBars                                        bars
	ModelChart                                       lines
	Sections                                         []sectionView
	Session                                          *sessionView
	Note                                             string
}

// tile is one headline number and its change.
type tile struct {
	Label, Query, Col, Text, Raw, Prev, Change string
	Worse                                      bool
}

// problemView is one of the top problems, linking to its section.
type problemView struct {
	Kind, Text, Section, Query, CallsText string
	Calls                                 int64
	Row                                   int
}

type sectionView struct {
	Table table
	// More says what the table cut; Note, if set, stands for the table
	// (approvals not in use).
	More, Note string
}

type cell struct {
	Col, Text, Raw string
	Num            bool
}

type table struct {
	ID, Section, Title, Description string
	// Columns are the query's; Headers the same as a person reads them
	// (spaces for underscores, so that a narrow column wraps between
	// words).
	Columns, Headers []string
	Rows             [][]cell
}

func newTable(id, title, description string, res *analytics.Result) table {
	t := table{ID: id, Title: title, Description: description}
	if res == nil {
		return t
	}
	t.Columns = res.Columns
	for _, c := range res.Columns {
		t.Headers = append(t.Headers, strings.ReplaceAll(c, "_", " "))
	}
	for _, row := range res.Rows {
		cs := make([]cell, len(row))
		for j, val := range row {
			col := res.Columns[j]
			_, isNum := analytics.Float(val)
			cs[j] = cell{Col: col, Text: Format(col, val), Raw: raw(val), Num: isNum}
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
	case bool:
		return strconv.FormatBool(x)
	}
	return Format("", v)
}

func (r *Report) view() view {
	v := view{
		Title:    "toolaudit report: " + r.Analysis,
		Range:    r.From.UTC().Format("2006-01-02 15:04") + " .. " + r.To.UTC().Format("2006-01-02 15:04") + " UTC (" + human(r.To.Sub(r.From)) + ")",
		Filters:  "registries: " + list(r.Options.Registries) + "; models: " + list(r.Models),
		Created:  r.Created.Format(time.RFC3339),
		Bucket:   human(r.Interval),
		PrevNote: r.PrevNote(),
		From:     r.From.UTC().Format(time.RFC3339), To: r.To.UTC().Format(time.RFC3339),
		PrevFrom: r.PrevFrom.UTC().Format(time.RFC3339), PrevTo: r.PrevTo.UTC().Format(time.RFC3339),
		RangeNote: r.RangeNote(),
		PrevRange: r.PrevFrom.UTC().Format("2006-01-02 15:04") + " .. " + r.PrevTo.UTC().Format("2006-01-02 15:04") + " UTC",
		Note:      "Counts are decisions as delivered, from the rollups the Grafana dashboards read: a call decided twice after a resolverd crash counts twice. The session's decisions are read exactly (FINAL). The dashboards list every row these tables cut.",
	}
	if d, _ := num(r.Verdicts, "decisions"); d == 0 {
		v.Empty = true
	}
	for _, h := range r.Headlines() {
		v.Tiles = append(v.Tiles, tile{Label: h.Label, Query: h.Query, Col: h.Col, Text: h.Text, Raw: raw(h.Value), Prev: raw(h.Prev), Change: h.Change, Worse: h.Worse})
	}
	for _, p := range r.Problems() {
		v.Problems = append(v.Problems, problemView{Kind: p.Kind, Text: p.Text, Section: p.Section, Query: p.Query, Calls: p.Calls, CallsText: Calls(p.Calls), Row: p.Row})
	}
	v.ClassBars = classBars(r.ClassMix)
	v.ModelChart = rateLines(r.ModelSeries, r.Interval)
	descs := map[string]string{}
	for _, q := range append(analytics.Fleet(), analytics.Report()...) {
		descs[q.ID] = q.Description
	}
	for _, s := range r.sections() {
		c := cut(s.res, s.rank, analytics.ReportTop)
		t := newTable(s.query, s.title, descs[s.query], c.Result)
		t.Section = s.id
		sv := sectionView{Table: t}
		if n := r.ApprovalsNote(); s.id == "pending" && n != "" {
			sv = sectionView{Table: table{ID: s.query, Section: s.id, Title: s.title, Description: t.Description}, Note: n}
			v.Sections = append(v.Sections, sv)
			continue
		}
		if c.MoreRows > 0 {
			sv.More = fmt.Sprintf("and %d more%s", c.MoreRows, moreCalls(c, s.rank))
		}
		v.Sections = append(v.Sections, sv)
	}
	if s := r.Session; s != nil {
		inc := analytics.Incident()
		decisions := cut(s.Decisions, "", maxSessionRows)
		changes := cut(s.Changes, "", maxChangeRows)
		v.Session = &sessionView{
			Name:      r.Options.Session,
			Timeline:  newTimeline(s.Decisions, s.Changes),
			Decisions: newTable("incident.session_decisions", "Decisions, in order", pick(inc, "incident.session_decisions").Description, decisions.Select("time", "source", "action", "tool", "class", "reason", "path", "resolved_server", "resolved_tool", "nearest", "drift", "registry_version")),
			TOCTOU:    newTable("incident.toctou_session", "Call path against stream (time of check, time of use)", analytics.TOCTOU(true).Description, s.TOCTOU),
			Changes:   newTable("changes.in_range", "Registry changes in the range (newest first)", pick(inc, "changes.in_range").Description, changes.Select("time", "registry", "server", "tool", "change", "summary")),
		}
		if changes.MoreRows > 0 {
			more := fmt.Sprint(changes.MoreRows)
			if s.Changes != nil && len(s.Changes.Rows) == changesLimit {
				more = "at least " + more
			}
			v.Session.MoreChanges = "and " + more + " older, on the incident and MCP servers dashboards"
		}
		if decisions.MoreRows > 0 {
			v.Session.MoreDecisions = fmt.Sprintf("and %d more, on the timeline above and the incident dashboard", decisions.MoreRows)
		}
	}
	return v
}

type sessionView struct {
	Name, MoreDecisions, MoreChanges string
	Timeline                         timeline
	Decisions, TOCTOU, Changes       table
}

// maxSessionRows bounds the session's decisions table (the timeline
// shows every decision); maxChangeRows the registry changes shown with
// it, the newest.
const (
	maxSessionRows = 200
	maxChangeRows  = 20
	// changesLimit is changes.in_range's LIMIT.
	changesLimit = 1000
)

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

// lines is a time series chart: one line per series, broken where a
// bucket has no data; the time axis spans the data's buckets.
type lines struct {
	Width, Height, Left, Top, PlotW, PlotH int
	YTicks, XTicks                         []tick
	Series                                 []series
}

type tick struct {
	Pos           float64
	Label, Anchor string
}

type series struct {
	Name, Color string
	Segments    []string
	Dots        []dot
}

type dot struct {
	X, Y       float64
	Title, Raw string
}

var palette = []string{"#1565c0", "#c62828", "#2e7d32", "#ef6c00", "#6a1b9a", "#00838f", "#ad1457", "#5d4037", "#455a64", "#9e9d24"}

// rateLines charts fleet.hallucination_by_model in buckets of interval:
// x from the first bucket with data to the end of the last, y the rate.
func rateLines(res *analytics.Result, interval time.Duration) lines {
	l := lines{Width: 900, Height: 250, Left: 60, Top: 10, PlotW: 820, PlotH: 200}
	if res == nil || len(res.Rows) == 0 {
		return l
	}
	ti, mi, ri := res.Col("time"), res.Col("model"), res.Col("rate")
	var first, last time.Time
	ymax := 0.0
	for _, row := range res.Rows {
		t, ok := row[ti].(time.Time)
		if !ok {
			continue
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
		if v, ok := analytics.Float(row[ri]); ok {
			ymax = math.Max(ymax, v)
		}
	}
	ymax = niceCeil(ymax)
	end := last.Add(interval)
	span := end.Sub(first).Seconds()
	x := func(t time.Time) float64 {
		return round1(float64(l.Left) + float64(l.PlotW)*t.Add(interval/2).Sub(first).Seconds()/span)
	}
	y := func(v float64) float64 { return round1(float64(l.Top) + float64(l.PlotH)*(1-v/ymax)) }
	for _, f := range []float64{0, 0.5, 1} {
		l.YTicks = append(l.YTicks, tick{y(f * ymax), Format("hallucination_rate", f*ymax), "end"})
	}
	layout := "15:04"
	switch {
	case interval >= 24*time.Hour:
		layout = "2006-01-02"
	case span > 86400:
		layout = "01-02 15:04"
	}
	for i := range 5 {
		t := first.Add(time.Duration(float64(end.Sub(first)) * float64(i) / 4))
		anchor := map[int]string{0: "start", 4: "end"}[i]
		if anchor == "" {
			anchor = "middle"
		}
		l.XTicks = append(l.XTicks, tick{round1(float64(l.Left) + float64(l.PlotW)*float64(i)/4), t.UTC().Format(layout), anchor})
	}
	type point struct {
		t time.Time
		v float64
	}
	byModel := map[string][]point{}
	for _, row := range res.Rows {
		v, ok := analytics.Float(row[ri])
		t, okt := row[ti].(time.Time)
		if ok && okt {
			m := Format("model", row[mi])
			byModel[m] = append(byModel[m], point{t, v})
		}
	}
	names := make([]string, 0, len(byModel))
	for m := range byModel {
		names = append(names, m)
	}
	slices.Sort(names)
	for i, m := range names {
		s := series{Name: m, Color: palette[i%len(palette)]}
		pts := byModel[m]
		slices.SortFunc(pts, func(a, b point) int { return a.t.Compare(b.t) })
		seg := ""
		for j, p := range pts {
			if j > 0 && p.t.Sub(pts[j-1].t) > interval {
				s.Segments = append(s.Segments, seg)
				seg = ""
			}
			seg += fmt.Sprintf("%g,%g ", x(p.t), y(p.v))
			s.Dots = append(s.Dots, dot{X: x(p.t), Y: y(p.v), Raw: raw(p.v),
				Title: m + " " + p.t.UTC().Format("2006-01-02 15:04") + ": " + Format("hallucination_rate", p.v)})
		}
		s.Segments = append(s.Segments, seg)
		l.Series = append(l.Series, s)
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

// timeline is a session's decisions on a time axis, one lane per source.
type timeline struct {
	Width, Height, Left, PlotW int
	From, To                   string
	Lanes                      []lane
	Marks                      []mark
	Changes                    []changeLine
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
	Drift        bool
}

// changeLine is a listing change on the session's timeline.
type changeLine struct {
	X                 float64
	Bottom            int
	Raw, Label, Title string
}

// maxChangeLines bounds the listing changes drawn on a session's
// timeline.
const maxChangeLines = 10

// newTimeline is the session's decisions on a time axis, one lane per
// source; a decision whose tool changed after it (drift) ringed; and the
// listing changes (changes.in_range) of the servers the session called
// that fall inside its span, as vertical lines: a rug pull mid-session
// shows as the line between the calls before and the stale (M4) ones
// after.
func newTimeline(res, changes *analytics.Result) timeline {
	tl := timeline{Width: 860, Left: 80, PlotW: 740}
	if res == nil || len(res.Rows) == 0 {
		return tl
	}
	ti, si, ci, tooli, reasoni := res.Col("time"), res.Col("source"), res.Col("class"), res.Col("tool"), res.Col("reason")
	drifti, serveri := res.Col("drift"), res.Col("resolved_server")
	called := map[string]bool{}
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
		if serveri >= 0 {
			if s, ok := row[serveri].(string); ok && s != "" {
				called[s] = true
			}
		}
	}
	var names []string
	for n := range laneOf {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		laneOf[n] = i
		tl.Lanes = append(tl.Lanes, lane{Name: n, Y: 40 + 36*i})
	}
	tl.Height = 40 + 36*len(names) + 24
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
		m := mark{X: round1(x), Y: float64(tl.Lanes[laneOf[src]].Y), Color: classColor(class), Class: class, Raw: raw(row[ti]),
			Title: t.UTC().Format("15:04:05.000") + " " + src + " " + Format("", row[tooli]) + ": " + class + " " + Format("", row[reasoni])}
		if drifti >= 0 && row[drifti] == true {
			m.Drift = true
			m.Title += " (drift: the tool changed after this call)"
		}
		tl.Marks = append(tl.Marks, m)
	}
	if changes != nil && span > 0 {
		cti, csi, ctooli, cchi := changes.Col("time"), changes.Col("server"), changes.Col("tool"), changes.Col("change")
		for _, row := range changes.Rows {
			t, _ := row[cti].(time.Time)
			srv := Format("", row[csi])
			if t.Before(first) || t.After(last) || !called[srv] || len(tl.Changes) == maxChangeLines {
				continue
			}
			x := round1(float64(tl.Left) + float64(tl.PlotW)*t.Sub(first).Seconds()/span)
			tl.Changes = append(tl.Changes, changeLine{X: x, Raw: raw(row[cti]), Bottom: tl.Height - 16,
				Label: srv + ": " + Format("", row[cchi]) + " " + Format("", row[ctooli]),
				Title: t.UTC().Format("15:04:05.000") + " listing of " + srv + ": " + Format("", row[cchi]) + " " + Format("", row[ctooli])})
		}
	}
	slices.SortFunc(tl.Classes, func(a, b mark) int { return schema.Class(a.Class).Index() - schema.Class(b.Class).Index() })
	return tl
}
