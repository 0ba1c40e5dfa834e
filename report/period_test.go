package report

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/browsertest"
	"github.com/toolaudit/toolaudit/registry/history"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

// periodConn writes one allowed decision per time (and a rejected one
// every third) into database db of the shared engine, through resolverd's
// writer, and returns a connection to it.
func periodConn(t *testing.T, db string, times []time.Time, listings ...*schema.Listing) driver.Conn {
	t.Helper()
	var rows []schema.Row
	for i, at := range times {
		var r schema.Row
		r.Set(schema.OK, "")
		if i%3 == 0 {
			r.Set(schema.H1, "no tool of that name")
		}
		r.EventID = fmt.Sprintf("p-%d", i)
		r.CallKey = r.EventID
		r.AnalysisID, r.Source = "period", schema.SourceStream
		r.Registry, r.Model, r.Provider, r.Surface = "reg", "gpt-5", "openai", "raw_json"
		r.Tool, r.SessionID, r.AgentID = "search", fmt.Sprintf("s-%d", i%4), "agent-1"
		r.EmittedAt, r.DecidedAt = at, at.Add(time.Second)
		r.ResolverBuild, r.PolicyVersion, r.Topic = "test", "strict/v1", "tool-calls"
		rows = append(rows, r)
	}
	return writeDB(t, db, rows, listings)
}

// writeDB writes rows and the registry history of listings through
// resolverd's writer into database db of the shared engine, and returns
// a connection whose default database it is.
func writeDB(t *testing.T, db string, rows []schema.Row, listings []*schema.Listing) driver.Conn {
	t.Helper()
	srv := chenginetest.Server(t)
	ctx := context.Background()
	cfg := sink.Config{Addr: []string{srv.Addr()}, Database: db}
	w, err := sink.NewClickHouse(ctx, cfg, sink.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRegistryChanges(ctx, history.Rows(listings...)); err != nil {
		t.Fatal(err)
	}
	conn, err := cfg.OpenIn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// pageDOM writes r's page (kept as a test artifact) and returns its DOM
// as headless Chromium reads it.
func pageDOM(t *testing.T, r *Report, name string) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.ArtifactDir(), name+".html")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return browsertest.DOM(t, "file://"+file)
}

