package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/toolaudit/toolaudit/sink"
)

// exitTooManyChanged is diff's exit status when more calls changed class
// (or verdict) than --max-changed (--max-verdict-changed) allows.
const exitTooManyChanged = 3

const diffHelp = `Compares two analyses call by call, read from ClickHouse with FINAL:
--analysis (the new one, e.g. a resolverd reanalyze under a new mode or
build) against --against (the baseline, by default the live one). Prints
how many calls each holds in the selection and how many are absent from
the other, the calls whose class or verdict changed, grouped by (before,
after), with their count and --examples calls each (event id, tool,
reason before and after), the calls absent from one side likewise, then
how many changed class and verdict; --json prints the same as one JSON
object, unchanged groups included.

The decisions compared are those taken from the calls topic (sources
stream and reanalysis); when an analysis has both for a call, the later
counts. --from and --to keep the calls whose emitted_at is in [--from,
--to) (a call without a usable emitted_at is stored at 1970-01-01 and
falls outside); --registry keeps the calls of these registries. Give a
re-analysis's window as --from and --to: without them every call the
baseline ever decided is in the selection, and the gate fails on those
the re-analysis did not cover.

The gate cannot pass on a partial analysis: by default it fails (exit 4)
when a call of the selection decided in --against is absent from
--analysis (--max-absent N allows N; -1 never fails). --max-changed
counts the calls whose class changed (M2 -> M3, H2 -> H5 included, and
every verdict change); --max-verdict-changed the calls whose verdict
changed.

Exit status: 0; 4 when more calls than --max-absent are absent from
--analysis (checked first: an incomplete comparison says nothing of the
changes); 3 when more calls changed than --max-changed or
--max-verdict-changed allow; 1 when ClickHouse cannot be read or either
analysis has no decision in the selection (a misspelt id must not pass a
gate); 2 for a usage error. For CI: run a new build over last week's
traffic, then gate on the diff.

--clickhouse not given: when nothing answers at its default
(127.0.0.1:9000) and the embedded stack does (resolverd stack, make
demo: 127.0.0.1:19000), the stack's is used, and logged.

Every flag can also be set as RESOLVERD_<FLAG> (dashes as underscores).`

func diffCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd diff", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var ch chFlags
	ch.register(fs)
	var q sink.DiffQuery
	fs.StringVar(&q.Analysis, "analysis", "", "the new analysis `ID`; required")
	fs.StringVar(&q.Against, "against", "live", "the baseline analysis `id`")
	from := fs.String("from", "", "keep calls emitted at or after `TIME` (RFC 3339, or a duration before now: -24h)")
	to := fs.String("to", "", "keep calls emitted before `TIME`")
	registries := fs.String("registry", "", "keep the calls of these `REGISTRIES`, comma-separated")
	fs.IntVar(&q.Examples, "examples", 3, "calls shown per group")
	asJSON := fs.Bool("json", false, "print one JSON object instead of tables")
	maxChanged := fs.Int64("max-changed", -1, "exit 3 when more than `N` calls changed class (or verdict) (-1: never)")
	maxVerdict := fs.Int64("max-verdict-changed", -1, "exit 3 when more than `N` calls changed verdict (-1: never)")
	maxAbsent := fs.Int64("max-absent", 0, "exit 4 when more than `N` calls of the selection decided in --against are absent from --analysis (-1: never)")
	return &ffcli.Command{
		Name:       "diff",
		ShortUsage: "resolverd diff --analysis A [--against B] [--from T1 --to T2] [--registry R] [--json] [--max-changed N] [--max-absent N]",
		ShortHelp:  "the calls whose decision changed between two analyses",
		LongHelp:   diffHelp,
		FlagSet:    fs,
		Options:    []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			if q.Analysis == "" || q.Against == "" {
				return usageError{errors.New("diff needs --analysis (and --against)")}
			}
			if q.Analysis == q.Against {
				return usageError{fmt.Errorf("--analysis and --against are both %q", q.Analysis)}
			}
			if q.Examples < 0 {
				return usageError{fmt.Errorf("--examples %d: want 0 or more", q.Examples)}
			}
			for _, l := range []struct {
				name string
				v    int64
			}{{"--max-changed", *maxChanged}, {"--max-verdict-changed", *maxVerdict}, {"--max-absent", *maxAbsent}} {
				if l.v < -1 {
					return usageError{fmt.Errorf("%s %d: want -1 (never) or more", l.name, l.v)}
				}
			}
			now := time.Now()
			var err error
			if *from != "" {
				if q.From, err = parseWhen(*from, "--from", now); err != nil {
					return err
				}
			}
			if *to != "" {
				if q.To, err = parseWhen(*to, "--to", now); err != nil {
					return err
				}
			}
			if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
				return usageError{errors.New("--to is not after --from")}
			}
			q.Registries = splitList(*registries)
			log := slog.New(slog.NewTextHandler(std.err, nil))
			cfg, err := ch.config(os.Getenv, log)
			if err != nil {
				return usageError{err}
			}
			if cfg.TLS == nil { // the embedded stack takes no TLS: no fallback to it then
				if cfg.Addr, err = stackDefault(ctx, fs, "clickhouse", cfg.Addr, embeddedClickHouse, log); err != nil {
					return err
				}
			}
			store, err := sink.NewClickHouse(ctx, cfg)
			if err != nil {
				return fmt.Errorf("clickhouse: %w", err)
			}
			defer store.Close()
			groups, err := store.Diff(ctx, q)
			if err != nil {
				return err
			}
			d := summarizeDiff(q, groups)
			if *asJSON {
				enc := json.NewEncoder(std.out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(d); err != nil {
					return err
				}
			} else {
				printDiff(std.out, d)
			}
			return d.gate(gateLimits{changed: *maxChanged, verdict: *maxVerdict, absent: *maxAbsent})
		},
	}
}

