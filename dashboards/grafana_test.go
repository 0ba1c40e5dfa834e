package dashboards

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"sigs.k8s.io/yaml"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/analyticsfixture"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) {
	leakcheck.Main(m, leakcheck.Run(chenginetest.Main), leakcheck.After(analyticsfixture.Close))
}

// loaded is a committed dashboard as Grafana reads it: panels with their
// ClickHouse targets, variables in order.
type loaded struct {
	file   string
	Inputs []struct {
		Name, Type, PluginID string
	} `json:"__inputs"`
	SchemaVersion int
	Panels        []struct {
		Title, Type string
		Datasource  struct{ UID string }
		Targets     []struct {
			Datasource struct{ Type, UID string }
			RawSQL     string
			Format     int
			Expr       string
		}
		Options struct {
			Legend struct {
				ShowLegend  bool
				DisplayMode string
			}
			Tooltip struct{ Mode string }
		}
	}
	Templating struct {
		List []struct {
			Name, Type string
			Query      any
			Multi      bool
			Current    *struct{ Value any }
		}
	}
}

func load(t *testing.T, file string) loaded {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	d := loaded{file: file}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return d
}

// TestLegends: every chart (time series, bar chart) shows a legend and a
// tooltip with every series: per-model, per-class and per-server lines
// must be told apart.
func TestLegends(t *testing.T) {
	charts := 0
	for _, f := range committed(t) {
		for _, p := range load(t, f).Panels {
			if p.Type != "timeseries" && p.Type != "barchart" {
				continue
			}
			charts++
			if !p.Options.Legend.ShowLegend || p.Options.Legend.DisplayMode != "list" {
				t.Errorf("%s: %q has no legend (%+v)", f, p.Title, p.Options.Legend)
			}
			if p.Options.Tooltip.Mode != "multi" {
				t.Errorf("%s: %q: tooltip mode %q, want multi (every series at the cursor)", f, p.Title, p.Options.Tooltip.Mode)
			}
		}
	}
	if charts < 20 {
		t.Errorf("%d charts: the test reads the JSON wrong", charts)
	}
}

// TestImport: the import/ dashboards name their datasources only through
// the datasource variables, whose value is an __inputs entry: Grafana's
// import page asks for each and substitutes it, whatever uids the
// target Grafana's datasources have. json/ names the provisioned ones.
func TestImport(t *testing.T) {
	dsRef := regexp.MustCompile(`\$\{(DS_[A-Z]+)\}`)
	for _, f := range importFiles(t) {
		b, _ := os.ReadFile(f)
		d := load(t, f)
		inputs := map[string]string{}
		for _, in := range d.Inputs {
			if in.Type != "datasource" {
				t.Errorf("%s: input %s of type %s", f, in.Name, in.Type)
			}
			inputs[in.Name] = in.PluginID
		}
		if len(inputs) == 0 {
			t.Errorf("%s: no __inputs", f)
		}
		used := map[string]bool{}
		for _, m := range dsRef.FindAllStringSubmatch(string(b), -1) {
			if m[1] == "DS_" {
				continue
			}
			used[m[1]] = true
			if inputs[m[1]] == "" {
				t.Errorf("%s: ${%s} is not an input", f, m[1])
			}
		}
		for name := range inputs {
			if !used[name] {
				t.Errorf("%s: input %s is used nowhere: the import page would ask for nothing", f, name)
			}
		}
		// No datasource uid but the variables'.
		if m := regexp.MustCompile(`"uid": "(toolaudit-(clickhouse|prometheus))"`).FindString(string(b)); m != "" {
			t.Errorf("%s names a provisioned uid (%s): an import elsewhere breaks", f, m)
		}
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				if tg.Datasource.UID != "" && !strings.HasPrefix(tg.Datasource.UID, "${ds_") {
					t.Errorf("%s: %q: target datasource %q is not a datasource variable", f, p.Title, tg.Datasource.UID)
				}
			}
		}
	}
}

