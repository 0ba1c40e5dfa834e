package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/analytics"
)

// Options select what a report covers.
type Options struct {
	// Analysis is the analysis id (resolverd run's --analysis).
	Analysis string
	// From and To bound the calls' emitted_at.
	From, To time.Time
	// Registries and Models narrow the report; empty means all.
	Registries, Models []string
	// Session, if set, adds the incident timeline of that session.
	Session string
	// MaxRegistries bounds the MCP deployments shown (those with the
	// most multi-server rejections first). Default 8.
	MaxRegistries int
}

// Report is the data of a report: query results of package analytics,
// the same as the dashboards' panels.
type Report struct {
	Options
	// Interval is the bucket of the time series.
	Interval time.Duration
	Created  time.Time

	Rates, Verdicts, ClassMix, ByModel, BySurface, ModelSeries, Fabricated *analytics.Result
	Versions                                                               *analytics.Result
	// Deployments are the MCP deployments: registries whose servers share
	// names or whose calls were M1-M5.
	Deployments []Registry
	// MoreRegistries is how many more deployments there were than MaxRegistries.
	MoreRegistries int
	// Session is the incident timeline, with Options.Session.
	Session *Session
}

// Registry is one MCP deployment's server matrix.
type Registry struct {
	Name                             string
	SharedNames, Collisions, Classes *analytics.Result
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

// seriesPoints is about how many points a time series of the report has.
const seriesPoints = 48

// Collect runs the report's queries on conn, whose default database holds
// the analytics tables (sink.Config.OpenIn).
func Collect(ctx context.Context, conn driver.Conn, o Options) (*Report, error) {
	if o.Analysis == "" {
		return nil, errors.New("report: no analysis")
	}
	if !o.To.After(o.From) {
		return nil, fmt.Errorf("report: empty time range %s .. %s", o.From, o.To)
	}
	if o.MaxRegistries <= 0 {
		o.MaxRegistries = 8
	}
	r := &Report{Options: o, Created: time.Now().UTC()}
	r.Interval = max(time.Minute, (o.To.Sub(o.From) / seriesPoints).Truncate(time.Minute))
	p := o.Params(r.Interval)
	run := func(q analytics.Query, p analytics.Params) (*analytics.Result, error) {
		return analytics.Run(ctx, conn, q, p)
	}
	fleet := analytics.Fleet()
	for _, x := range []struct {
		dst **analytics.Result
		id  string
	}{
		{&r.Rates, "fleet.rates"}, {&r.Verdicts, "fleet.verdicts"}, {&r.ClassMix, "fleet.class_mix"},
		{&r.ByModel, "fleet.by_model"}, {&r.BySurface, "fleet.by_surface"},
		{&r.ModelSeries, "fleet.hallucination_by_model"}, {&r.Fabricated, "fleet.top_fabricated"},
	} {
		res, err := run(pick(fleet, x.id), p)
		if err != nil {
			return nil, err
		}
		*x.dst = res
	}
	servers := analytics.Servers()
	var err error
	if r.Versions, err = run(pick(servers, "servers.version_in_force"), p); err != nil {
		return nil, err
	}
	if err := r.collectRegistries(ctx, conn, servers, p); err != nil {
		return nil, err
	}
	if o.Session != "" {
		inc := analytics.Incident()
		s := &Session{}
		for _, x := range []struct {
			dst **analytics.Result
			id  string
		}{{&s.Decisions, "incident.session_decisions"}, {&s.TOCTOU, "incident.toctou"}, {&s.Changes, "changes.in_range"}} {
			res, err := run(pick(inc, x.id), p)
			if err != nil {
				return nil, err
			}
			*x.dst = res
		}
		r.Session = s
	}
	return r, nil
}

// collectRegistries finds the MCP deployments among the selected
// registries and reads each one's server matrix.
func (r *Report) collectRegistries(ctx context.Context, conn driver.Conn, servers []analytics.Query, p analytics.Params) error {
	names, err := analytics.Run(ctx, conn, analytics.Query{ID: "var.registry", SQL: analytics.Variables()[analytics.VarRegistry].SQL}, p)
	if err != nil {
		return err
	}
	type scored struct {
		reg   Registry
		score float64
	}
	var found []scored
	for _, row := range names.Rows {
		name, _ := row[0].(string)
		if len(r.Options.Registries) > 0 && !slices.Contains(r.Options.Registries, name) {
			continue
		}
		rp := p
		rp.Vars = maps.Clone(p.Vars)
		rp.Vars[analytics.VarRegistry] = analytics.Text(name)
		reg := Registry{Name: name}
		for _, x := range []struct {
			dst **analytics.Result
			id  string
		}{{&reg.SharedNames, "servers.shared_names"}, {&reg.Collisions, "servers.collisions"}, {&reg.Classes, "servers.mcp_classes"}} {
			res, err := analytics.Run(ctx, conn, pick(servers, x.id), rp)
			if err != nil {
				return err
			}
			*x.dst = res
		}
		if len(reg.SharedNames.Rows)+len(reg.Classes.Rows) == 0 {
			continue
		}
		var score float64
		for _, row := range reg.Classes.Rows {
			for _, c := range []string{"M1", "M2", "M3", "M4", "M5"} {
				v, _ := analytics.Float(row[reg.Classes.Col(c)])
				score += v
			}
		}
		found = append(found, scored{reg, score})
	}
	slices.SortStableFunc(found, func(a, b scored) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		}
		return 0
	})
	for i, f := range found {
		if i == r.MaxRegistries {
			r.MoreRegistries = len(found) - i
			break
		}
		r.Deployments = append(r.Deployments, f.reg)
	}
	return nil
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