// gateLimits are diff's gates; -1 is none.
type gateLimits struct{ changed, verdict, absent int64 }

// gate returns diff's outcome: nil, or the error of its exit status.
func (d diffReport) gate(l gateLimits) error {
	switch {
	case d.Calls.Against == 0:
		return fmt.Errorf("analysis %q has no decision from the calls topic in the selection", d.Against)
	case d.Calls.Analysis == 0:
		return fmt.Errorf("analysis %q has no decision from the calls topic in the selection", d.Analysis)
	case l.absent >= 0 && d.Absent > l.absent:
		hint := ""
		if d.From == "" || d.To == "" {
			hint = " (without --from and --to, every call " + strconv.Quote(d.Against) + " ever decided is compared: give the re-analysis's window)"
		}
		return exitError{exitUnproven, fmt.Errorf("%d calls decided in %q are absent from %q, more than --max-absent %d: the comparison is incomplete%s",
			d.Absent, d.Against, d.Analysis, l.absent, hint)}
	case l.changed >= 0 && d.ClassChanged > l.changed:
		return exitError{exitTooManyChanged, fmt.Errorf("%d calls changed class (%d verdict), more than --max-changed %d", d.ClassChanged, d.VerdictChanged, l.changed)}
	case l.verdict >= 0 && d.VerdictChanged > l.verdict:
		return exitError{exitTooManyChanged, fmt.Errorf("%d calls changed verdict, more than --max-verdict-changed %d", d.VerdictChanged, l.verdict)}
	}
	return nil
}

// diffReport is diff's output (the JSON object of --json).
type diffReport struct {
	Analysis   string    `json:"analysis"`
	Against    string    `json:"against"`
	From       string    `json:"from,omitempty"`
	To         string    `json:"to,omitempty"`
	Registries []string  `json:"registries,omitempty"`
	Calls      diffCalls `json:"calls"`
	// Absent counts the calls of the selection decided in Against and
	// absent from Analysis; New those decided in Analysis only.
	Absent int64 `json:"absent"`
	New    int64 `json:"new"`
	// ClassChanged counts the calls in both analyses whose class changed,
	// VerdictChanged those whose verdict changed (allow <-> reject).
	ClassChanged   int64       `json:"class_changed"`
	VerdictChanged int64       `json:"verdict_changed"`
	Groups         []diffGroup `json:"groups"`
}

