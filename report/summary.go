package report

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/analytics"
)

// Headline is one headline number of the range and its change against
// the period before (Report.PrevFrom .. PrevTo).
type Headline struct {
	Label, Query, Col string
	// Value and Prev are the query's values (nil: none).
	Value, Prev any
	Text        string
	// Change says how Value moved from Prev: points for rates, percent
	// for counts; "" when there is nothing to compare.
	Change string
	// Worse is whether the change is for the worse (rates and rejections
	// up).
	Worse bool
}

// Headlines are the report's answer in numbers: decisions, rejections,
// the three rates, each against the period before, and the unreadable
// calls of every registry.
func (r *Report) Headlines() []Headline {
	span := r.To.Sub(r.From)
	var out []Headline
	for _, h := range []struct {
		label, col string
		res, prev  *analytics.Result
		q          string
	}{
		{"decisions", "decisions", r.Verdicts, r.PrevVerdicts, "fleet.verdicts"},
		{"rejected", "rejected", r.Verdicts, r.PrevVerdicts, "fleet.verdicts"},
		{"hallucination rate", "hallucination_rate", r.Rates, r.PrevRates, "fleet.rates"},
		{"unknown-tool rate", "unknown_tool_rate", r.Rates, r.PrevRates, "fleet.rates"},
		{"schema-reject rate", "schema_reject_rate", r.Rates, r.PrevRates, "fleet.rates"},
	} {
		v, p := value(h.res, h.col), value(h.prev, h.col)
		hl := Headline{Label: h.label, Query: h.q, Col: h.col, Value: v, Prev: p, Text: Grouped(h.col, v)}
		a, okA := analytics.Float(v)
		b, okB := analytics.Float(p)
		rate := strings.HasSuffix(h.col, "_rate")
		prevDecisions, _ := num(r.PrevVerdicts, "decisions")
		switch {
		case prevDecisions == 0 || !okA || !okB:
			// Nothing to compare (PrevNote says so once).
		case rate:
			hl.Change = fmt.Sprintf("%+.2f pp vs the %s before (%s)", 100*(a-b), human(span), Format(h.col, p))
			hl.Worse = a > b
		case b > 0:
			hl.Change = fmt.Sprintf("%+.0f%% vs the %s before (%s)", 100*(a-b)/b, human(span), Grouped(h.col, p))
			hl.Worse = h.col == "rejected" && a > b
		case a > 0:
			hl.Change = "none in the " + human(span) + " before"
			hl.Worse = h.col == "rejected"
		}
		out = append(out, hl)
	}
	var malformed uint64
	if r.Malformed != nil {
		c := r.Malformed.Col("malformed")
		for _, row := range r.Malformed.Rows {
			n, _ := analytics.Float(row[c])
			malformed += uint64(n)
		}
	}
	return append(out, Headline{Label: "unreadable calls (MALFORMED, every registry)", Query: "malformed.over_time", Col: "malformed",
		Value: malformed, Text: Grouped("malformed", malformed)})
}

// PrevNote says why the headline shows no change, when the period
// before has no decisions; "" otherwise.
func (r *Report) PrevNote() string {
	if d, _ := num(r.PrevVerdicts, "decisions"); d == 0 {
		return "No decisions in the " + human(r.To.Sub(r.From)) + " before (" + r.PrevFrom.UTC().Format("2006-01-02 15:04") + " .. " + r.PrevTo.UTC().Format("2006-01-02 15:04") + " UTC, up to the range's start): no change to show."
	}
	return ""
}

// ApprovalsNote says, when definitions are current at the end of the
// range but no approval event of the selected registries came before it,
// that approvals are not in use and how many definitions were never
// reviewed: the report shows that instead of a queue nobody keeps; ""
// otherwise (approvals in use, or no definition).
func (r *Report) ApprovalsNote() string {
	if r.Pending == nil || len(r.Pending.Rows) == 0 || r.Pending.Col("reviews") < 0 {
		return ""
	}
	if n, _ := analytics.Float(r.Pending.Rows[0][r.Pending.Col("reviews")]); n > 0 {
		return ""
	}
	total, _ := analytics.Float(r.Pending.Rows[0][r.Pending.Col("total_rows")])
	defs := fmt.Sprintf("%s definitions", Grouped("total_rows", uint64(total)))
	if total == 1 {
		defs = "1 definition"
	}
	return "Approvals are not in use: no definition of these registries was approved, rejected or revoked up to the end of the range. " +
		defs + " current then were never reviewed (the MCP servers dashboard lists them; resolverd registry approve reviews one)."
}

// RangeNote says how the range counted differs from the one asked: its
// ends rounded out to whole buckets of the rollups (analytics.Align);
// "" when it is the one asked.
func (r *Report) RangeNote() string {
	if r.AskedFrom.Equal(r.From) && r.AskedTo.Equal(r.To) || r.AskedFrom.IsZero() {
		return ""
	}
	unit := "minutes"
	if analytics.Tier(r.To.Sub(r.From)) == time.Hour {
		unit = "hours"
	}
	return "The range asked, " + r.AskedFrom.UTC().Format("2006-01-02 15:04:05") + " .. " + r.AskedTo.UTC().Format("2006-01-02 15:04:05") +
		" UTC, rounded out to whole " + unit + " (the rollups' buckets), so that it and the period before count every call once."
}

// value is column col of the first row, or nil.
func value(r *analytics.Result, col string) any {
	if r == nil || len(r.Rows) == 0 || r.Col(col) < 0 {
		return nil
	}
	return r.Rows[0][r.Col(col)]
}

