package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/analytics"
)

// Options select what a report covers.
type Options struct {
	// Analysis is the analysis id (resolverd run's --analysis).
	Analysis string
	// From and To bound the calls' emitted_at: [From, To).
	From, To time.Time
	// Registries and Models narrow the report; empty means all.
	Registries, Models []string
	// Session, if set, adds the incident timeline of that session.
	Session string
}

// Report is the data of a report: query results of package analytics,
// the same as the dashboards' panels, and the ranked sections of
// analytics.Report. Every query covers all the selected registries at
// once: a report over thousands of registries runs the queries one over
// ten runs.
type Report struct {
	Options
	// Interval is the bucket of the time series, chosen from the range
	// (Bucket).
	Interval time.Duration
	Created  time.Time
	// Options.From and To are the range counted: the one asked
	// (AskedFrom, AskedTo) rounded out to whole buckets of the rollup
	// tier it reads (analytics.Align), half-open. PrevFrom and PrevTo are
	// the period before, as long and adjacent ([PrevFrom, From)): the
	// headline's change is against it, exact, as no bucket is in both.
	AskedFrom, AskedTo, PrevFrom, PrevTo time.Time

	Rates, Verdicts, PrevRates, PrevVerdicts             *analytics.Result
	ClassMix, ByModel, BySurface, ModelSeries, Malformed *analytics.Result
	// The ranked sections (analytics.Report).
	Fabricated, Collisions, Drift, Sessions, Versions *analytics.Result
	// The approved definitions: those waiting for a review at the end of
	// the range, and the verdicts of the range.
	Pending, Approvals *analytics.Result
	// Session is the incident timeline, with Options.Session.
	Session *Session
}

// Session is the incident drill-down of one session.
type Session struct {
	Decisions, TOCTOU, Changes *analytics.Result
}

// Params are the dashboards' variables for o: a report is a dashboard
// state.
func (o Options) Params(interval time.Duration) analytics.Params {
	sel := func(vs []string) analytics.Value {
		if len(vs) == 0 {
			return analytics.All()
		}
		return analytics.Selected(vs...)
	}
	return analytics.Params{From: o.From, To: o.To, Interval: interval, Vars: map[string]analytics.Value{
		analytics.VarAnalysis: analytics.Text(o.Analysis),
		analytics.VarRegistry: sel(o.Registries),
		analytics.VarModel:    sel(o.Models),
		analytics.VarSurface:  analytics.All(),
		analytics.VarSource:   analytics.All(),
		analytics.VarClass:    analytics.All(),
		analytics.VarAgent:    analytics.All(),
		analytics.VarSession:  analytics.Text(o.Session),
	}}
}

// buckets are the time series' possible buckets, shortest first.
var buckets = []time.Duration{time.Minute, 5 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour}

// maxPoints bounds the points of a series: a chart 700 pixels wide.
const maxPoints = 60

// Bucket is the time series' bucket for a range: the shortest of one
// minute, 5, 15, 30 minutes, 1, 3, 6, 12 hours, a day or a week that
// gives at most maxPoints buckets (a week beyond 60 weeks). Buckets of
// an hour or more for ranges over two days, which read the hour rollup.
func Bucket(span time.Duration) time.Duration {
	for _, b := range buckets {
		if span/b <= maxPoints && (b >= time.Hour || span <= analytics.TierSeconds*time.Second) {
			return b
		}
	}
	return buckets[len(buckets)-1]
}