type diffCalls struct {
	Both     int64 `json:"both"`     // decided in both analyses
	Analysis int64 `json:"analysis"` // decided in --analysis
	Against  int64 `json:"against"`  // decided in --against
}

type diffGroup struct {
	Before   *sink.Outcome      `json:"before"` // null: the call has no decision in --against
	After    *sink.Outcome      `json:"after"`  // null: none in --analysis
	Calls    int64              `json:"calls"`
	Changed  bool               `json:"changed"` // class or verdict differ, or one side is absent
	Examples []sink.DiffExample `json:"examples"`
}

func summarizeDiff(q sink.DiffQuery, groups []sink.DiffGroup) diffReport {
	d := diffReport{Analysis: q.Analysis, Against: q.Against, Registries: q.Registries, Groups: []diffGroup{}}
	if !q.From.IsZero() {
		d.From = q.From.Format(time.RFC3339Nano)
	}
	if !q.To.IsZero() {
		d.To = q.To.Format(time.RFC3339Nano)
	}
	for _, g := range groups {
		out := diffGroup{Calls: g.Calls, Changed: g.Before != g.After, Examples: g.Examples}
		if out.Examples == nil {
			out.Examples = []sink.DiffExample{}
		}
		if g.Before.Class != "" {
			out.Before = &g.Before
			d.Calls.Against += g.Calls
		}
		if g.After.Class != "" {
			out.After = &g.After
			d.Calls.Analysis += g.Calls
		}
		if out.Before != nil && out.After != nil {
			d.Calls.Both += g.Calls
			if g.Before.Class != g.After.Class {
				d.ClassChanged += g.Calls
			}
			if g.Before.Verdict != g.After.Verdict {
				d.VerdictChanged += g.Calls
			}
		}
		d.Groups = append(d.Groups, out)
	}
	d.Absent, d.New = d.Calls.Against-d.Calls.Both, d.Calls.Analysis-d.Calls.Both
	return d
}

// printDiff prints the changed groups as a table, then their examples.
func printDiff(w io.Writer, d diffReport) {
	outcome := func(o *sink.Outcome) string {
		if o == nil {
			return "(absent)"
		}
		return string(o.Class) + " " + string(o.Verdict)
	}
	sel := ""
	if d.From != "" || d.To != "" {
		sel = fmt.Sprintf(", emitted in [%s, %s)", or(d.From, "-inf"), or(d.To, "+inf"))
	}
	if len(d.Registries) > 0 {
		sel += fmt.Sprintf(", registries %v", d.Registries)
	}
	fmt.Fprintf(w, "analysis %q against %q%s: %d calls in both; %d absent from %q (decided in %q only), %d new in %q\n",
		d.Analysis, d.Against, sel, d.Calls.Both, d.Absent, d.Analysis, d.Against, d.New, d.Analysis)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "before\t\tafter\tcalls\t\n")
	changed := 0
	for _, g := range d.Groups {
		if !g.Changed {
			continue
		}
		changed++
		fmt.Fprintf(tw, "%s\t->\t%s\t%d\t\n", outcome(g.Before), outcome(g.After), g.Calls)
	}
	if changed == 0 {
		fmt.Fprintf(tw, "(no change)\t\t\t\t\n")
	}
	tw.Flush()
	for _, g := range d.Groups {
		if !g.Changed || len(g.Examples) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s -> %s, %d calls, e.g.:\n", outcome(g.Before), outcome(g.After), g.Calls)
		for _, e := range g.Examples {
			fmt.Fprintf(w, "  %s  %s\n    before: %s\n    after:  %s\n", or(e.EventID, e.CallKey), strconv.Quote(e.Tool),
				or(e.ReasonBefore, "-"), or(e.ReasonAfter, "-"))
		}
	}
	fmt.Fprintf(w, "\n%d calls changed class, %d changed verdict; %d absent from %q\n", d.ClassChanged, d.VerdictChanged, d.Absent, d.Analysis)
}

func or(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
