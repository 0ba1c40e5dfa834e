package report

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"image"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/internal/analyticsfixture"
)

func TestMain(m *testing.M) { os.Exit(analyticsfixture.Main(m)) }

// fixture is the analytics fixture (internal/analyticsfixture).
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

// TestText: the terminal report shows the fixture's headline numbers,
// its MCP deployment and the session.
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
		"== MCP deployment mcp",
		"github gitlab 2",
		"create_issue shadow (M3) github (trust 2), gitlab (trust 1) 23 4 0 (unresolved): 4, github: 19",
		"wipe_disk invention - 7 gpt-5",
		"== Session s-incident",
		"agent-7 create_issue api: OK (enforced), stream: H2 rv-s-1",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	var empty bytes.Buffer
	o := options()
	o.From, o.To = base.Add(-48*time.Hour), base.Add(-24*time.Hour)
	if err := collect(t, o).WriteText(&empty); err != nil || !strings.Contains(empty.String(), "no decisions in this range") {
		t.Errorf("empty range: %v\n%s", err, empty.String())
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
	if err != nil || !ok || !from.Equal(base.Add(time.Hour)) || !to.Equal(base.Add(5*24*time.Hour+4*time.Hour-time.Second)) {
		t.Errorf("span %v .. %v, %v, %v", from, to, ok, err)
	}
	if _, _, ok, err := SpanOf(context.Background(), fixture(t), "none"); ok || err != nil {
		t.Errorf("span of no analysis: %v, %v", ok, err)
	}
}

// chromium runs headless Chromium on a local file with the flags that
// keep it off the network and out of the user's profile.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		// As the engine's tests: CI (CHENGINE_REQUIRED=1) must not pass
		// without the browser test; a developer without Chromium is told.
		if os.Getenv("CHENGINE_REQUIRED") != "" {
			t.Fatal("chromium not found and CHENGINE_REQUIRED is set: apt-get install chromium (.ci/run does)")
		}
		t.Skip("chromium not found: apt-get install chromium to run the browser test (CHENGINE_REQUIRED=1 makes this a failure)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.Bytes()
}

var (
	tableRe = regexp.MustCompile(`(?s)<table data-q="([^"]+)"[^>]*>(.*?)</table>`)
	rowRe   = regexp.MustCompile(`(?s)<tr data-row="(\d+)">(.*?)</tr>`)
	cellRe  = regexp.MustCompile(`(?s)<td data-col="([^"]*)" data-v="([^"]*)">(.*?)</td>`)
	tileRe  = regexp.MustCompile(`<div class="v" data-q="([^"]+)" data-col="([^"]+)" data-v="([^"]*)">([^<]*)</div>`)
	matRe   = regexp.MustCompile(`<td class="n" style="[^"]*" data-server="([^"]*)" data-other="([^"]*)" data-col="shared_names" data-v="([^"]*)">([^<]*)</td>`)
	markRe  = regexp.MustCompile(`<circle [^>]*data-q="incident.session_decisions" data-class="([^"]+)"`)
	barRe   = regexp.MustCompile(`(?s)<g data-q="fleet.class_mix" data-class="([^"]+)">.*?data-col="decisions" data-v="([^"]*)">([^<]*)</text>`)
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
	}
	return fmt.Sprint(v)
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
	return dataV == want("", v)
}