// Collect runs the report's queries on conn, whose default database holds
// the analytics tables (sink.Config.OpenIn): a fixed number of queries,
// whatever the number of registries.
func Collect(ctx context.Context, conn driver.Conn, o Options) (*Report, error) {
	if o.Analysis == "" {
		return nil, errors.New("report: no analysis")
	}
	if !o.To.After(o.From) {
		return nil, fmt.Errorf("report: empty time range %s .. %s", o.From, o.To)
	}
	// The range the rollups answer exactly, and the period before it,
	// adjacent and as long (analytics.Align): the report says this range.
	r := &Report{Options: o, Created: time.Now().UTC(), AskedFrom: o.From, AskedTo: o.To}
	r.From, r.To = analytics.Align(o.From, o.To)
	r.PrevFrom, r.PrevTo = analytics.Previous(r.From, r.To)
	r.Interval = Bucket(r.To.Sub(r.From))
	o = r.Options
	p := o.Params(r.Interval)
	prev := p
	prev.From, prev.To = r.PrevFrom, r.PrevTo
	fleet, rep := analytics.Fleet(), analytics.Report()
	type job struct {
		dst *(*analytics.Result)
		q   analytics.Query
		p   analytics.Params
	}
	jobs := []job{
		{&r.Rates, pick(fleet, "fleet.rates"), p}, {&r.Verdicts, pick(fleet, "fleet.verdicts"), p},
		{&r.PrevRates, pick(fleet, "fleet.rates"), prev}, {&r.PrevVerdicts, pick(fleet, "fleet.verdicts"), prev},
		{&r.ClassMix, pick(fleet, "fleet.class_mix"), p},
		{&r.ByModel, pick(fleet, "fleet.by_model"), p}, {&r.BySurface, pick(fleet, "fleet.by_surface"), p},
		{&r.ModelSeries, pick(fleet, "fleet.hallucination_by_model"), p},
		{&r.Malformed, analytics.Malformed(), p},
		{&r.Fabricated, pick(rep, "report.fabricated"), p}, {&r.Collisions, pick(rep, "report.collisions"), p},
		{&r.Drift, pick(rep, "report.drift"), p}, {&r.Sessions, pick(rep, "report.sessions"), p},
		{&r.Versions, pick(rep, "report.versions"), p},
		{&r.Pending, pick(rep, "report.pending"), p}, {&r.Approvals, pick(rep, "report.approvals"), p},
	}
	if o.Session != "" {
		inc := analytics.Incident()
		r.Session = &Session{}
		jobs = append(jobs,
			job{&r.Session.Decisions, pick(inc, "incident.session_decisions"), p},
			job{&r.Session.TOCTOU, analytics.TOCTOU(true), p},
			job{&r.Session.Changes, pick(inc, "changes.in_range"), p})
	}
	for _, j := range jobs {
		res, err := analytics.Run(ctx, conn, j.q, j.p)
		if err != nil {
			return nil, err
		}
		*j.dst = res
	}
	return r, nil
}

// pick returns the query of that ID of package analytics.
func pick(qs []analytics.Query, id string) analytics.Query {
	for _, q := range qs {
		if q.ID == id {
			return q
		}
	}
	panic("report: no analytics query " + id)
}

// SpanOf returns a time range holding every decision of an analysis
// (analytics.Span: whole hours), for a report over all of it; ok is false
// when it has none.
func SpanOf(ctx context.Context, conn driver.Conn, analysis string) (from, to time.Time, ok bool, err error) {
	res, err := analytics.Run(ctx, conn, analytics.Span(), analytics.Params{From: time.Unix(0, 0), To: time.Unix(0, 0),
		Vars: map[string]analytics.Value{analytics.VarAnalysis: analytics.Text(analysis)}})
	if err != nil {
		return time.Time{}, time.Time{}, false, err
	}
	if len(res.Rows) != 1 {
		return time.Time{}, time.Time{}, false, nil
	}
	f, okf := res.Rows[0][0].(time.Time)
	l, okl := res.Rows[0][1].(time.Time)
	if !okf || !okl || f.Unix() <= 0 {
		return time.Time{}, time.Time{}, false, nil
	}
	return f, l, true, nil
}

// TOCTOU runs the incident dashboard's "call path against stream" panel
// (analytics incident.toctou, the one text of that comparison) for o:
// the calls decided in the call path whose decisions disagree on class,
// at most 500.
func TOCTOU(ctx context.Context, conn driver.Conn, o Options) (*analytics.Result, error) {
	if o.Analysis == "" {
		return nil, errors.New("report: no analysis")
	}
	return analytics.Run(ctx, conn, analytics.TOCTOU(o.Session != ""), o.Params(time.Minute))
}

// WriteTOCTOU writes TOCTOU's result for a terminal.
func WriteTOCTOU(w io.Writer, o Options, res *analytics.Result) error {
	ew := &errWriter{w: w}
	section(ew, fmt.Sprintf("Call path against stream (time of check, time of use): analysis %q, calls emitted %s .. %s UTC",
		o.Analysis, o.From.UTC().Format("2006-01-02 15:04:05"), o.To.UTC().Format("2006-01-02 15:04:05")), res)
	fmt.Fprintf(ew, "%d call(s) decided differently in the call path and from the stream (FINAL)\n", len(res.Rows))
	return ew.err
}
