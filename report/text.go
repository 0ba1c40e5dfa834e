package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/toolaudit/toolaudit/analytics"
)

// WriteText writes the report for a terminal: the headline numbers, then
// each section as an aligned table.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "toolaudit report: analysis %q, calls emitted %s .. %s UTC (%s)\n", r.Analysis,
		r.From.UTC().Format("2006-01-02 15:04:05"), r.To.UTC().Format("2006-01-02 15:04:05"), r.To.Sub(r.From))
	fmt.Fprintf(ew, "registries: %s; models: %s\n", list(r.Options.Registries), list(r.Models))

	decisions, _ := num(r.Verdicts, "decisions")
	if decisions == 0 {
		fmt.Fprintln(ew, "\nno decisions in this range")
		return ew.err
	}
	fmt.Fprintf(ew, "\ndecisions %s (allowed %s, rejected %s)\n",
		cellAt(r.Verdicts, 0, "decisions"), cellAt(r.Verdicts, 0, "allowed"), cellAt(r.Verdicts, 0, "rejected"))
	fmt.Fprintf(ew, "of the decisions that are not MALFORMED: hallucination %s, unknown tool %s, schema reject %s\n",
		cellAt(r.Rates, 0, "hallucination_rate"), cellAt(r.Rates, 0, "unknown_tool_rate"), cellAt(r.Rates, 0, "schema_reject_rate"))
	fmt.Fprintf(ew, "coercible share of H3 %s; near misses among unknown names %s\n",
		cellAt(r.Rates, 0, "h3_coercible_share"), cellAt(r.Rates, 0, "near_miss_share"))

	section(ew, "Class mix", r.ClassMix)
	section(ew, "Models", r.ByModel)
	section(ew, "Invocation surfaces", r.BySurface)
	section(ew, "Top fabricated tool names (nearest real name)", r.Fabricated)
	section(ew, "Registry version in force", r.Versions)
	for _, reg := range r.Deployments {
		fmt.Fprintf(ew, "\n== MCP deployment %s\n", reg.Name)
		section(ew, "Names shared between servers", reg.SharedNames)
		section(ew, "Colliding names and who got the calls", reg.Collisions)
		section(ew, "M1-M5 by server", reg.Classes)
	}
	if r.MoreRegistries > 0 {
		fmt.Fprintf(ew, "\n(%d more MCP deployments; narrow with --registry)\n", r.MoreRegistries)
	}
	if s := r.Session; s != nil {
		fmt.Fprintf(ew, "\n== Session %s\n", r.Options.Session)
		section(ew, "Decisions, in order", s.Decisions.Select("time", "source", "action", "tool", "class", "reason", "path", "resolved_server", "resolved_tool", "nearest", "registry_version"))
		section(ew, "Call path against stream (time of check, time of use)", s.TOCTOU)
		section(ew, "Registry changes in the range", s.Changes.Select("time", "registry", "server", "tool", "change", "summary"))
	}
	fmt.Fprintln(ew, "\nCounts are decisions as delivered, from the rollups the dashboards read (a call decided twice after a crash counts twice); the session's decisions are read exactly (FINAL).")
	return ew.err
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