// human is a duration as a person says it: 7d, 6h, 90m.
func human(d time.Duration) string {
	switch {
	case d >= 48*time.Hour && d%(24*time.Hour) == 0:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	case d >= 48*time.Hour:
		return fmt.Sprintf("%.1fd", d.Hours()/24)
	case d >= 2*time.Hour && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d >= 2*time.Hour:
		return fmt.Sprintf("%.1fh", d.Hours())
	}
	return fmt.Sprintf("%dm", int(math.Round(d.Minutes())))
}

// Problem is one of the top problems: a row of a ranked section, what it
// says, and the calls it affected.
type Problem struct {
	Kind, Text string
	Calls      int64
	// Section is the HTML id of the detail section; Query and Row the
	// row (analytics.Report).
	Section, Query string
	Row            int
}

// Calls is "1 call" or "n calls".
func Calls(n int64) string {
	if n == 1 {
		return "1 call"
	}
	return fmt.Sprintf("%d calls", n)
}

// MaxProblems is how many top problems the report leads with.
const MaxProblems = 5

// perKind is how many rows of each section compete for the top problems.
const perKind = 2

// Problems are the top problems of the range, ranked by calls affected:
// the first rows of each ranked section (fabricated names, colliding and
// shadowed names, drifting servers, sessions with most rejections).
func (r *Report) Problems() []Problem {
	var out []Problem
	add := func(kind, section, q string, res *analytics.Result, text func(i int) string) {
		if res == nil {
			return
		}
		for i := range min(perKind, len(res.Rows)) {
			n, _ := analytics.Float(res.Rows[i][res.Col(analytics.RankColumn(q))])
			if n <= 0 {
				continue
			}
			out = append(out, Problem{Kind: kind, Text: text(i), Calls: int64(n), Section: section, Query: q, Row: i})
		}
	}
	c := func(res *analytics.Result, i int, col string) string { return cellAt(res, i, col) }
	add("fabricated name", "fabricated", "report.fabricated", r.Fabricated, func(i int) string {
		f := r.Fabricated
		if c(f, i, "nearest") == "" {
			return fmt.Sprintf("%s called %q, which no registry has and nothing is near: invented", c(f, i, "models"), c(f, i, "emitted"))
		}
		return fmt.Sprintf("%s called %q for %q (%s)", c(f, i, "models"), c(f, i, "emitted"), c(f, i, "nearest"), c(f, i, "kind"))
	})
	add("colliding name", "collisions", "report.collisions", r.Collisions, func(i int) string {
		x := r.Collisions
		return fmt.Sprintf("%q of registry %s is provided by %s: %s", c(x, i, "name"), c(x, i, "registry"), c(x, i, "provided_by"), c(x, i, "kind"))
	})
	add("drifting server", "drift", "report.drift", r.Drift, func(i int) string {
		x := r.Drift
		var what []string
		if n := c(x, i, "stale"); n != "0" {
			what = append(what, n+" calls on a stale definition")
		}
		if n := c(x, i, "drifted"); n != "0" {
			what = append(what, n+" calls whose tool changed after")
		}
		return fmt.Sprintf("server %s of registry %s: %s (%s)", c(x, i, "server"), c(x, i, "registry"), strings.Join(what, ", "), c(x, i, "tools"))
	})
	add("rejected session", "sessions", "report.sessions", r.Sessions, func(i int) string {
		x := r.Sessions
		who := c(x, i, "agent")
		if m := c(x, i, "model"); m != "" {
			who += ", " + m
		}
		return fmt.Sprintf("session %s (%s): %s of %s decisions rejected", c(x, i, "session"), who, c(x, i, "rejected"), c(x, i, "decisions"))
	})
	slices.SortStableFunc(out, func(a, b Problem) int { return cmp.Compare(b.Calls, a.Calls) })
	return out[:min(MaxProblems, len(out))]
}

// cut is res's first n rows, and what was left out: rows and their calls
// (from total_rows and total_calls when the query ranks, total_rows
// alone for the approvals' sections, else counted).
type cutResult struct {
	*analytics.Result
	MoreRows, MoreCalls int64
}

func cut(res *analytics.Result, rank string, n int) cutResult {
	if res == nil {
		return cutResult{Result: &analytics.Result{}}
	}
	shown := &analytics.Result{Columns: res.Columns, Rows: res.Rows[:min(n, len(res.Rows))]}
	out := cutResult{Result: shown}
	tr, tc := res.Col("total_rows"), res.Col("total_calls")
	if tr >= 0 && len(res.Rows) > 0 {
		total, _ := analytics.Float(res.Rows[0][tr])
		out.MoreRows = int64(total) - int64(len(shown.Rows))
		if tc >= 0 { // a ranking by calls: what the rest count
			calls, _ := analytics.Float(res.Rows[0][tc])
			out.MoreCalls = int64(calls)
			for _, row := range shown.Rows {
				v, _ := analytics.Float(row[res.Col(rank)])
				out.MoreCalls -= int64(v)
			}
		}
		// The totals are the ranking's, not columns to show.
		var cols []string
		for _, c := range res.Columns {
			if c != "total_rows" && c != "total_calls" && c != "reviews" {
				cols = append(cols, c)
			}
		}
		out.Result = shown.Select(cols...)
		return out
	}
	out.MoreRows = int64(len(res.Rows) - len(shown.Rows))
	return out
}
