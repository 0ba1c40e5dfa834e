package analytics

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/analyticsfixture"
	"github.com/toolaudit/toolaudit/schema"
)

// AllQueries is every ClickHouse query of the dashboards: panels,
// annotations and variables.
func allQueries() []Query {
	var qs []Query
	qs = append(qs, Fleet()...)
	qs = append(qs, Servers()...)
	qs = append(qs, Incident()...)
	qs = append(qs, ChangeAnnotations(), Span(), TOCTOU(true))
	qs = append(qs, Report()...)
	for _, v := range Variables() {
		qs = append(qs, Query{ID: "var." + v.Name, SQL: v.SQL})
	}
	qs = append(qs, Query{ID: "var.mcp_registry", SQL: MCPRegistry().SQL})
	seen := map[string]bool{}
	var out []Query
	for _, q := range qs {
		if !seen[q.ID] {
			seen[q.ID] = true
			out = append(out, q)
		}
	}
	return out
}

// env is one dashboard state: the time range, the interval and the
// variables' values.
type env struct {
	name     string
	from, to time.Time
	interval time.Duration
	vars     map[string]Value
}

func (e env) params() Params {
	return Params{From: e.from, To: e.to, Interval: e.interval, Vars: e.vars}
}

func vars(kv ...any) map[string]Value {
	m := map[string]Value{
		VarAnalysis: Text(analysis), VarRegistry: All(), VarModel: All(), VarSurface: All(),
		VarSource: All(), VarClass: All(), VarAgent: All(), VarSession: Text(""),
	}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1].(Value)
	}
	return m
}

var (
	day   = 24 * time.Hour
	day0  = env{"day 0 (minute tier)", base, base.Add(day - time.Minute), time.Hour, vars()}
	ten   = env{"ten days (hour tier)", base, base.Add(10 * day), 6 * time.Hour, vars()}
	picks = env{"ten days, single registry, gpt-5", base, base.Add(10 * day), 6 * time.Hour,
		vars(VarRegistry, Selected("single"), VarModel, Selected("gpt-5"))}
	streamRaw = env{"day 0, stream, raw_json and mcp", base, base.Add(day - time.Minute), 30 * time.Minute,
		vars(VarSource, Selected("stream"), VarSurface, Selected("raw_json", "mcp"))}
)

// run expands and runs q in e against the fixture, and returns its rows
// as text (cell).
func run(t *testing.T, q Query, e env) [][]string {
	t.Helper()
	res, err := Run(context.Background(), fixture(t), q, e.params())
	if err != nil {
		t.Fatalf("%s in %s: %v", q.ID, e.name, err)
	}
	out := make([][]string, len(res.Rows))
	for i, r := range res.Rows {
		for _, v := range r {
			out[i] = append(out[i], cell(v))
		}
	}
	return out
}

// cell is a value as text: numbers to 9 significant digits, times in
// RFC 3339, NULL as NULL.
func cell(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case float64:
		return fmt.Sprintf("%.9g", x)
	case int, int64, uint64:
		return fmt.Sprint(x)
	case time.Time:
		return x.UTC().Format(time.RFC3339)
	case []string:
		return strings.Join(x, " ")
	}
	return fmt.Sprint(v)
}

func check(t *testing.T, q Query, e env, want [][]string) {
	t.Helper()
	got := run(t, q, e)
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("%s in %s:\n got %q\nwant %q", q.ID, e.name, got, want)
	}
}

func byID(t *testing.T, id string) Query {
	t.Helper()
	for _, q := range allQueries() {
		if q.ID == id {
			return q
		}
	}
	t.Fatalf("no query %s", id)
	return Query{}
}

// --- the fleet oracle: the fixture's rows as delivered, counted in Go ---

func (e env) tier() time.Duration {
	if e.to.Sub(e.from) <= TierSeconds*time.Second {
		return time.Minute
	}
	return time.Hour
}

// selected reports whether a multi-value variable's value admits v.
func selected(val Value, v string) bool { return val.all || slices.Contains(val.values, v) }

