package analytics

import (
	"context"
	"slices"
	"testing"
	"time"
)

// The MCP servers dashboard in two states: day 0 (before the listing
// changes of day 5) and ten days (after them), registry mcp.
var (
	mcpDay0 = env{"mcp, day 0", base, base.Add(day - time.Minute), time.Hour, vars(VarRegistry, Text("mcp"))}
	mcpTen  = env{"mcp, ten days", base, base.Add(10 * day), 6 * time.Hour, vars(VarRegistry, Text("mcp"))}
)

func ts(d time.Duration) string { return cell(base.Add(d)) }

// TestServerQueries: the MCP servers panels on the fixture, whose
// numbers are worked out by hand in the comments.
func TestServerQueries(t *testing.T) {
	// Providers: github (2) create_issue, search, list_repos; gitlab (2,
	// then 1 from day 5 + 1h) create_issue, search; shadow (1) search,
	// list_repos (and delete_repo until day 5).
	shared := [][]string{
		{"github", "gitlab", "2"}, {"github", "shadow", "2"}, {"gitlab", "github", "2"},
		{"gitlab", "shadow", "1"}, {"shadow", "github", "2"}, {"shadow", "gitlab", "1"},
	}
	check(t, byID(t, "servers.shared_names"), mcpDay0, shared)
	check(t, byID(t, "servers.shared_names"), mcpTen, shared)

	// Calls per name on day 0: create_issue 10 OK pinned to github, 4 M2,
	// 5 M4 and 4 drifted OK on github (23); list_repos 3 M3; search 1 M1
	// (pin ghost) and 2 M5 on gitlab. Day 5 adds 6 OK on gitlab search.
	check(t, byID(t, "servers.collisions"), mcpDay0, [][]string{
		{"create_issue", "tie (M2)", "github (trust 2), gitlab (trust 2)", "23", "4", "0", "(unresolved): 4, github: 19"},
		{"list_repos", "shadow (M3)", "github (trust 2), shadow (trust 1)", "3", "0", "3", "(unresolved): 3"},
		{"search", "tie (M2)", "github (trust 2), gitlab (trust 2), shadow (trust 1)", "3", "0", "0", "(unresolved): 1, gitlab: 2"},
	})
	// After gitlab's trust fell to 1, github alone has the top trust.
	check(t, byID(t, "servers.collisions"), mcpTen, [][]string{
		{"create_issue", "shadow (M3)", "github (trust 2), gitlab (trust 1)", "23", "4", "0", "(unresolved): 4, github: 19"},
		{"search", "shadow (M3)", "github (trust 2), gitlab (trust 1), shadow (trust 1)", "9", "0", "0", "(unresolved): 1, gitlab: 8"},
		{"list_repos", "shadow (M3)", "github (trust 2), shadow (trust 1)", "3", "0", "3", "(unresolved): 3"},
	})

	// M2 on create_issue counts for github and gitlab, M3 on list_repos
	// for github and shadow; decisions are those resolved to or pinned at
	// the server.
	classes := func(gitlabDecisions string) [][]string {
		return [][]string{
			{"github", "0", "4", "3", "5", "0", "19"},
			{"gitlab", "0", "4", "0", "0", "2", gitlabDecisions},
			{"shadow", "0", "0", "3", "0", "0", "0"},
			{"(none)", "2", "0", "0", "0", "0", "2"},
			{"ghost", "1", "0", "0", "0", "0", "1"},
		}
	}
	check(t, byID(t, "servers.mcp_classes"), mcpDay0, classes("2"))
	check(t, byID(t, "servers.mcp_classes"), mcpTen, classes("8"))

	check(t, byID(t, "servers.stale_by_server"), mcpTen, [][]string{{ts(0), "github", "5"}})
	check(t, byID(t, "servers.drift_by_server"), mcpTen, [][]string{{ts(0), "github", "4"}})

	check(t, byID(t, "servers.stale_tools"), mcpDay0, [][]string{
		{"github", "create_issue", "5", "4", ts(-time.Hour), "added: +/owner +/title required+/owner required+/title", "0"},
	})
	check(t, byID(t, "servers.stale_tools"), mcpTen, [][]string{
		{"github", "create_issue", "5", "4", ts(5 * day), "changed: +/labels", "1"},
	})

	check(t, byID(t, "servers.version_in_force"), mcpDay0, [][]string{{"mcp", "rv-m-1", ts(6 * time.Hour), "31", "1"}})
	check(t, byID(t, "servers.version_in_force"), mcpTen, [][]string{{"mcp", "rv-m-2", ts(5*day + 3*time.Hour), "6", "2"}})
	check(t, byID(t, "servers.version_in_force"), env{"all registries", base, base.Add(10 * day), time.Hour, vars()}, [][]string{
		{"mcp", "rv-m-2", ts(5*day + 3*time.Hour), "6", "2"},
		{"single", "rv-s-2", ts(5*day + 2*time.Hour), "21", "2"},
	})

	// Registry changes: none on day 0 (the first listings came an hour
	// before); day 5 changes github's create_issue and drops shadow's
	// delete_repo, and an hour later gitlab's trust falls.
	changes := byID(t, "changes.in_range")
	check(t, changes, mcpDay0, nil)
	got := run(t, changes, mcpTen)
	var brief [][]string
	for _, r := range got {
		brief = append(brief, r[:8])
	}
	// Newest first: where the limit cuts, it cuts the oldest.
	want := [][]string{
		{ts(5*day + time.Hour), "mcp", "gitlab", "create_issue", "trust", "trust 2 -> 1", "2", "1"},
		{ts(5*day + time.Hour), "mcp", "gitlab", "search", "trust", "trust 2 -> 1", "2", "1"},
		{ts(5 * day), "mcp", "github", "create_issue", "changed", "changed: +/labels", "2", "2"},
		{ts(5 * day), "mcp", "shadow", "delete_repo", "removed", "removed", "1", "1"},
	}
	if !slices.EqualFunc(brief, want, slices.Equal[[]string]) {
		t.Errorf("changes.in_range:\n got %q\nwant %q", brief, want)
	}
	check(t, byID(t, "changes.annotations"), mcpTen, [][]string{
		{ts(5*day + time.Hour), "mcp/gitlab: trust create_issue, trust search", "mcp,gitlab"},
		{ts(5 * day), "mcp/github: changed create_issue", "mcp,github"},
		{ts(5 * day), "mcp/shadow: removed delete_repo", "mcp,shadow"},
	})
}

