package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolaudit/toolaudit/analytics"
)

// WriteText writes the report for a terminal: the answer first (the
// headline numbers against the period before, the top problems), then
// each section, cut to its top rows.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "toolaudit report: analysis %q, calls emitted %s .. %s UTC (%s)\n", r.Analysis,
		r.From.UTC().Format("2006-01-02 15:04:05"), r.To.UTC().Format("2006-01-02 15:04:05"), human(r.To.Sub(r.From)))
	if n := r.RangeNote(); n != "" {
		fmt.Fprintln(ew, n)
	}
	fmt.Fprintf(ew, "registries: %s; models: %s\n", list(r.Options.Registries), list(r.Models))

	decisions, _ := num(r.Verdicts, "decisions")
	if decisions == 0 {
		fmt.Fprintln(ew, "\nno decisions in this range")
		// Approvals wait whether or not calls were decided.
		for _, s := range r.sections() {
			if s.approvals {
				r.writeSection(ew, s)
			}
		}
		return ew.err
	}
	fmt.Fprintf(ew, "\ndecisions %s (allowed %s, rejected %s)\n",
		cellAt(r.Verdicts, 0, "decisions"), cellAt(r.Verdicts, 0, "allowed"), cellAt(r.Verdicts, 0, "rejected"))
	fmt.Fprintln(ew, "\nHeadline")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	for _, h := range r.Headlines() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", h.Label, h.Text, h.Change)
	}
	tw.Flush()
	if n := r.PrevNote(); n != "" {
		fmt.Fprintln(ew, n)
	}
	fmt.Fprintf(ew, "coercible share of H3 %s; near misses among unknown names %s\n",
		cellAt(r.Rates, 0, "h3_coercible_share"), cellAt(r.Rates, 0, "near_miss_share"))

	fmt.Fprintln(ew, "\nTop problems, by calls affected")
	problems := r.Problems()
	if len(problems) == 0 {
		fmt.Fprintln(ew, "  (none)")
	}
	for i, p := range problems {
		fmt.Fprintf(ew, "  %d. %s: %s\n", i+1, Calls(p.Calls), oneLine(p.Text, 140))
	}

	for _, s := range r.sections() {
		r.writeSection(ew, s)
	}
	if s := r.Session; s != nil {
		fmt.Fprintf(ew, "\n== Session %s\n", r.Options.Session)
		section(ew, "Decisions, in order", s.Decisions.Select("time", "source", "action", "tool", "class", "reason", "path", "resolved_server", "resolved_tool", "nearest", "drift", "registry_version"))
		section(ew, "Call path against stream (time of check, time of use)", s.TOCTOU)
		cutSection(ew, "Registry changes in the range, newest first", s.Changes.Select("time", "registry", "server", "tool", "change", "summary"), "")
	}
	fmt.Fprintln(ew, "\nCounts are decisions as delivered, from the rollups the dashboards read (a call decided twice after a crash counts twice); the session's decisions are read exactly (FINAL).")
	return ew.err
}

// sectionSpec is one ranked section of the report.
type sectionSpec struct {
	id, title, query, rank string
	res                    *analytics.Result
	approvals              bool // of the approved definitions
}

// sections are the report's tables after the answer, in order.
func (r *Report) sections() []sectionSpec {
	rank := analytics.RankColumn
	return []sectionSpec{
		{"fabricated", "Fabricated tool names (nearest real name)", "report.fabricated", rank("report.fabricated"), r.Fabricated, false},
		{"collisions", "Colliding and shadowed names", "report.collisions", rank("report.collisions"), r.Collisions, false},
		{"drift", "Drifting servers (stale definitions, tools changed after the call)", "report.drift", rank("report.drift"), r.Drift, false},
		{"sessions", "Sessions with the most rejections", "report.sessions", rank("report.sessions"), r.Sessions, false},
		{"models", "Models", "fleet.by_model", "decisions", r.ByModel, false},
		{"surfaces", "Invocation surfaces", "fleet.by_surface", "decisions", r.BySurface, false},
		{"versions", "Latest registry versions", "report.versions", rank("report.versions"), r.Versions, false},
		{"pending", "Definitions waiting for approval at the end of the range, newest first", "report.pending", rank("report.pending"), r.Pending, true},
		{"approvals", "Approvals, rejections and revocations in the range, newest first", "report.approvals", rank("report.approvals"), r.Approvals, true},
	}
}

// writeSection prints a section: its top rows, or the note that stands
// for them (ApprovalsNote).
func (r *Report) writeSection(w io.Writer, s sectionSpec) {
	if n := r.ApprovalsNote(); s.id == "pending" && n != "" {
		fmt.Fprintf(w, "\n%s\n  %s\n", s.title, n)
		return
	}
	cutSection(w, s.title, s.res, s.rank)
}

// cutSection prints a section's top rows and what was left out.
func cutSection(w io.Writer, title string, res *analytics.Result, rank string) {
	c := cut(res, rank, analytics.ReportTop)
	section(w, title, c.Result)
	if c.MoreRows > 0 {
		fmt.Fprintf(w, "  ... and %d more%s\n", c.MoreRows, moreCalls(c, rank))
	}
}

func moreCalls(c cutResult, rank string) string {
	if c.MoreCalls <= 0 {
		return ""
	}
	return fmt.Sprintf(" (%d %s)", c.MoreCalls, map[bool]string{true: "rejected", false: "calls"}[rank == "rejected"])
}

func list(vs []string) string {
	if len(vs) == 0 {
		return "all"
	}
	return strings.Join(vs, ", ")
}

// section prints a titled table of res; nothing but the title when empty.
func section(w io.Writer, title string, res *analytics.Result) {
	fmt.Fprintf(w, "\n%s\n", title)
	if res == nil || len(res.Rows) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  %s\n", strings.Join(res.Columns, "\t"))
	for i := range res.Rows {
		cells := make([]string, len(res.Columns))
		for j, c := range res.Columns {
			cells[j] = oneLine(cellAt(res, i, c), 60)
		}
		fmt.Fprintf(tw, "  %s\n", strings.Join(cells, "\t"))
	}
	tw.Flush()
}

// oneLine keeps a cell on one line, at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