// fleetRows are the delivered rows the fleet panels count in e: the
// analysis, the selections, and the buckets of the tier that start
// within the range rounded out.
func fleetRows(e env) []schema.Row {
	first, again := analyticsfixture.Rows()
	var out []schema.Row
	for _, r := range append(first, again...) {
		b := r.EmittedAt.Truncate(e.tier())
		if r.AnalysisID != analysis || b.Before(e.from.Truncate(e.tier())) || b.After(e.to) ||
			!selected(e.vars[VarRegistry], r.Registry) || !selected(e.vars[VarModel], r.Model) ||
			!selected(e.vars[VarSurface], r.Surface) || !selected(e.vars[VarSource], string(r.Source)) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func member(c schema.Class, group []schema.Class) bool { return slices.Contains(group, c) }

func ratio(n, d int) string {
	if d == 0 {
		return "NULL"
	}
	return cell(float64(n) / float64(d))
}

func oracleRates(rows []schema.Row) [][]string {
	var decided, hall, unknown, schemaRej, h3, coerc, near int
	for _, r := range rows {
		if r.Class != schema.Malformed {
			decided++
		}
		if member(r.Class, Hallucination) {
			hall++
		}
		if member(r.Class, UnknownTool) {
			unknown++
			if r.SuggestedTool != "" {
				near++
			}
		}
		if member(r.Class, SchemaReject) {
			schemaRej++
		}
		if r.Class == schema.H3 {
			h3++
			if r.Coercible {
				coerc++
			}
		}
	}
	return [][]string{{ratio(hall, decided), ratio(unknown, decided), ratio(schemaRej, decided), ratio(coerc, h3), ratio(near, unknown)}}
}

func oracleVerdicts(rows []schema.Row) [][]string {
	var allow, reject int
	for _, r := range rows {
		if r.Verdict == schema.Allow {
			allow++
		} else {
			reject++
		}
	}
	return [][]string{{fmt.Sprint(allow), fmt.Sprint(reject), fmt.Sprint(allow + reject)}}
}

func oracleClassMix(rows []schema.Row) [][]string {
	n := map[schema.Class]int{}
	for _, r := range rows {
		n[r.Class]++
	}
	var out [][]string
	for _, c := range schema.Classes {
		if n[c] > 0 {
			share := math.Round(100*float64(n[c])/float64(len(rows))*100) / 100
			out = append(out, []string{string(c), fmt.Sprint(n[c]), cell(share)})
		}
	}
	return out
}

// oracleSeries is a time series by label: per interval bucket (of the
// tier's bucket) and label value, value(rows).
func oracleSeries(e env, rows []schema.Row, label func(schema.Row) string, value func([]schema.Row) string) [][]string {
	type key struct {
		t     time.Time
		label string
	}
	groups := map[key][]schema.Row{}
	for _, r := range rows {
		t := r.EmittedAt.Truncate(e.tier()).Truncate(e.interval)
		k := key{t, label(r)}
		groups[k] = append(groups[k], r)
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(a.t.Compare(b.t), cmp.Compare(a.label, b.label)) })
	var out [][]string
	for _, k := range keys {
		out = append(out, []string{cell(k.t), k.label, value(groups[k])})
	}
	return out
}

func hallucinationRate(rows []schema.Row) string {
	var n, d int
	for _, r := range rows {
		if r.Class != schema.Malformed {
			d++
		}
		if member(r.Class, Hallucination) {
			n++
		}
	}
	return ratio(n, d)
}

func oracleRateTable(rows []schema.Row, dim func(schema.Row) string) [][]string {
	groups := map[string][]schema.Row{}
	for _, r := range rows {
		groups[dim(r)] = append(groups[dim(r)], r)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(len(groups[b]), len(groups[a])), cmp.Compare(a, b)) })
	var out [][]string
	for _, k := range keys {
		rates := oracleRates(groups[k])[0]
		out = append(out, []string{k, fmt.Sprint(len(groups[k])), rates[0], rates[1], rates[2]})
	}
	return out
}

