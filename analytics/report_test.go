package analytics

import (
	"fmt"
	"testing"
	"time"
)

// TestReportQueries: the report's sections over every registry at once,
// ranked by calls affected, with the totals of the whole ranking; on the
// fixture's ten days, worked out by hand (see TestServerQueries and
// TestIncidentQueries) or counted in Go.
func TestReportQueries(t *testing.T) {
	// Fabricated names: the fleet table's ranking, the top ReportTop, with
	// the count and calls of all.
	all := oracleFabricated(ten)
	calls := 0
	for _, r := range all {
		var n int
		fmt.Sscan(r[4], &n)
		calls += n
	}
	var want [][]string
	for _, r := range all[:min(ReportTop, len(all))] {
		want = append(want, append(r, fmt.Sprint(len(all)), fmt.Sprint(calls)))
	}
	check(t, byID(t, "report.fabricated"), ten, want)

	// After gitlab's trust fell, create_issue is shadowed; its 4 M2 calls
	// of day 0 still count. search had no M2 or M3 call.
	check(t, byID(t, "report.collisions"), ten, [][]string{
		{"mcp", "create_issue", "shadow (M3)", "github (trust 2), gitlab (trust 1)", "4", "0", "4", "2", "7"},
		{"mcp", "list_repos", "shadow (M3)", "github (trust 2), shadow (trust 1)", "0", "3", "3", "2", "7"},
	})
	check(t, byID(t, "report.collisions"), picks, nil) // registry single has no MCP server

	check(t, byID(t, "report.drift"), ten, [][]string{{"mcp", "github", "5", "4", "9", "create_issue", "1", "9"}})

	// Rejections per session: 59 in all (TestText's total).
	got := run(t, byID(t, "report.sessions"), ten)
	var brief [][]string
	for _, r := range got {
		brief = append(brief, []string{r[0], r[3], r[4], r[7], r[8]})
	}
	wantSessions := [][]string{
		{"s-bulk-gpt-5", "66", "26", "6", "59"},
		{"s-mcp", "31", "17", "6", "59"},
		{"s-bulk-claude", "38", "8", "6", "59"},
		{"s-incident", "7", "5", "6", "59"},
		{"s-bad", "2", "2", "6", "59"},
		{"s-day5", "21", "1", "6", "59"},
	}
	if fmt.Sprint(brief) != fmt.Sprint(wantSessions) {
		t.Errorf("report.sessions:\n got %q\nwant %q", brief, wantSessions)
	}

	check(t, byID(t, "report.versions"), ten, [][]string{
		{"mcp", "rv-m-2", ts(5*day + 3*time.Hour), "6", "2", "2", "27"},
		{"single", "rv-s-2", ts(5*day + 2*time.Hour), "21", "2", "2", "27"},
	})
}
