package report

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/analyticsfixture"
	"github.com/toolaudit/toolaudit/internal/testkit/browsertest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m, leakcheck.Run(chenginetest.Main), leakcheck.After(analyticsfixture.Close), leakcheck.After(browsertest.Close))
}

// fixture is the analytics fixture (internal/testkit/analyticsfixture).
func fixture(t *testing.T) driver.Conn { return analyticsfixture.Conn(t) }

var base = analyticsfixture.Base

func options() Options {
	return Options{Analysis: analyticsfixture.Analysis, From: base, To: base.Add(10 * 24 * time.Hour), Session: "s-incident"}
}

func collect(t *testing.T, o Options) *Report {
	t.Helper()
	r, err := Collect(context.Background(), fixture(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestText: the terminal report leads with the fixture's headline
// numbers and top problems, then its sections.
func TestText(t *testing.T) {
	var b bytes.Buffer
	if err := collect(t, options()).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		// 144 decisions on day 0 (86 allowed), 27 on day 5 (26).
		"decisions 171 (allowed 112, rejected 59)",
		"hallucination rate 26.63%",
		"No decisions in the 10d before",
		"Top problems, by calls affected 1. 26 calls: session s-bulk-gpt-5 (agent-1, gpt-5): 26 of 66 decisions rejected",
		"3. 9 calls: server github of registry mcp: 5 calls on a stale definition, 4 calls whose tool changed after (create_issue)",
		"mcp create_issue shadow (M3) github (trust 2), gitlab (trust 1) 4 0 4",
		"wipe_disk invention - 7 gpt-5",
		"s-bad agent-1 (none) 2 2",
		"== Session s-incident",
		"c-i3 2026-11-20 03:00:30 s-incident agent-7 create_issue api: OK (enforced), stream: H2 rv-s-1",
		// The approved definitions (analyticsfixture.Approvals).
		"Definitions waiting for approval at the end of the range, newest first",
		"2026-11-25 00:00:00 mcp github create_issue unapproved changed: +/labels",
		"Approvals, rejections and revocations in the range, newest first",
		"2026-11-25 03:00:00 mcp github search revoke cy to review again added: +/q",
		"2026-11-20 02:00:00 mcp shadow search reject bo shadows github's search",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(flat, "Top problems") > strings.Index(flat, "Fabricated tool names") {
		t.Error("the top problems come after the sections")
	}
	var empty bytes.Buffer
	o := options()
	o.From, o.To = base.Add(-48*time.Hour), base.Add(-24*time.Hour)
	if err := collect(t, o).WriteText(&empty); err != nil || !strings.Contains(empty.String(), "no decisions in this range") {
		t.Errorf("empty range: %v\n%s", err, empty.String())
	}
	// Approvals wait whether or not calls were decided: the first
	// listings (day 0 - 1h) are pending at the end of a range without
	// decisions but for github's create_issue and search, which ana
	// approved at its end (the range is half-open: its last minute holds
	// the approval).
	o.From, o.To = base.Add(-90*time.Minute), base.Add(-29*time.Minute)
	empty.Reset()
	flat = ""
	if err := collect(t, o).WriteText(&empty); err == nil {
		flat = strings.Join(strings.Fields(empty.String()), " ")
	}
	for _, want := range []string{
		"Definitions waiting for approval at the end of the range, newest first since registry server tool standing summary digest approved 2026-11-19 23:00:00 mcp github list_repos new",
		"time registry server tool verb by reason listing_change digest baseline_version 2026-11-19 23:30:00 mcp github search approve ana reviewed added: +/q",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("a range without decisions lacks %q:\n%s", want, empty.String())
		}
	}
}

// TestBucket: the time series' bucket follows the range: at most 60
// points, minutes for an hour, weeks for a year.
func TestBucket(t *testing.T) {
	h, d := time.Hour, 24*time.Hour
	for _, tc := range []struct{ span, want time.Duration }{
		{h, time.Minute}, {6 * h, 15 * time.Minute}, {d, 30 * time.Minute}, {2 * d, h},
		{3 * d, 3 * h}, {10 * d, 6 * h}, {30 * d, 12 * h}, {60 * d, d}, {330 * d, 7 * d}, {5000 * d, 7 * d},
	} {
		if got := Bucket(tc.span); got != tc.want {
			t.Errorf("Bucket(%v) = %v, want %v", tc.span, got, tc.want)
		}
	}
}

// TestTOCTOU: report --toctou lists the fixture's one call whose API and
// stream decisions differ (c-i3), in every session when none is given,
// and nothing outside the range.
func TestTOCTOU(t *testing.T) {
	for _, tc := range []struct {
		name     string
		session  string
		from, to time.Duration
		want     []string
	}{
		{"all sessions", "", 0, 10 * 24 * time.Hour, []string{"c-i3", "agent-7", "api: OK (enforced), stream: H2", "rv-s-1", "1 call(s) decided differently"}},
		{"the session", "s-incident", 0, 10 * 24 * time.Hour, []string{"c-i3", "1 call(s) decided differently"}},
		{"another session", "s-other", 0, 10 * 24 * time.Hour, []string{"(none)", "0 call(s) decided differently"}},
		{"before it", "", 0, 2 * time.Hour, []string{"(none)", "0 call(s) decided differently"}},
	} {
		o := options()
		o.Session, o.From, o.To = tc.session, base.Add(tc.from), base.Add(tc.to)
		res, err := TOCTOU(context.Background(), fixture(t), o)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := WriteTOCTOU(&b, o, res); err != nil {
			t.Fatal(err)
		}
		flat := strings.Join(strings.Fields(b.String()), " ")
		for _, w := range tc.want {
			if !strings.Contains(flat, w) {
				t.Errorf("%s: no %q in\n%s", tc.name, w, b.String())
			}
		}
	}
}

// TestSpan: the span of the fixture's analysis.
func TestSpan(t *testing.T) {
	from, to, ok, err := SpanOf(context.Background(), fixture(t), analyticsfixture.Analysis)
	if err != nil || !ok || !from.Equal(base.Add(time.Hour)) || !to.Equal(base.Add(5*24*time.Hour+4*time.Hour)) {
		t.Errorf("span %v .. %v, %v, %v", from, to, ok, err)
	}
	if _, _, ok, err := SpanOf(context.Background(), fixture(t), "none"); ok || err != nil {
		t.Errorf("span of no analysis: %v, %v", ok, err)
	}
}

var (
	tableRe   = regexp.MustCompile(`(?s)<table data-q="([^"]+)"[^>]*>(.*?)</table>`)
	rowRe     = regexp.MustCompile(`(?s)<tr data-row="(\d+)">(.*?)</tr>`)
	cellRe    = regexp.MustCompile(`(?s)<td(?: class="n")? data-col="([^"]*)" data-v="([^"]*)">(.*?)</td>`)
	tileRe    = regexp.MustCompile(`<div class="v" data-q="([^"]+)" data-col="([^"]+)" data-v="([^"]*)" data-prev="([^"]*)">([^<]*)</div>`)
	problemRe = regexp.MustCompile(`<li data-q="([^"]+)" data-row="(\d+)" data-calls="(\d+)">.*?<a href="#([a-z]+)">`)
	markRe    = regexp.MustCompile(`<circle [^>]*data-q="incident.session_decisions" data-class="([^"]+)"`)
	barRe     = regexp.MustCompile(`(?s)<g data-q="fleet.class_mix" data-class="([^"]+)">.*?data-col="decisions" data-v="([^"]*)">([^<]*)</text>`)
)

// want formats a query's value as the test expects to see it: its own
// rules, not the report's Format.
func want(col string, v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case float64:
		if strings.HasSuffix(col, "_rate") || strings.HasSuffix(col, "_share") {
			return fmt.Sprintf("%.2f%%", 100*x)
		}
		if strings.HasSuffix(col, "_pct") {
			return fmt.Sprintf("%.2f%%", x)
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	case time.Time:
		if col == "time" && x.Nanosecond() != 0 {
			return x.Format("2006-01-02 15:04:05.000")
		}
		return x.Format("2006-01-02 15:04:05")
	case bool:
		return map[bool]string{true: "yes", false: "no"}[x]
	case string:
		if x == "" && (col == "model" || col == "surface" || col == "agent" || col == "registry" || col == "session") {
			return "(none)"
		}
	}
	return fmt.Sprint(v)
}

// grouped is an integer with its thousands separated, as the headline
// shows counts.
func grouped(v any) string {
	s := fmt.Sprint(v)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// sameValue compares a page's data-v with a query's value: numbers by
// value, anything else as text.
func sameValue(dataV string, v any) bool {
	if f, ok := analytics.Float(v); ok {
		g, err := strconv.ParseFloat(dataV, 64)
		return err == nil && math.Abs(f-g) <= 1e-12*math.Max(1, math.Abs(f))
	}
	switch x := v.(type) {
	case nil:
		return dataV == ""
	case time.Time:
		return dataV == x.UTC().Format(time.RFC3339Nano)
	}
	return dataV == fmt.Sprint(v)
}

// TestHTMLInBrowser: the HTML report opened in headless Chromium, on the
// fixture (ten days, two registries, an incident session) and on a
// generated one-day fleet of 300 registries. Its DOM shows the numbers
// the queries return, run here on their own: the headline tiles, the top
// problems (the first rows of the ranked sections, by calls affected),
// every cell of every table (cut to the top rows), the class bars and
// one timeline mark per decision of the session. At 1366x768 and
// 1920x1080 the page is no wider than the window and the answer
// (headline and top problems) is on the first screen. It loads nothing
// from anywhere. Screenshots (first screen, and the whole page) are kept
// as test artifacts.
func TestHTMLInBrowser(t *testing.T) {
	fixtureOpts := options()
	for _, tc := range []struct {
		name string
		conn func(t *testing.T) driver.Conn
		o    Options
	}{
		{"fixture", fixture, fixtureOpts},
		{"fleet", func(t *testing.T) driver.Conn { return fleetConn(t, 300, 40) }, fleetOptions()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := tc.conn(t)
			r, err := Collect(context.Background(), conn, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			checkPage(t, conn, r, tc.o, tc.name)
		})
	}
}

func checkPage(t *testing.T, conn driver.Conn, r *Report, o Options, name string) {
	dir := t.ArtifactDir()
	file := filepath.Join(dir, name+".html")
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "@import", "url(", "http://", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page contains %q: it must load nothing", bad)
		}
	}
	if !strings.Contains(page, `content="`+CSP+`"`) || CSP != "default-src 'none'; style-src 'unsafe-inline'; img-src data:" {
		t.Error("the page has no Content-Security-Policy that refuses every fetch")
	}
	dom := browsertest.DOM(t, "file://"+file) // as headless Chromium reads it

	// The queries, run here on their own.
	p := o.Params(r.Interval)
	runQ := func(q analytics.Query, p analytics.Params) *analytics.Result {
		res, err := analytics.Run(context.Background(), conn, q, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	results := map[string]*analytics.Result{}
	for _, q := range append(append(analytics.Fleet(), analytics.Report()...), analytics.Incident()...) {
		results[q.ID] = runQ(q, p)
	}
	results["incident.toctou_session"] = runQ(analytics.TOCTOU(true), p)

	// The period before, as long as the range.
	prevP := p
	prevP.From, prevP.To = o.From.Add(-o.To.Sub(o.From)), o.From
	prev := map[string]*analytics.Result{}
	for _, id := range []string{"fleet.verdicts", "fleet.rates"} {
		for _, q := range analytics.Fleet() {
			if q.ID == id {
				prev[id] = runQ(q, prevP)
			}
		}
	}

	// Headline: each tile is its query's value, and the period before's.
	tiles := tileRe.FindAllStringSubmatch(dom, -1)
	if len(tiles) != 6 {
		t.Errorf("%d headline tiles in the DOM, want 6", len(tiles))
	}
	for _, m := range tiles {
		res := results[m[1]]
		var v any
		if m[1] == "malformed.over_time" {
			var sum uint64
			for _, row := range res.Rows {
				sum += row[res.Col("malformed")].(uint64)
			}
			v = sum
		} else if c := res.Col(m[2]); c >= 0 && len(res.Rows) == 1 {
			v = res.Rows[0][c]
		} else {
			t.Errorf("tile %s.%s: no such value", m[1], m[2])
			continue
		}
		text := want(m[2], v)
		if _, isInt := analytics.Float(v); isInt && !strings.HasSuffix(m[2], "_rate") {
			text = grouped(v)
		}
		if !sameValue(html.UnescapeString(m[3]), v) || html.UnescapeString(m[5]) != text {
			t.Errorf("tile %s.%s shows %q (%s), the query returns %v", m[1], m[2], m[5], m[3], v)
		}
		if pr := prev[m[1]]; pr != nil {
			var pv any
			if len(pr.Rows) == 1 {
				pv = pr.Rows[0][pr.Col(m[2])]
			}
			if !sameValue(html.UnescapeString(m[4]), pv) {
				t.Errorf("tile %s.%s: the period before %q, the query returns %v", m[1], m[2], m[4], pv)
			}
		}
	}

	// Top problems: the first two rows of each ranked section, the five
	// with the most calls, in that order; each links to its section.
	type cand struct {
		q     string
		row   int
		calls int64
	}
	var cands []cand
	for _, q := range []string{"report.fabricated", "report.collisions", "report.drift", "report.sessions"} {
		res := results[q]
		for i := range min(2, len(res.Rows)) {
			n, _ := analytics.Float(res.Rows[i][res.Col(analytics.RankColumn(q))])
			cands = append(cands, cand{q, i, int64(n)})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].calls > cands[j].calls })
	cands = cands[:min(5, len(cands))]
	problems := problemRe.FindAllStringSubmatch(dom, -1)
	if len(problems) != len(cands) || len(problems) == 0 {
		t.Errorf("%d top problems in the DOM, the queries give %d", len(problems), len(cands))
	}
	for i, m := range problems {
		if i >= len(cands) {
			break
		}
		row, _ := strconv.Atoi(m[2])
		calls, _ := strconv.ParseInt(m[3], 10, 64)
		if calls != cands[i].calls || (calls != cands[min(i+1, len(cands)-1)].calls && (m[1] != cands[i].q || row != cands[i].row)) {
			t.Errorf("problem %d: %s row %d, %d calls; the queries rank %+v", i+1, m[1], row, calls, cands[i])
		}
		if !strings.Contains(dom, `<h2 id="`+m[4]+`">`) {
			t.Errorf("problem %d links to #%s, which is no section", i+1, m[4])
		}
	}

	// Tables: every cell is the query's, the ranked ones cut to the top
	// rows.
	checked := map[string]int{}
	for _, tm := range tableRe.FindAllStringSubmatch(dom, -1) {
		id := tm[1]
		res := results[id]
		if res == nil {
			t.Errorf("table %s: no such query", id)
			continue
		}
		rows := rowRe.FindAllStringSubmatch(tm[2], -1)
		if wantRows := min(len(res.Rows), analytics.ReportTop); len(rows) != wantRows && !strings.HasPrefix(id, "incident.") && id != "changes.in_range" {
			t.Errorf("table %s: %d rows in the DOM, want %d of the query's %d", id, len(rows), wantRows, len(res.Rows))
		}
		for i, rm := range rows {
			for _, cm := range cellRe.FindAllStringSubmatch(rm[2], -1) {
				c := res.Col(cm[1])
				if c < 0 || i >= len(res.Rows) {
					t.Errorf("table %s row %d: column %s is not the query's", id, i, cm[1])
					continue
				}
				v := res.Rows[i][c]
				if !sameValue(html.UnescapeString(cm[2]), v) || html.UnescapeString(cm[3]) != want(cm[1], v) {
					t.Errorf("table %s row %d column %s shows %q (%s), the query returns %v", id, i, cm[1], cm[3], cm[2], v)
				}
				checked[id]++
			}
		}
	}
	ids := []string{"report.fabricated", "report.sessions", "fleet.by_model", "fleet.by_surface", "report.versions"}
	if name == "fixture" { // the generated fleet has no approvals
		ids = append(ids, "report.pending", "report.approvals")
	}
	for _, id := range ids {
		if checked[id] == 0 {
			t.Errorf("table %s: no cell checked", id)
		}
	}
	if r.Session != nil {
		for _, id := range []string{"incident.session_decisions", "incident.toctou_session", "changes.in_range"} {
			if checked[id] == 0 {
				t.Errorf("table %s: no cell checked", id)
			}
		}
		if marks, decisions := markRe.FindAllStringSubmatch(dom, -1), results["incident.session_decisions"]; len(marks) != len(decisions.Rows) || len(marks) == 0 {
			t.Errorf("%d timeline marks, %d decisions of the session", len(marks), len(decisions.Rows))
		}
	}
	classMix := results["fleet.class_mix"]
	bars := barRe.FindAllStringSubmatch(dom, -1)
	if len(bars) != len(classMix.Rows) {
		t.Errorf("%d class bars, %d classes", len(bars), len(classMix.Rows))
	}
	for i, m := range bars {
		if i < len(classMix.Rows) && (m[1] != classMix.Rows[i][0] || !sameValue(m[2], classMix.Rows[i][1])) {
			t.Errorf("bar %d: %s %s, the query returns %v", i, m[1], m[2], classMix.Rows[i][:2])
		}
	}

	// Layout: no wider than a laptop's or a desktop's window, the answer
	// (headline and top problems) on the first screen.
	browsertest.CheckFits(t, page, CSP, ".answer", file, dir, name)
	t.Logf("report and screenshots in %s (kept with go test -artifacts, or in $TEST_ARTIFACTS)", dir)
}

// TestRateLines: a sparse series over a long range, as the demo's (calls
// in two clusters eleven months apart), is drawn on an axis that spans
// the data, each cluster its own line, never joined across the gap.
func TestRateLines(t *testing.T) {
	week := 7 * 24 * time.Hour
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	res := &analytics.Result{Columns: []string{"time", "model", "rate"}}
	for _, w := range []int{0, 1, 46, 47} {
		res.Rows = append(res.Rows, []any{t0.Add(time.Duration(w) * week), "gpt-5", 0.1 * float64(w%2+1)})
	}
	l := rateLines(res, Bucket(48*week))
	if Bucket(48*week) != week {
		t.Fatalf("bucket %v", Bucket(48*week))
	}
	if len(l.Series) != 1 || len(l.Series[0].Segments) != 2 || len(l.Series[0].Dots) != 4 {
		t.Fatalf("series %+v: want one model, two segments, four points", l.Series)
	}
	d := l.Series[0].Dots
	left, right := float64(l.Left), float64(l.Left+l.PlotW)
	if d[0].X < left || d[0].X > left+float64(l.PlotW)/20 || d[3].X > right || d[3].X < right-float64(l.PlotW)/20 {
		t.Errorf("points at x %v .. %v: the axis %v .. %v does not span the data", d[0].X, d[3].X, left, right)
	}
	if l.XTicks[0].Label != "2026-01-05" || l.XTicks[4].Label != "2026-12-07" {
		t.Errorf("time axis %q .. %q", l.XTicks[0].Label, l.XTicks[4].Label)
	}
	if l.YTicks[2].Label != "20.00%" {
		t.Errorf("rate axis top %q, want 20.00%%", l.YTicks[2].Label)
	}
}