// kinds are the fixture's fabricated names and what separates each from
// its nearest valid name.
var kinds = map[string]string{
	"functions.create_issue": "prefix", "Create_Issue": "case", "create_issues": "plural",
	"create-issue": "separator", "crate_issue": "typo", "wipe_disk": "invention",
	"nothere": "invention", "search": "invention", // M1 with no name near
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

func oracleFabricated(e env) [][]string {
	first, again := analyticsfixture.Rows()
	type key struct{ tool, nearest string }
	calls := map[key]int{}
	models := map[key]map[string]bool{}
	for _, r := range append(first, again...) {
		d := r.EmittedAt.Truncate(day)
		if r.AnalysisID != analysis || !member(r.Class, UnknownTool) || d.Before(e.from.Truncate(day)) || d.After(e.to.Truncate(day)) ||
			!selected(e.vars[VarRegistry], r.Registry) || !selected(e.vars[VarModel], r.Model) ||
			!selected(e.vars[VarSurface], r.Surface) || !selected(e.vars[VarSource], string(r.Source)) {
			continue
		}
		k := key{r.Tool, r.SuggestedTool}
		calls[k]++
		if models[k] == nil {
			models[k] = map[string]bool{}
		}
		models[k][r.Model] = true
	}
	keys := make([]key, 0, len(calls))
	for k := range calls {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(calls[b], calls[a]), cmp.Compare(a.tool, b.tool), cmp.Compare(a.nearest, b.nearest))
	})
	var out [][]string
	for _, k := range keys {
		kind, ok := kinds[k.tool]
		if !ok {
			kind = "unknown to the test: " + k.tool
		}
		dist := "NULL"
		if k.nearest != "" {
			dist = fmt.Sprint(levenshtein(strings.ToLower(k.tool), strings.ToLower(k.nearest)))
		}
		ms := make([]string, 0, len(models[k]))
		for m := range models[k] {
			ms = append(ms, m)
		}
		slices.Sort(ms)
		out = append(out, []string{k.tool, k.nearest, kind, dist, fmt.Sprint(calls[k]), strings.Join(ms, ", ")})
	}
	return out
}

// TestFleetQueries: every fleet panel's numbers, in four dashboard
// states (both tiers, selections of registry, model, source and
// surface), equal the fixture's rows as delivered counted in Go.
func TestFleetQueries(t *testing.T) {
	for _, e := range []env{day0, ten, picks, streamRaw} {
		t.Run(e.name, func(t *testing.T) {
			rows := fleetRows(e)
			if len(rows) == 0 {
				t.Fatal("the oracle selects nothing")
			}
			check(t, byID(t, "fleet.rates"), e, oracleRates(rows))
			check(t, byID(t, "fleet.verdicts"), e, oracleVerdicts(rows))
			check(t, byID(t, "fleet.class_mix"), e, oracleClassMix(rows))
			check(t, byID(t, "fleet.hallucination_by_model"), e,
				oracleSeries(e, rows, func(r schema.Row) string { return r.Model }, hallucinationRate))
			check(t, byID(t, "fleet.hallucination_by_surface"), e,
				oracleSeries(e, rows, func(r schema.Row) string { return r.Surface }, hallucinationRate))
			check(t, byID(t, "fleet.classes_over_time"), e,
				oracleSeries(e, rows, func(r schema.Row) string { return string(r.Class) },
					func(rs []schema.Row) string { return fmt.Sprint(len(rs)) }))
			check(t, byID(t, "fleet.top_fabricated"), e, oracleFabricated(e))
			check(t, byID(t, "fleet.by_model"), e, oracleRateTable(rows, func(r schema.Row) string { return r.Model }))
			check(t, byID(t, "fleet.by_surface"), e, oracleRateTable(rows, func(r schema.Row) string { return r.Surface }))
		})
	}
	// The span of the analysis: the hours of its first and last call,
	// half-open.
	check(t, Span(), day0, [][]string{{cell(base.Add(time.Hour)), cell(base.Add(5*day + 4*time.Hour))}})

	// Known values, so that the oracle itself is checked: day 0 holds 17
	// H1 calls of the bulk session and the incident's H1 delivered twice.
	got := run(t, byID(t, "fleet.verdicts"), day0)
	if want := [][]string{{"86", "58", "144"}}; !slices.EqualFunc(got, want, slices.Equal[[]string]) {
		t.Errorf("fleet.verdicts on day 0 = %q, want %q", got, want)
	}
}

