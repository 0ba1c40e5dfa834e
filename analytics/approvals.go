package analytics

import "strconv"

// The approved definitions (package approvals): what waits for a review
// and what was reviewed, from the registry history (registry_changes)
// and the history of the approvals topic (approval_events, written by
// the resolverd run with --registry-history).

// pendingSQL lists the definitions current at the end of the range that
// no verdict up to then approved or rejected: a tool's last change up to
// the range's end (unless a removal) gives its current digest; the
// definition's last event in topic order (argMax by baseline_version,
// as the baseline applies them) its verdict, revoked or none being
// pending. new: no definition of the tool is approved; unapproved:
// another one is (listed in approved). Both histories are read with
// FINAL and grouped per definition: exact, and the cost is that of the
// selected registries' histories, a row per change or approval, never
// the decisions.
func pendingSQL(extra, limit string) string {
	reg := in("registry", VarRegistry)
	return `WITH current AS (
    SELECT registry, server, tool,
           argMax(change, observed_at) AS last_change,
           argMax(digest_after, observed_at) AS digest,
           maxIf(observed_at, change IN ('added', 'changed')) AS since,
           argMaxIf(summary, observed_at, change IN ('added', 'changed')) AS summary
    FROM registry_changes FINAL
    WHERE deleted = 0 AND ` + upTo("observed_at") + `
      AND ` + reg + `
    GROUP BY registry, server, tool
    HAVING last_change != 'removed'
), verdicts AS (
    SELECT registry, server, tool, digest, argMax(verb, baseline_version) AS verb
    FROM approval_events FINAL
    WHERE ` + upTo("decided_at") + `
      AND ` + reg + `
    GROUP BY registry, server, tool, digest
), approved AS (
    SELECT registry, server, tool, arraySort(groupArray(digest)) AS digests
    FROM verdicts
    WHERE verb = 'approve'
    GROUP BY registry, server, tool
)
SELECT c.since AS since, c.registry AS registry, c.server AS server, c.tool AS tool,
       if(empty(a.digests), 'new', 'unapproved') AS standing,
       c.summary AS summary, c.digest AS digest,
       arrayStringConcat(a.digests, ', ') AS approved` + extra + `
FROM current AS c
LEFT JOIN verdicts AS v ON v.registry = c.registry AND v.server = c.server AND v.tool = c.tool AND v.digest = c.digest
LEFT JOIN approved AS a ON a.registry = c.registry AND a.server = c.server AND a.tool = c.tool
WHERE v.verb NOT IN ('approve', 'reject')
ORDER BY since DESC, registry, server, tool
LIMIT ` + limit
}

// verdictsSQL lists the approval events decided inside the range, newest
// first, with the listing change that made the definition current
// (the newest one, its summary).
func verdictsSQL(extra, limit string) string {
	reg := in("registry", VarRegistry)
	return `WITH defs AS (
    SELECT registry, server, tool, digest_after AS digest, argMax(summary, observed_at) AS listing_change
    FROM registry_changes FINAL
    WHERE deleted = 0 AND change IN ('added', 'changed')
      AND ` + reg + `
    GROUP BY registry, server, tool, digest
)
SELECT e.decided_at AS time, e.registry AS registry, e.server AS server, e.tool AS tool, e.verb AS verb,
       e.decided_by AS by, e.reason AS reason, defs.listing_change AS listing_change, e.digest AS digest,
       e.baseline_version AS baseline_version` + extra + `
FROM approval_events AS e FINAL
LEFT JOIN defs ON defs.registry = e.registry AND defs.server = e.server AND defs.tool = e.tool AND defs.digest = e.digest
WHERE ` + inRange("e.decided_at") + `
  AND ` + in("e.registry", VarRegistry) + `
ORDER BY time DESC, baseline_version DESC
LIMIT ` + limit
}

const approvalsNote = " From table approval_events, the approvals topic's history (written by the resolverd run with --registry-history, kept beyond the topic's compaction), and the registry history; read with FINAL: exact."

// ApprovalsPending is the MCP servers dashboard's table of definitions
// waiting for a review.
func ApprovalsPending() Query {
	return Query{
		ID: "approvals.pending", Title: "Definitions waiting for approval (newest 1,000)", Format: Table,
		Description: "Tool definitions current at the end of the range that no verdict decided up to then approved or rejected (none, or revoked), newest first: new (no definition of the tool is approved) or unapproved (another one is: approved), with the listing change that made it current. Under --approvals block, calls to them are refused (M4). Approve or reject with resolverd registry approve|reject or POST /v1/approvals." + approvalsNote,
		SQL:         pendingSQL("", "1000"),
	}
}

// ApprovalsRecent is the MCP servers dashboard's table of verdicts
// (approve, reject, revoke) decided in the range.
func ApprovalsRecent() Query {
	return Query{
		ID: "approvals.recent", Title: "Approvals, rejections and revocations in the range (newest 1,000)", Format: Table,
		Description: "Every approval event decided inside the range, newest first: who approved, rejected or revoked which definition and why, the listing change that made the definition current, and the baseline version the event made." + approvalsNote,
		SQL:         verdictsSQL("", "1000"),
	}
}

// reportApprovals are the report's sections of the approved definitions:
// the dashboard's queries, cut to ReportTop rows with total_rows; the
// pending ones with reviews, the approval events up to the range's end.
func reportApprovals() []Query {
	total := ",\n       toUInt64(count() OVER ()) AS total_rows"
	top := strconv.Itoa(ReportTop)
	p, r := ApprovalsPending(), ApprovalsRecent()
	// reviews: approval events of the selected registries up to the end
	// of the range; none means approvals are not in use there, and the
	// report says so instead of listing every definition as waiting.
	reviews := total + ",\n       toUInt64((SELECT count() FROM approval_events WHERE " + upTo("decided_at") + " AND " + in("registry", VarRegistry) + ")) AS reviews"
	return []Query{
		{ID: "report.pending", Title: "Definitions waiting for approval", Format: Table, Description: p.Description, SQL: pendingSQL(reviews, top)},
		{ID: "report.approvals", Title: "Approvals, rejections and revocations", Format: Table, Description: r.Description, SQL: verdictsSQL(total, top)},
	}
}
