package analytics

import (
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/analyticsfixture"
	"github.com/toolaudit/toolaudit/schema"
)

// TestApprovalQueries: the approved definitions' panels and report
// sections on the fixture (analyticsfixture.Listings and Approvals),
// worked out by hand: what waits for a review at the end of day 0, of
// ten days and of twelve, and the verdicts of each range.
func TestApprovalQueries(t *testing.T) {
	ap := analyticsfixture.Approvals()
	issue1, search, issue2 := ap[0].Digest, ap[1].Digest, ap[4].Digest // github's, as approved
	plain := `{"type":"object","properties":{"q":{"type":"string"}}}`
	digest := func(tool string) string {
		d, err := schema.Digest(tool, []byte(plain))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	listRepos, deleteRepo := digest("list_repos"), digest("delete_repo")
	first := ts(-time.Hour) // the first listings
	addedIssue := "added: +/owner +/title required+/owner required+/title"
	mcpTwelve := env{"mcp, twelve days", base, base.Add(12 * day), 6 * time.Hour, vars(VarRegistry, Text("mcp"))}

	// Day 0: github's create_issue and search approved, shadow's search
	// rejected; the other definitions were never approved (new).
	day0Pending := [][]string{
		{first, "mcp", "github", "list_repos", "new", "added: +/q", listRepos, ""},
		{first, "mcp", "gitlab", "create_issue", "new", addedIssue, issue1, ""},
		{first, "mcp", "gitlab", "search", "new", "added: +/q", search, ""},
		{first, "mcp", "shadow", "delete_repo", "new", "added: +/q", deleteRepo, ""},
		{first, "mcp", "shadow", "list_repos", "new", "added: +/q", listRepos, ""},
	}
	// Ten days: github's create_issue changed on day 5 (unapproved: the
	// old one is approved), its search revoked (new again), shadow's
	// delete_repo removed.
	tenPending := [][]string{
		{ts(5 * day), "mcp", "github", "create_issue", "unapproved", "changed: +/labels", issue2, issue1},
		{first, "mcp", "github", "list_repos", "new", "added: +/q", listRepos, ""},
		{first, "mcp", "github", "search", "new", "added: +/q", search, ""},
		{first, "mcp", "gitlab", "create_issue", "new", addedIssue, issue1, ""},
		{first, "mcp", "gitlab", "search", "new", "added: +/q", search, ""},
		{first, "mcp", "shadow", "list_repos", "new", "added: +/q", listRepos, ""},
	}
	// Twelve days: the changed create_issue approved on day 10.
	twelvePending := append([][]string(nil), tenPending[1:]...)
	check(t, byID(t, "approvals.pending"), mcpDay0, day0Pending)
	check(t, byID(t, "approvals.pending"), mcpTen, tenPending)
	check(t, byID(t, "approvals.pending"), mcpTwelve, twelvePending)
	check(t, byID(t, "approvals.pending"), env{"single", base, base.Add(10 * day), time.Hour, vars(VarRegistry, Text("single"))}, nil)

	reject := []string{ts(2 * time.Hour), "mcp", "shadow", "search", "reject", "bo", "shadows github's search", "added: +/q", search, "3"}
	revoke := []string{ts(5*day + 3*time.Hour), "mcp", "github", "search", "revoke", "cy", "to review again", "added: +/q", search, "4"}
	approve := []string{ts(10*day + time.Hour), "mcp", "github", "create_issue", "approve", "cy", "labels are harmless", "changed: +/labels", issue2, "5"}
	// ana's approvals came before day 0: in no range.
	check(t, byID(t, "approvals.recent"), mcpDay0, [][]string{reject})
	check(t, byID(t, "approvals.recent"), mcpTen, [][]string{revoke, reject})
	check(t, byID(t, "approvals.recent"), mcpTwelve, [][]string{approve, revoke, reject})

	// The report's: the same rows, the first ReportTop, with total_rows.
	withTotal := func(rows [][]string) [][]string {
		var out [][]string
		for _, r := range rows[:min(len(rows), ReportTop)] {
			out = append(out, append(append([]string(nil), r...), cell(uint64(len(rows)))))
		}
		return out
	}
	// report.pending adds the approval events up to the range's end:
	// ana's two approvals, bo's rejection and cy's revocation.
	var pendingReviews [][]string
	for _, r := range withTotal(tenPending) {
		pendingReviews = append(pendingReviews, append(r, "4"))
	}
	check(t, byID(t, "report.pending"), mcpTen, pendingReviews)
	check(t, byID(t, "report.approvals"), mcpTwelve, withTotal([][]string{approve, revoke, reject}))
}