// TestHTMLInBrowser: the HTML report opened in headless Chromium shows,
// in its DOM, the numbers the queries return (run here on their own): the
// headline tiles, every table's every cell, the class bars, the server
// matrix and one timeline mark per decision of the session. The page
// loads nothing from anywhere; a screenshot is kept as a test artifact.
func TestHTMLInBrowser(t *testing.T) {
	o := options()
	r := collect(t, o)
	dir := t.ArtifactDir()
	file := filepath.Join(dir, "report.html")
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
	if !strings.Contains(page, `content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"`) {
		t.Error("the page has no Content-Security-Policy that refuses every fetch")
	}

	dom := string(chromium(t, "--dump-dom", "file://"+file))
	if !strings.Contains(dom, `<h2 id="session">`) {
		t.Fatalf("Chromium's DOM lacks the session section:\n%.2000s", dom)
	}

	// The queries, run here on their own.
	conn := fixture(t)
	p := o.Params(r.Interval)
	results := map[string]*analytics.Result{}
	runQ := func(q analytics.Query, p analytics.Params) *analytics.Result {
		res, err := analytics.Run(context.Background(), conn, q, p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, q := range append(append(analytics.Fleet(), analytics.Servers()...), analytics.Incident()...) {
		results[q.ID] = runQ(q, p)
	}
	mcp := p
	mcp.Vars = map[string]analytics.Value{}
	for k, v := range p.Vars {
		mcp.Vars[k] = v
	}
	mcp.Vars[analytics.VarRegistry] = analytics.Text("mcp")
	perRegistry := map[string]*analytics.Result{}
	for _, id := range []string{"servers.shared_names", "servers.collisions", "servers.mcp_classes"} {
		for _, q := range analytics.Servers() {
			if q.ID == id {
				perRegistry[id] = runQ(q, mcp)
			}
		}
	}

	tiles := tileRe.FindAllStringSubmatch(dom, -1)
	if len(tiles) != 8 {
		t.Errorf("%d headline tiles in the DOM, want 8", len(tiles))
	}
	for _, m := range tiles {
		res := results[m[1]]
		c := res.Col(m[2])
		if c < 0 || len(res.Rows) != 1 {
			t.Errorf("tile %s.%s: no such value", m[1], m[2])
			continue
		}
		v := res.Rows[0][c]
		if !sameValue(html.UnescapeString(m[3]), v) || html.UnescapeString(m[4]) != want(m[2], v) {
			t.Errorf("tile %s.%s shows %q (%s), the query returns %v", m[1], m[2], m[4], m[3], v)
		}
	}

	checked := map[string]int{}
	for _, tm := range tableRe.FindAllStringSubmatch(dom, -1) {
		id := tm[1]
		if id == "servers.shared_names" {
			continue // the matrix, below
		}
		res := results[id]
		if pr, ok := perRegistry[id]; ok {
			res = pr
		}
		if res == nil {
			t.Errorf("table %s: no such query", id)
			continue
		}
		rows := rowRe.FindAllStringSubmatch(tm[2], -1)
		if len(rows) != len(res.Rows) {
			t.Errorf("table %s: %d rows in the DOM, the query returns %d", id, len(rows), len(res.Rows))
			continue
		}
		for i, rm := range rows {
			cells := cellRe.FindAllStringSubmatch(rm[2], -1)
			if len(cells) != len(res.Columns) {
				t.Errorf("table %s row %d: %d cells, %d columns", id, i, len(cells), len(res.Columns))
				continue
			}
			for j, cm := range cells {
				v := res.Rows[i][j]
				if cm[1] != res.Columns[j] || !sameValue(html.UnescapeString(cm[2]), v) || html.UnescapeString(cm[3]) != want(cm[1], v) {
					t.Errorf("table %s row %d column %s shows %q (%s), the query returns %v", id, i, res.Columns[j], cm[3], cm[2], v)
				}
				checked[id]++
			}
		}
	}
	for _, id := range []string{"fleet.class_mix", "fleet.by_model", "fleet.by_surface", "fleet.top_fabricated",
		"servers.version_in_force", "servers.collisions", "servers.mcp_classes",
		"incident.session_decisions", "incident.toctou", "changes.in_range"} {
		if checked[id] == 0 {
			t.Errorf("table %s: no cell checked", id)
		}
	}

	shared := perRegistry["servers.shared_names"]
	cells := matRe.FindAllStringSubmatch(dom, -1)
	if len(cells) != 9 { // github, gitlab, shadow
		t.Errorf("%d matrix cells, want 3 x 3", len(cells))
	}
	for _, m := range cells {
		var want float64
		for _, row := range shared.Rows {
			if row[0] == m[1] && row[1] == m[2] {
				want, _ = analytics.Float(row[2])
			}
		}
		if m[1] == m[2] {
			continue
		}
		if got, _ := strconv.ParseFloat(m[3], 64); got != want || m[4] != strconv.FormatFloat(want, 'f', -1, 64) {
			t.Errorf("matrix %s x %s shows %q, the query returns %v", m[1], m[2], m[4], want)
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
	if marks, decisions := markRe.FindAllStringSubmatch(dom, -1), results["incident.session_decisions"]; len(marks) != len(decisions.Rows) || len(marks) != 6 {
		t.Errorf("%d timeline marks, %d decisions of the session (want 6)", len(marks), len(decisions.Rows))
	}

	shot := filepath.Join(dir, "report.png")
	chromium(t, "--screenshot="+shot, "--window-size=1280,3600", "--hide-scrollbars", "file://"+file)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if colors := distinctColors(img); colors < 20 {
		t.Errorf("the screenshot has %d colors: blank?", colors)
	}
	// Kept: under go test -artifacts's output dir, and in $TEST_ARTIFACTS
	// when CI sets it.
	if keep := os.Getenv("TEST_ARTIFACTS"); keep != "" {
		for _, f := range []string{file, shot} {
			b, err := os.ReadFile(f)
			if err == nil {
				err = os.MkdirAll(keep, 0o755)
			}
			if err == nil {
				err = os.WriteFile(filepath.Join(keep, filepath.Base(f)), b, 0o644)
			}
			if err != nil {
				t.Errorf("keeping %s in TEST_ARTIFACTS: %v", f, err)
			}
		}
		shot = filepath.Join(keep, filepath.Base(shot))
	}
	t.Logf("report %s, screenshot %s (kept with go test -artifacts or TEST_ARTIFACTS=DIR)", file, shot)
}

func distinctColors(img image.Image) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
		}
	}
	return len(seen)
}