// TestTiersAgree: the same data read through the minute tier (a range of
// two days) and the hour tier (a range just over two days) gives the same
// numbers.
func TestTiersAgree(t *testing.T) {
	short := env{"47h", base, base.Add(47 * time.Hour), time.Hour, vars()}
	long := env{"49h", base, base.Add(49 * time.Hour), time.Hour, vars()}
	if short.tier() == long.tier() {
		t.Fatal("both ranges read one tier")
	}
	for _, id := range []string{"fleet.rates", "fleet.verdicts", "fleet.class_mix", "fleet.hallucination_by_model"} {
		q := byID(t, id)
		a, b := run(t, q, short), run(t, q, long)
		if len(a) == 0 || !slices.EqualFunc(a, b, slices.Equal[[]string]) {
			t.Errorf("%s: minute tier %q, hour tier %q", id, a, b)
		}
	}
}

// TestNearMissKind: what separates an emitted name from its nearest valid
// one, classified by the engine with the panel's own SQL.
func TestNearMissKind(t *testing.T) {
	conn := fixture(t)
	for _, tc := range []struct{ tool, suggested, want string }{
		{"wipe_disk", "", "invention"},
		{"list_repos", "acme__list_repos", "server"},
		{"cloud__list_repos", "acme__list_repos", "server"},
		{"List_Repos", "acme__list_repos", "case"},
		{"Create_Issue", "create_issue", "case"},
		{"functions.create_issue", "create_issue", "prefix"},
		{"mcp__github__create_issue", "create_issue", "prefix"},
		{"create-issue", "create_issue", "separator"},
		{"create_issues", "create_issue", "plural"},
		{"crate_issue", "create_issue", "typo"},
	} {
		var got string
		q := "SELECT " + nearMissKind + " FROM (SELECT ? AS tool, ? AS suggested_tool)"
		if err := conn.QueryRow(context.Background(), q, tc.tool, tc.suggested).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%q (nearest %q): %s, want %s", tc.tool, tc.suggested, got, tc.want)
		}
	}
}

// TestReadOnly: every query of the dashboards and the report runs as a
// readonly = 1 user (the plugin's recommended Grafana user), in every
// dashboard state the tests use, and returns what it returns for the
// writer. That user can change no setting, not even in a query's
// SETTINGS clause: the test shows it refuses one.
func TestReadOnly(t *testing.T) {
	ro := analyticsfixture.ReadOnlyConn(t)
	ctx := context.Background()
	if _, err := RunSQL(ctx, ro, "SELECT count() FROM decisions FINAL SETTINGS do_not_merge_across_partitions_select_final = 1"); err == nil ||
		!strings.Contains(err.Error(), "readonly") {
		t.Fatalf("the read-only user changed a setting (err %v): the test would prove nothing", err)
	}
	for _, e := range []env{day0, ten, picks, streamRaw, mcpTen, incidentDay0} {
		for _, q := range allQueries() {
			if q.ID == "var.mcp_registry" || strings.HasPrefix(q.ID, "servers.") {
				// The servers dashboard's registry is one value.
				if e.vars[VarRegistry].all {
					continue
				}
			}
			sql, err := Expand(q.SQL, e.params())
			if err != nil {
				t.Fatalf("%s in %s: %v", q.ID, e.name, err)
			}
			got, err := RunSQL(ctx, ro, sql)
			if err != nil {
				t.Errorf("%s in %s, as the read-only user: %v", q.ID, e.name, err)
				continue
			}
			if want := run(t, q, e); len(got.Rows) != len(want) {
				t.Errorf("%s in %s: %d rows as the read-only user, %d as the writer", q.ID, e.name, len(got.Rows), len(want))
			}
		}
	}
}