var incidentDay0 = env{"incident, day 0", base, base.Add(day - time.Minute), time.Hour, vars(VarSession, Text("s-incident"))}

// TestIncidentQueries: the incident drill-down on the fixture's session
// s-incident: its decisions read exactly (FINAL: the redelivered H1 once,
// the API's and the stream's decision of one call both), the call whose
// gate and stream decisions differ, and the sessions to pick from.
func TestIncidentQueries(t *testing.T) {
	got := run(t, byID(t, "incident.session_decisions"), incidentDay0)
	var brief [][]string
	for _, r := range got {
		brief = append(brief, []string{r[0], r[1], r[2], r[3], r[6]}) // time, source, action, event, class
	}
	at := func(s int) string { return ts(3*time.Hour + time.Duration(s)*time.Second) }
	want := [][]string{
		{at(10), "stream", "", "c-i1", "OK"},
		{at(20), "stream", "", "c-i2", "H1"},
		{at(30), "api", "enforced", "c-i3", "OK"},
		{at(30), "stream", "", "c-i3", "H2"},
		{at(40), "gateway", "observed", "c-i4", "H3"},
		{at(40), "stream", "", "c-i4", "H3"},
	}
	if !slices.EqualFunc(brief, want, slices.Equal[[]string]) {
		t.Errorf("incident.session_decisions:\n got %q\nwant %q", brief, want)
	}
	// History written before migration 0011 has no call keys in
	// sessions_by_hour: its calls are found through session_calls. Here
	// the session's keys move there; the decisions found stay the same
	// (and so do later runs of this test).
	ctx := context.Background()
	for _, stmt := range []string{
		"INSERT INTO session_calls SELECT analysis_id, session_id, emitted_at, call_key, decided_at FROM decisions WHERE session_id = 's-incident'",
		"ALTER TABLE sessions_by_hour UPDATE call_keys = [] WHERE session_id = 's-incident' SETTINGS mutations_sync = 2",
	} {
		if err := fixture(t).Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	var before []string
	for _, r := range run(t, byID(t, "incident.session_decisions"), incidentDay0) {
		before = append(before, r[3]+" "+r[1])
	}
	if want := []string{"c-i1 stream", "c-i2 stream", "c-i3 api", "c-i3 stream", "c-i4 gateway", "c-i4 stream"}; !slices.Equal(before, want) {
		t.Errorf("incident.session_decisions through session_calls: %q, want %q", before, want)
	}
	// The class filter narrows the session's decisions.
	h3 := incidentDay0
	h3.vars = vars(VarSession, Text("s-incident"), VarClass, Selected("H3"))
	if got := run(t, byID(t, "incident.session_decisions"), h3); len(got) != 2 {
		t.Errorf("class H3: %d rows, want 2", len(got))
	}

	toctou := [][]string{{"c-i3", at(30), "s-incident", "agent-7", "create_issue", "api: OK (enforced), stream: H2", "rv-s-1"}}
	check(t, byID(t, "incident.toctou"), incidentDay0, toctou)
	check(t, byID(t, "incident.toctou_session"), incidentDay0, toctou)
	anySession := incidentDay0
	anySession.vars = vars()
	check(t, byID(t, "incident.toctou"), anySession, toctou)
	// The dashboard's panel shows every session's; the report's
	// --session narrows.
	other := incidentDay0
	other.vars = vars(VarSession, Text("s-bulk-gpt-5"))
	check(t, byID(t, "incident.toctou"), other, toctou)
	check(t, byID(t, "incident.toctou_session"), other, nil)
	otherAgent := incidentDay0
	otherAgent.vars = vars(VarAgent, Selected("agent-1"))
	check(t, byID(t, "incident.toctou"), otherAgent, nil)

	// Sessions as delivered: s-incident has 7 rows (its H1 twice, two
	// calls decided twice), 5 of them rejections.
	sessions := run(t, byID(t, "incident.sessions"), anySession)
	var names [][]string
	for _, r := range sessions {
		names = append(names, []string{r[0], r[1], r[2], r[3], r[4], r[7]})
	}
	wantSessions := [][]string{
		{"s-bulk-gpt-5", "agent-1", "gpt-5", "66", "26", "H1 H3 H5 OK"},
		{"s-mcp", "agent-2", "gpt-5", "31", "17", "M1 M2 M3 M4 M5 OK"},
		{"s-bulk-claude", "agent-1", "claude", "38", "8", "H2 H4 OK"},
		{"s-incident", "agent-7", "gpt-5", "7", "5", "H1 H2 H3 OK"},
		{"s-bad", "agent-1", "", "2", "2", "MALFORMED"},
	}
	if !slices.EqualFunc(names, wantSessions, slices.Equal[[]string]) {
		t.Errorf("incident.sessions:\n got %q\nwant %q", names, wantSessions)
	}
	withH2 := anySession
	withH2.vars = vars(VarClass, Selected("H2"))
	if got := run(t, byID(t, "incident.sessions"), withH2); len(got) != 2 || got[0][0] != "s-bulk-claude" || got[1][0] != "s-incident" {
		t.Errorf("sessions with H2: %q", got)
	}
}

// TestVariableQueries: the options each variable offers, those with
// decisions in the range only, busiest first (Grafana selects the first
// when a dashboard opens with no saved value).
func TestVariableQueries(t *testing.T) {
	e := env{"ten days", base, base.Add(10 * day), time.Hour, vars()}
	options := func(id string, e env) []string {
		var got []string
		for _, r := range run(t, byID(t, id), e) {
			got = append(got, r[0])
		}
		return got
	}
	for id, want := range map[string][]string{
		"var." + VarAnalysis: {"a1", "other"}, // latest first; "live" would lead
		// single 134 decisions, mcp 37.
		"var." + VarRegistry: {"single", "mcp"},
		// mcp has the MCP calls.
		"var.mcp_registry":  {"mcp", "single"},
		"var." + VarModel:   {"gpt-5", "claude"},
		"var." + VarSurface: {"raw_json", "schema_enforced", "mcp"},
		"var." + VarSource:  {"stream", "api", "gateway"},
		"var." + VarAgent:   {"agent-1", "agent-2", "agent-7"},
		// By rejections: 26, 17, 8, 5, 2, 1, 0.
		"var." + VarSession: {"s-bulk-gpt-5", "s-mcp", "s-bulk-claude", "s-incident", "s-bad", "s-day5", "s-mcp5"},
	} {
		if got := options(id, e); !slices.Equal(got, want) {
			t.Errorf("variable %s: %q, want %q", id, got, want)
		}
	}
	// Options follow the other variables: the mcp registry has one model.
	if got := options("var."+VarSurface, env{"mcp", base, base.Add(10 * day), time.Hour, vars(VarRegistry, Selected("mcp"))}); !slices.Equal(got, []string{"mcp"}) {
		t.Errorf("surfaces of registry mcp: %q", got)
	}
	// And the time range: day 5 alone has neither claude nor s-incident.
	day5 := env{"day 5", base.Add(5 * day), base.Add(6 * day), time.Hour, vars()}
	if got := options("var."+VarModel, day5); !slices.Equal(got, []string{"gpt-5"}) {
		t.Errorf("models of day 5: %q", got)
	}
	if got := options("var."+VarSession, day5); !slices.Equal(got, []string{"s-day5", "s-mcp5"}) {
		t.Errorf("sessions of day 5: %q", got)
	}
}

// TestMalformed: the unreadable calls show whatever registry, model or
// session the view is narrowed to: they have none that can be trusted.
func TestMalformed(t *testing.T) {
	want := [][]string{{ts(5 * time.Hour), "stream", "2"}}
	for _, e := range []env{day0,
		{"day 0, registry mcp", base, base.Add(day - time.Minute), time.Hour, vars(VarRegistry, Selected("mcp"), VarModel, Selected("claude"), VarSession, Text("s-incident"))},
	} {
		check(t, byID(t, "malformed.over_time"), e, want)
	}
	check(t, byID(t, "malformed.over_time"), streamRaw, want)
	check(t, byID(t, "malformed.over_time"), env{"api only", base, base.Add(day - time.Minute), time.Hour, vars(VarSource, Selected("api"))}, nil)
}

// TestEveryQueryChecked: a query added to the dashboards without a check
// here fails.
func TestEveryQueryChecked(t *testing.T) {
	checked := []string{
		"fleet.rates", "fleet.verdicts", "fleet.class_mix", "fleet.hallucination_by_model",
		"fleet.hallucination_by_surface", "fleet.classes_over_time", "fleet.top_fabricated",
		"fleet.by_model", "fleet.by_surface", "analysis.span",
		"servers.shared_names", "servers.collisions", "servers.mcp_classes", "servers.stale_by_server",
		"servers.drift_by_server", "servers.stale_tools", "servers.version_in_force",
		"changes.in_range", "changes.annotations",
		"incident.sessions", "incident.session_decisions", "incident.toctou", "incident.toctou_session",
		"var.analysis", "var.registry", "var.model", "var.surface", "var.source", "var.agent",
		"var.session", "var.mcp_registry", "malformed.over_time",
		"report.fabricated", "report.collisions", "report.drift", "report.sessions", "report.versions",
		"approvals.pending", "approvals.recent", "report.pending", "report.approvals",
	}
	for _, q := range allQueries() {
		if !slices.Contains(checked, q.ID) {
			t.Errorf("query %s has no check in this package's tests", q.ID)
		}
	}
}
