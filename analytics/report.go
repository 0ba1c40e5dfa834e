package analytics

import "strconv"

// ReportTop is how many rows each ranked section of `resolverd report`
// shows.
const ReportTop = 10

// totalsOf are the columns every ranked report query ends with: how many
// rows the whole ranking has and the sum of its ranking column, before
// its LIMIT (window functions run before LIMIT), so that the report says
// what it cut.
func totalsOf(col string) string {
	return `,
       toUInt64(count() OVER ()) AS total_rows,
       toUInt64(sum(` + col + `) OVER ()) AS total_calls`
}

// totals are totalsOf the calls column, the ranking of most sections.
var totals = totalsOf("calls")

// Report are the queries `resolverd report` runs besides the dashboards':
// each is one section over every selected registry at once (never one
// query per registry: a fleet of thousands of registries costs what ten
// do), ranked by the calls affected (RankColumn), the top ReportTop
// rows, each row ending with total_rows and total_calls (the sum of the
// ranking column) of the whole ranking; then the approved definitions'
// sections (the MCP servers dashboard's approvals.pending and
// approvals.recent, newest first, cut to ReportTop rows, with
// total_rows).
func Report() []Query {
	f := fleetFilters()
	tf := and(toolDayFilters()...)
	top := "\nLIMIT " + strconv.Itoa(ReportTop)
	return append([]Query{
		{
			ID: "report.fabricated", Title: "Fabricated tool names", Format: Table,
			Description: "Unknown names (H1, M1) by calls, with the nearest valid name and what separates them (as the fleet dashboard's table). Whole UTC days of fabricated_names_day; counts as delivered.",
			SQL:         fabricatedSQL(f, totals) + top,
		},
		{
			ID: "report.collisions", Title: "Colliding and shadowed names", Format: Table,
			Description: "Names several servers of a registry provide at the end of the range (registry_changes), by the calls they made ambiguous (M2: a tie, no pin) or resolved to the higher-trust server over another (M3: shadowing), with the providers and their trust." + toolDayNote,
			SQL: `WITH providers AS (
    SELECT registry, server, tool,
           argMax(change, observed_at) AS last_change,
           argMax(trust_after, observed_at) AS trust
    FROM registry_changes FINAL
    WHERE ` + in("registry", VarRegistry) + `
      AND deleted = 0 AND ` + upTo("observed_at") + `
    GROUP BY registry, server, tool
    HAVING last_change != 'removed'
), names AS (
    SELECT registry, tool AS name, groupArray(trust) AS trusts,
           arrayStringConcat(arraySort(groupArray(concat(server, ' (trust ', toString(trust), ')'))), ', ') AS provided_by
    FROM providers
    GROUP BY registry, tool
    HAVING count() > 1
), hits AS (
    SELECT registry, tool AS name, sumIf(rows, class = 'M2') AS m2, sumIf(rows, class = 'M3') AS m3
    FROM decisions_by_tool_day
    WHERE ` + tf + ` AND class IN ('M2', 'M3')
    GROUP BY registry, name
)
SELECT names.registry AS registry, names.name AS name,
       if(arrayCount(x -> x = arrayMax(trusts), trusts) > 1, 'tie (M2)', 'shadow (M3)') AS kind,
       provided_by, hits.m2 AS m2, hits.m3 AS m3, m2 + m3 AS calls` + totals + `
FROM names
INNER JOIN hits ON hits.registry = names.registry AND hits.name = names.name
ORDER BY calls DESC, registry, name` + top,
		},
		{
			ID: "report.drift", Title: "Drifting servers", Format: Table,
			Description: "Servers whose calls were made on a stale definition (M4: the host showed the model an old one) or whose tool changed or was dropped by a listing after the call (drift), by those calls." + toolDayNote,
			SQL: `SELECT registry, resolved_server AS server, sumIf(rows, class = 'M4') AS stale, sum(drift) AS drifted,
       stale + drifted AS calls,
       arrayStringConcat(arraySlice(arraySort(groupUniqArrayIf(resolved_tool, class = 'M4' OR drift > 0)), 1, 5), ', ') AS tools` + totals + `
FROM decisions_by_tool_day
WHERE ` + tf + ` AND resolved_server != ''
GROUP BY registry, server
HAVING calls > 0
ORDER BY calls DESC, registry, server` + top,
		},
		{
			ID: "report.sessions", Title: "Sessions with the most rejections", Format: Table,
			Description: "Agent sessions by their rejected calls in the range (whole hours of sessions_by_hour), with their decisions, first and last call. Counts decisions as delivered.",
			SQL: `SELECT session_id AS session, agent_id AS agent, model,
       sum(rows) AS decisions, sum(rejects) AS rejected,
       min(first_emitted) AS first, max(last_emitted) AS last` + totalsOf("rejected") + `
FROM sessions_by_hour
WHERE ` + sessionsRange + `
GROUP BY session, agent, model
HAVING rejected > 0
ORDER BY rejected DESC, last DESC, session` + top,
		},
		{
			ID: "report.versions", Title: "Latest registry versions", Format: Table,
			Description: "The registries whose version in force (that of the last decided call up to the end of the range) came latest, with the decisions made under it and the versions that decided calls in the range (registry_versions_seen).",
			SQL:         versionInForce("calls", totals) + "\nORDER BY since DESC, registry" + top,
		},
	}, reportApprovals()...)
}

// RankColumn is the column a report query ranks by: the calls affected;
// "" for the approved definitions' sections (report.pending,
// report.approvals), newest first, which end with total_rows alone.
func RankColumn(id string) string {
	switch id {
	case "report.sessions":
		return "rejected"
	case "report.pending", "report.approvals":
		return ""
	}
	return "calls"
}

// fabricatedSQL is the ranking of unknown names; extra columns follow
// models (the report's totals).
func fabricatedSQL(f []string, extra string) string {
	return `SELECT
    tool AS emitted,
    suggested_tool AS nearest,
    ` + nearMissKind + ` AS kind,
    if(nearest = '', NULL, editDistance(lower(tool), lower(` + unqualified + `))) AS distance,
    sum(rows) AS calls,
    arrayStringConcat(arraySort(groupUniqArray(model)), ', ') AS models` + extra + `
FROM fabricated_names_day
WHERE ` + and(append([]string{inDays("day")}, f...)...) + `
GROUP BY tool, suggested_tool
ORDER BY calls DESC, emitted, nearest`
}