// pluginRelease is one release of the ClickHouse plugin
// (testdata/plugin-macros.txt).
type pluginRelease struct {
	version, grafana string
	macros           []string
}

func pluginReleases(t *testing.T) []pluginRelease {
	t.Helper()
	f, err := os.Open("testdata/plugin-macros.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []pluginRelease
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 2 || strings.HasPrefix(fs[0], "#") {
			continue
		}
		out = append(out, pluginRelease{fs[0], strings.TrimPrefix(fs[1], ">="), fs[2:]})
	}
	if len(out) < 40 {
		t.Fatalf("%d plugin releases read", len(out))
	}
	return out
}

// semver compares a.b.c versions (a suffix such as -0 ignored).
func semver(a, b string) int {
	pa, pb := strings.Split(strings.SplitN(a, "-", 2)[0], "."), strings.Split(strings.SplitN(b, "-", 2)[0], ".")
	for i := range 3 {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return 0
}

var macroRef = regexp.MustCompile(`\$__(\w+)`)

// TestVersions: MinPlugin is the first plugin release whose macro list
// holds every macro the dashboards' SQL uses (the one before lacks one),
// and every later release holds them all; deploy/compose pins a plugin
// release at or after it, whose own Grafana floor the pinned Grafana
// meets, and a Grafana at or after MinGrafana; the dashboards' schema
// version is SchemaVersion.
func TestVersions(t *testing.T) {
	used := map[string]bool{}
	for _, f := range committed(t) {
		ts, _ := targets(t, f)
		for _, tg := range ts {
			for _, m := range macroRef.FindAllStringSubmatch(tg.sql, -1) {
				// The frontend's, and Grafana's own.
				if m[1] != "conditionalAll" && !strings.HasPrefix(m[1], "all") {
					used[m[1]] = true
				}
			}
		}
		if d := load(t, f); d.SchemaVersion != SchemaVersion {
			t.Errorf("%s: schemaVersion %d, want %d (Grafana %s's)", f, d.SchemaVersion, SchemaVersion, MinGrafana)
		}
	}
	if !used["fromTime_ms"] || !used["toTime_ms"] {
		t.Fatalf("macros used %v: the test reads the SQL wrong", used)
	}
	lacks := func(r pluginRelease) []string {
		var missing []string
		for m := range used {
			if !slices.Contains(r.macros, m) {
				missing = append(missing, m)
			}
		}
		slices.Sort(missing)
		return missing
	}
	releases := pluginReleases(t)
	byVersion := map[string]pluginRelease{}
	first := ""
	for _, r := range releases {
		byVersion[r.version] = r
		missing := lacks(r)
		switch {
		case len(missing) == 0 && first == "":
			first = r.version
		case len(missing) > 0 && first != "":
			t.Errorf("plugin %s lacks %v, which %s had", r.version, missing, first)
		}
	}
	if first != MinPlugin {
		t.Errorf("the first plugin release with every macro used is %s; MinPlugin says %s", first, MinPlugin)
	}
	if semver(byVersion[MinPlugin].grafana, MinGrafana) > 0 {
		t.Errorf("plugin %s needs Grafana %s, above MinGrafana %s", MinPlugin, byVersion[MinPlugin].grafana, MinGrafana)
	}

	// deploy/compose's pins.
	var compose struct {
		Services map[string]struct {
			Image       string
			Environment map[string]string
		}
	}
	b, err := os.ReadFile("../deploy/compose/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &compose); err != nil {
		t.Fatal(err)
	}
	g := compose.Services["grafana"]
	grafana, ok := strings.CutPrefix(g.Image, "grafana/grafana:")
	if !ok || semver(grafana, MinGrafana) < 0 {
		t.Errorf("compose's Grafana %q: want grafana/grafana:X.Y.Z at or after %s", g.Image, MinGrafana)
	}
	plugin, ok := strings.CutPrefix(g.Environment["GF_PLUGINS_PREINSTALL"], clickHouseType+"@")
	r, known := byVersion[plugin]
	switch {
	case !ok:
		t.Errorf("compose installs %q: want %s@VERSION, pinned", g.Environment["GF_PLUGINS_PREINSTALL"], clickHouseType)
	case !known:
		t.Errorf("compose pins plugin %s, not a release testdata/plugin-macros.txt lists", plugin)
	case len(lacks(r)) > 0:
		t.Errorf("compose pins plugin %s, which lacks %v", plugin, lacks(r))
	case semver(grafana, r.grafana) < 0:
		t.Errorf("compose pins plugin %s, which needs Grafana %s; compose runs %s", plugin, r.grafana, grafana)
	}
}

// variable is a dashboard variable as TestDefaults fills it.
type variable struct {
	name, typ string
	sql       string
	multi     bool
	current   string // "" when the dashboard saves none
}

// TestDefaults: each ClickHouse dashboard as Grafana opens it, over the
// fixture's ten days and over its first day: each variable at its saved
// value (All) or, with none, at the first option its query lists (run
// here), and every panel's query run as the read-only user
// (readonly = 1) the plugin recommends. No panel opens empty that has
// data in the range: an empty one must be empty with the other options
// of the single-value variables too (analysis, the servers' registry,
// the session), but for the cases listed, each shown to have data in
// another state.
func TestDefaults(t *testing.T) {
	ro := analyticsfixture.ReadOnlyConn(t)
	base := analyticsfixture.Base
	for _, rng := range []struct {
		name     string
		from, to time.Time
	}{
		{"ten days", base, base.Add(10 * 24 * time.Hour)},
		{"day 0", base, base.Add(24 * time.Hour)},
	} {
		for _, f := range committed(t) {
			if strings.Contains(f, "pipeline") {
				continue
			}
			t.Run(rng.name+"/"+f, func(t *testing.T) {
				d := load(t, f)
				states := openStates(t, ro, d, rng.from, rng.to)
				def := states[0]
				for _, p := range d.Panels {
					for _, tg := range p.Targets {
						if tg.RawSQL == "" {
							continue
						}
						n := runAs(t, ro, tg.RawSQL, def)
						if n > 0 {
							continue
						}
						other := -1
						for i, s := range states[1:] {
							if runAs(t, ro, tg.RawSQL, s) > 0 {
								other = i + 1
								break
							}
						}
						if other >= 0 {
							t.Errorf("%q opens empty, though %v has data", p.Title, describe(states[other]))
						} else if !emptyAllowed(rng.name, p.Title) {
							t.Errorf("%q is empty in every state of the range", p.Title)
						}
					}
				}
			})
		}
	}
}

// emptyAllowed are the panels the fixture leaves empty in a range.
func emptyAllowed(rng, title string) bool {
	// The fixture's registry changes are on day 5 only.
	return rng == "day 0" && strings.HasPrefix(title, "Registry changes in the range")
}

func describe(p analytics.Params) string {
	var parts []string
	for k, v := range p.Vars {
		parts = append(parts, fmt.Sprintf("%s=%v", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// openStates returns the dashboard's state as opened (first), then the
// states with each other option of its single-value query variables
// (one at a time).
func openStates(t *testing.T, ro driver.Conn, d loaded, from, to time.Time) []analytics.Params {
	t.Helper()
	var vars []variable
	for _, v := range d.Templating.List {
		x := variable{name: v.Name, typ: v.Type, multi: v.Multi}
		if s, ok := v.Query.(string); ok {
			x.sql = s
		}
		if v.Current != nil {
			if s, ok := v.Current.Value.(string); ok {
				x.current = s
			}
		}
		vars = append(vars, x)
	}
	p := analytics.Params{From: from, To: to, Interval: time.Hour, Vars: map[string]analytics.Value{}}
	// Grafana resolves the variables in order: each query sees the ones
	// before it.
	options := map[string][]string{}
	for _, v := range vars {
		switch {
		case v.typ == "datasource":
		case v.typ == "custom" || v.current == "$__all":
			p.Vars[v.name] = analytics.All()
		case v.typ == "textbox": // its saved text (the trace link's URL: no query reads it)
			p.Vars[v.name] = analytics.Text(v.current)
		case v.typ == "query":
			opts := optionsOf(t, ro, v, p)
			options[v.name] = opts
			if len(opts) == 0 {
				p.Vars[v.name] = analytics.Text("")
			} else {
				p.Vars[v.name] = analytics.Text(opts[0])
			}
		default:
			t.Fatalf("%s: variable %s of type %s: the test does not know it", d.file, v.name, v.typ)
		}
	}
	states := []analytics.Params{p}
	for name, opts := range options {
		for _, o := range opts[min(1, len(opts)):] {
			s := p
			s.Vars = map[string]analytics.Value{}
			for k, v := range p.Vars {
				s.Vars[k] = v
			}
			s.Vars[name] = analytics.Text(o)
			states = append(states, s)
		}
	}
	return states
}

func optionsOf(t *testing.T, ro driver.Conn, v variable, p analytics.Params) []string {
	t.Helper()
	sql, err := analytics.Expand(v.sql, p)
	if err != nil {
		t.Fatalf("variable %s: %v", v.name, err)
	}
	res, err := analytics.RunSQL(context.Background(), ro, sql)
	if err != nil {
		t.Fatalf("variable %s as the read-only user: %v", v.name, err)
	}
	var out []string
	for _, r := range res.Rows {
		s, _ := r[0].(string)
		out = append(out, s)
	}
	return out
}

func runAs(t *testing.T, ro driver.Conn, rawSQL string, p analytics.Params) int {
	t.Helper()
	sql, err := analytics.Expand(rawSQL, p)
	if err != nil {
		t.Fatalf("%v\n%s", err, rawSQL)
	}
	res, err := analytics.RunSQL(context.Background(), ro, sql)
	if err != nil {
		t.Fatalf("as the read-only user: %v\n%s", err, sql)
	}
	return len(res.Rows)
}

// TestGrafanaUser: deploy/compose's SQL for Grafana's ClickHouse user
// parses on the engine and grants what the read-only user of these tests
// has (internal/testkit/analyticsfixture, the same name): readonly = 1 but for
// max_execution_time, SELECT on the database, nothing more. (The
// embedded engine keeps no users created by SQL, so the tests' user is
// defined in its configuration instead.)
func TestGrafanaUser(t *testing.T) {
	b, err := os.ReadFile("../deploy/compose/clickhouse-initdb/grafana-user.sql.in")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			lines = append(lines, l)
		}
	}
	sql := strings.NewReplacer("{database}", "toolaudit", "{password}", "abc123").Replace(strings.Join(lines, "\n"))
	var stmts []string
	for _, s := range strings.Split(sql, ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	want := []string{
		"CREATE DATABASE IF NOT EXISTS toolaudit",
		"CREATE SETTINGS PROFILE IF NOT EXISTS grafana_reader SETTINGS readonly = 1, max_execution_time CHANGEABLE_IN_READONLY",
		"CREATE USER IF NOT EXISTS " + analyticsfixture.ReadOnlyUser + " IDENTIFIED WITH sha256_password BY 'abc123' SETTINGS PROFILE 'grafana_reader'",
		"GRANT SELECT ON toolaudit.* TO " + analyticsfixture.ReadOnlyUser,
	}
	if !slices.Equal(stmts, want) {
		t.Errorf("grafana-user.sql.in:\n%q\nwant\n%q", stmts, want)
	}
	conn := analyticsfixture.Conn(t)
	for _, s := range stmts {
		if _, err := analytics.RunSQL(context.Background(), conn, "EXPLAIN AST "+s); err != nil {
			t.Errorf("the engine does not parse %q: %v", s, err)
		}
	}
	sh, err := os.ReadFile("../deploy/compose/clickhouse-initdb/grafana-user.sh")
	if err != nil || !strings.Contains(string(sh), "grafana-user.sql.in") || !strings.Contains(string(sh), "/run/secrets/grafana_clickhouse_password") {
		t.Errorf("grafana-user.sh (%v) does not run grafana-user.sql.in with the secret's password", err)
	}
}