// rawDecisions counts the raw table's decisions emitted in [from, to).
func rawDecisions(t *testing.T, conn driver.Conn, from, to time.Time) uint64 {
	t.Helper()
	var n uint64
	err := conn.QueryRow(context.Background(), `SELECT count() FROM decisions FINAL
WHERE analysis_id = 'period' AND emitted_at >= fromUnixTimestamp64Milli(?) AND emitted_at < fromUnixTimestamp64Milli(?)`,
		from.UnixMilli(), to.UnixMilli()).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var (
	prevRe  = regexp.MustCompile(`<p class="d" id="prev" data-from="([^"]*)" data-to="([^"]*)">([^<]*)</p>`)
	rangeRe = regexp.MustCompile(`<span id="range" data-from="([^"]*)" data-to="([^"]*)">`)
)

// TestPeriodBefore: the headline's "before" figures are the raw table's
// decisions in [from - d, from), where [from, from + d) is the range the
// report says it counted, and the range's own are those in it: no call
// counts in both. Over the demo's shape (every call of the range's first
// hour in its first seconds, the range from the analysis's first hour:
// nothing before, which the report says instead of a change), over eleven
// months whose ends fall inside hours with calls on both sides of them,
// and over six hours whose ends fall inside minutes. Checked in the text
// and in the HTML page as headless Chromium reads it.
func TestPeriodBefore(t *testing.T) {
	// Times near now: the rollups keep 400 days (their TTL), and the
	// periods before reach back eleven months.
	today := time.Now().UTC().Truncate(24 * time.Hour)
	day := today.Add(-300 * 24 * time.Hour)
	mid := today.Add(-30*24*time.Hour + 10*time.Hour + 20*time.Minute + 30*time.Second)
	long := 330*24*time.Hour + 5*time.Hour + 17*time.Minute
	short := today.Add(-3*24*time.Hour + 12*time.Hour + 7*time.Minute + 30*time.Second)
	around := func(ts ...time.Time) []time.Time {
		var out []time.Time
		for _, at := range ts {
			for _, d := range []time.Duration{-20 * time.Minute, -10 * time.Second, 0, 10 * time.Second, 20 * time.Minute} {
				out = append(out, at.Add(d))
			}
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		times    []time.Time
		from, to time.Time // zero: the analysis's span (--since all)
		none     bool      // nothing before the range
	}{
		{"demo", append(func() (ts []time.Time) {
			for i := range 60 {
				ts = append(ts, day.Add(time.Duration(i)*50*time.Millisecond))
			}
			return ts
		}(), day.Add(40*24*time.Hour), day.Add(200*24*time.Hour), day.Add(290*24*time.Hour+17*time.Hour)), time.Time{}, time.Time{}, true},
		{"eleven months", around(mid.Add(-long), mid.Add(-long/2), mid, mid.Add(long/2), mid.Add(long)), mid, mid.Add(long), false},
		{"six hours", append(around(short.Add(-6*time.Hour), short, short.Add(6*time.Hour)), short.Add(-3*time.Hour), short.Add(3*time.Hour)), short, short.Add(6 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := periodConn(t, "period_"+strings.ReplaceAll(tc.name, " ", "_"), tc.times)
			o := Options{Analysis: "period", From: tc.from, To: tc.to}
			if tc.from.IsZero() {
				f, l, ok, err := SpanOf(context.Background(), conn, "period")
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				o.From, o.To = f, l
			}
			r, err := Collect(context.Background(), conn, o)
			if err != nil {
				t.Fatal(err)
			}
			if !r.PrevTo.Equal(r.From) || r.PrevTo.Sub(r.PrevFrom) != r.To.Sub(r.From) || r.From.After(o.From) || r.To.Before(o.To) {
				t.Fatalf("range %v .. %v, before %v .. %v: not adjacent, as long, and holding the range asked %v .. %v", r.From, r.To, r.PrevFrom, r.PrevTo, o.From, o.To)
			}
			before, in := rawDecisions(t, conn, r.PrevFrom, r.PrevTo), rawDecisions(t, conn, r.From, r.To)
			if tc.none != (before == 0) || in == 0 {
				t.Fatalf("the case is not what it means to test: %d decisions before, %d in", before, in)
			}
			hs := r.Headlines()
			if got := fmt.Sprint(hs[0].Prev); hs[0].Col != "decisions" || got != fmt.Sprint(before) {
				t.Errorf("headline %s: before %v, the raw table holds %d in [%v, %v)", hs[0].Col, hs[0].Prev, before, r.PrevFrom, r.PrevTo)
			}
			if got := fmt.Sprint(hs[0].Value); got != fmt.Sprint(in) {
				t.Errorf("headline decisions %v, the raw table holds %d in [%v, %v)", hs[0].Value, in, r.From, r.To)
			}

			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			if unit := map[bool]string{true: "minutes", false: "hours"}[tc.name == "six hours"]; tc.from.IsZero() == strings.Contains(text, "rounded out to whole "+unit) {
				t.Errorf("the text does not say (only) when the range asked is rounded out to whole %s:\n%s", unit, text)
			}
			if tc.none {
				if !strings.Contains(text, "No decisions in the") || strings.Contains(text, "vs the") {
					t.Errorf("nothing before the range, yet the text compares:\n%s", text)
				}
			} else if want := fmt.Sprintf("before (%s)", grouped(before)); !strings.Contains(text, want) {
				t.Errorf("text lacks %q:\n%s", want, text)
			}

			dom := pageDOM(t, r, "period")
			var tilePrev string
			for _, m := range tileRe.FindAllStringSubmatch(dom, -1) {
				if m[1] == "fleet.verdicts" && m[2] == "decisions" {
					tilePrev = html.UnescapeString(m[4])
				}
			}
			if tilePrev != fmt.Sprint(before) {
				t.Errorf("page: decisions before %q, the raw table holds %d", tilePrev, before)
			}
			p, rg := prevRe.FindStringSubmatch(dom), rangeRe.FindStringSubmatch(dom)
			if p == nil || rg == nil || p[1] != r.PrevFrom.Format(time.RFC3339) || p[2] != rg[1] || rg[1] != r.From.Format(time.RFC3339) || rg[2] != r.To.Format(time.RFC3339) {
				t.Errorf("page: range %q, period before %q; want %v .. %v after %v", rg, p, r.From, r.To, r.PrevFrom)
			} else if tc.none != strings.Contains(p[3], "No decisions in the") {
				t.Errorf("page: the period before says %q", p[3])
			}
		})
	}
}

// TestApprovalsNotInUse: where no definition was ever approved, rejected
// or revoked, the report says that approvals are not in use and how many
// definitions were never reviewed, in the text and in the page as
// Chromium reads it, instead of listing each as waiting ("new").
func TestApprovalsNotInUse(t *testing.T) {
	at := time.Now().UTC().Truncate(time.Hour).Add(-48 * time.Hour)
	plain := []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	conn := periodConn(t, "approvals_unused", []time.Time{at.Add(time.Minute), at.Add(2 * time.Minute)},
		&schema.Listing{EventID: "l-a", ObservedAt: at, Registry: "reg", Server: "alpha", Trust: 1, Op: schema.OpSnapshot,
			Tools: []schema.Tool{{Name: "search", InputSchema: plain}, {Name: "deploy", InputSchema: plain}, {Name: "fetch", InputSchema: plain}}})
	r, err := Collect(context.Background(), conn, Options{Analysis: "period", From: at, To: at.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	const want = "Approvals are not in use: no definition of these registries was approved, rejected or revoked up to the end of the range. 3 definitions current then were never reviewed"
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if text := b.String(); !strings.Contains(text, want) || strings.Contains(text, " new ") {
		t.Errorf("text report:\n%s", text)
	}
	dom := pageDOM(t, r, "approvals")
	if !strings.Contains(dom, `id="pending-note" data-q="report.pending">`+want) || strings.Contains(dom, `<table data-q="report.pending"`) {
		t.Errorf("the page lists the definitions as waiting, or does not say approvals are not in use")
	}
}
