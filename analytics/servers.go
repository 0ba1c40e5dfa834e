package analytics

// toolDayFilters are the filters of decisions_by_tool_day on the MCP
// servers dashboard: whole UTC days, one registry.
func toolDayFilters() []string {
	return []string{inDays("day"), is("analysis_id", VarAnalysis), in("registry", VarRegistry), in("source", VarSource)}
}

// providers is a WITH clause: the tools each server of the selected
// registry provides at the end of the time range, with the server's
// trust, replayed from registry_changes (each tool's last change up to
// then, unless it was a removal).
var providers = `WITH providers AS (
    SELECT server, tool,
           argMax(change, observed_at) AS last_change,
           argMax(trust_after, observed_at) AS trust
    FROM registry_changes FINAL
    WHERE ` + "$__conditionalAll(registry IN (${registry:sqlstring}), $registry)" + `
      AND deleted = 0 AND ` + upTo("observed_at") + `
    GROUP BY server, tool
    HAVING last_change != 'removed'
)
`

const toolDayNote = " Whole UTC days of table decisions_by_tool_day; counts decisions as delivered (a call decided twice after a crash counts twice)."

// Servers are the MCP servers dashboard's queries.
func Servers() []Query {
	f := and(toolDayFilters()...)
	return []Query{
		{
			ID: "servers.shared_names", Title: "Names shared between servers", Format: Table,
			Description: "For each pair of servers of the registry, how many tool names both provide at the end of the range (from the registry history, registry_changes): the collision and shadowing matrix. Exact: a replay of every listing change.",
			SQL: providers + `SELECT a.server AS server, b.server AS other, toUInt64(count()) AS shared_names
FROM providers AS a
INNER JOIN providers AS b ON a.tool = b.tool
WHERE a.server != b.server
GROUP BY server, other
ORDER BY server, other`,
		},
		{
			ID: "servers.collisions", Title: "Colliding names and who got the calls (top 100)", Format: Table,
			Description: "Tool names provided by several servers at the end of the range, with the providers and their trust: a tie between the highest-trust providers (M2 without a pin) or a lower-trust server shadowing the name (M3). Calls to the name in the range, how many were M2 and M3, and where the others resolved." + toolDayNote,
			SQL: providers + `, names AS (
    SELECT tool AS name, groupArray(trust) AS trusts,
           arrayStringConcat(arraySort(groupArray(concat(server, ' (trust ', toString(trust), ')'))), ', ') AS provided_by
    FROM providers
    GROUP BY tool
    HAVING count() > 1
), calls AS (
    SELECT if(resolved_tool != '', resolved_tool, tool) AS name,
           sum(rows) AS calls,
           sumIf(rows, class = 'M2') AS m2,
           sumIf(rows, class = 'M3') AS m3,
           sumMap([if(resolved_server = '', '(unresolved)', resolved_server)], [rows]) AS got
    FROM decisions_by_tool_day
    WHERE ` + f + `
    GROUP BY name
)
SELECT names.name AS name,
       if(arrayCount(x -> x = arrayMax(trusts), trusts) > 1, 'tie (M2)', 'shadow (M3)') AS kind,
       provided_by,
       calls.calls AS calls,
       calls.m2 AS m2,
       calls.m3 AS m3,
       arrayStringConcat(arrayMap((s, n) -> concat(s, ': ', toString(n)), calls.got.1, calls.got.2), ', ') AS resolved_to
FROM names
LEFT JOIN calls ON calls.name = names.name
ORDER BY calls DESC, name
LIMIT 100`,
		},
		{
			ID: "servers.mcp_classes", Title: "M1-M5 by server", Format: Table,
			Description: "Decisions of the multi-server classes per server: the resolved server (M4, M5), the pinned one (M1 with a pin), every server that provides the name at the end of the range (M2, M3: a call counts once for each), or (none) for an unpinned M1. decisions is every decision resolved to or pinned at the server." + toolDayNote,
			SQL: providers + `SELECT server,
       sumIf(rows, class = 'M1') AS M1,
       sumIf(rows, class = 'M2') AS M2,
       sumIf(rows, class = 'M3') AS M3,
       sumIf(rows, class = 'M4') AS M4,
       sumIf(rows, class = 'M5') AS M5,
       sumIf(rows, class NOT IN ('M2', 'M3')) AS decisions
FROM (
    SELECT multiIf(resolved_server != '', resolved_server, server != '', server, '(none)') AS server, class, rows
    FROM decisions_by_tool_day
    WHERE ` + f + ` AND class NOT IN ('M2', 'M3')
    UNION ALL
    SELECT p.server AS server, d.class AS class, d.rows AS rows
    FROM (
        SELECT tool, class, rows FROM decisions_by_tool_day
        WHERE ` + f + ` AND class IN ('M2', 'M3')
    ) AS d
    INNER JOIN providers AS p ON p.tool = d.tool
)
GROUP BY server
HAVING M1 + M2 + M3 + M4 + M5 > 0
ORDER BY M1 + M2 + M3 + M4 + M5 DESC, server`,
		},
		{
			ID: "servers.stale_by_server", Title: "Stale definitions (M4) by server", Format: TimeSeries,
			Description: "Calls whose seen_digest is not the definition current at emission (M4: the host showed the model a stale definition), per resolved server and day." + toolDayNote,
			SQL: `SELECT toDateTime(day) AS time, resolved_server AS server, sum(rows) AS stale
FROM decisions_by_tool_day
WHERE ` + f + ` AND class = 'M4'
GROUP BY time, server
ORDER BY time, server`,
		},
		{
			ID: "servers.drift_by_server", Title: "Drift by server", Format: TimeSeries,
			Description: "Calls whose tool changed or was dropped by a listing after the call (drift), per resolved server and day." + toolDayNote,
			SQL: `SELECT toDateTime(day) AS time, resolved_server AS server, sum(drift) AS drifted
FROM decisions_by_tool_day
WHERE ` + f + ` AND drift > 0
GROUP BY time, server
ORDER BY time, server`,
		},
		{
			ID: "servers.stale_tools", Title: "Stale and drifting tools (top 50)", Format: Table,
			Description: "Tools with stale (M4) or drifted calls in the range, with the last listing change of the tool up to the range's end and its summary (registry_changes), and how many changes the range holds: the listings that made the calls stale or drift." + toolDayNote,
			SQL: `WITH changes AS (
    SELECT server, tool,
           max(observed_at) AS last_change,
           argMax(summary, observed_at) AS last_summary,
           countIf(observed_at >= $__fromTime_ms) AS changes_in_range
    FROM registry_changes FINAL
    WHERE ` + "$__conditionalAll(registry IN (${registry:sqlstring}), $registry)" + `
      AND deleted = 0 AND ` + upTo("observed_at") + `
    GROUP BY server, tool
)
SELECT d.server AS server, d.tool AS tool, d.stale AS stale, d.drifted AS drifted,
       changes.last_change AS last_change, changes.last_summary AS last_summary, changes.changes_in_range AS changes_in_range
FROM (
    SELECT resolved_server AS server, resolved_tool AS tool, sumIf(rows, class = 'M4') AS stale, sum(drift) AS drifted
    FROM decisions_by_tool_day
    WHERE ` + f + ` AND resolved_server != ''
    GROUP BY server, tool
    HAVING stale > 0 OR drifted > 0
) AS d
LEFT JOIN changes ON changes.server = d.server AND changes.tool = d.tool
ORDER BY stale + drifted DESC, server, tool
LIMIT 50`,
		},
		{
			ID: "servers.version_in_force", Title: "Registry version in force", Format: Table,
			Description: "Per registry, the version of the last decided call up to the end of the range (the version first seen last), since when, how many decisions were made under it, and how many versions decided calls in the range (registry_versions_seen). Exact unless a registry went back to the very content of an earlier version, which then counts from its first appearance.",
			SQL:         versionInForce("decisions_under_it", "") + "\nORDER BY registry",
		},
		RegistryChanges(),
		ApprovalsPending(),
		ApprovalsRecent(),
	}
}

// versionInForce is, per registry, the version in force at the end of
// the range (the last one first seen), since when, the decisions under
// it (as column under) and the versions that decided calls in the range;
// extra columns follow.
func versionInForce(under, extra string) string {
	return `SELECT registry,
       argMax(registry_version, first) AS version,
       max(first) AS since,
       argMax(decisions, first) AS ` + under + `,
       toUInt64(count()) AS versions_in_range` + extra + `
FROM (
    SELECT registry, registry_version, min(first_emitted) AS first, max(last_emitted) AS last, sum(rows) AS decisions
    FROM registry_versions_seen
    WHERE ` + and(is("analysis_id", VarAnalysis), in("registry", VarRegistry)) + `
    GROUP BY registry, registry_version
    HAVING first < $__toTime_ms AND last >= $__fromTime_ms
)
GROUP BY registry`
}

// RegistryChanges is the table of listing changes inside the time range,
// on the MCP servers and incident dashboards.
func RegistryChanges() Query {
	return Query{
		ID: "changes.in_range", Title: "Registry changes in the range (newest 1,000)", Format: Table,
		Description: "The newest 1,000 changes (newest first) of a tool's definition or of a server's trust made by a listing observed inside the range, with its structured diff (registry_changes, written by resolverd as it applies listings). Exact.",
		SQL: `SELECT observed_at AS time, registry, server, tool, change, summary,
       trust_before, trust_after, digest_before, digest_after, event_id
FROM registry_changes FINAL
WHERE deleted = 0 AND ` + inRange("observed_at") + `
  AND ` + in("registry", VarRegistry) + `
ORDER BY time DESC, registry, server, tool
LIMIT 1000`,
	}
}

// ChangeAnnotations marks listing changes on time series: one annotation
// per listing of a server that changed something.
func ChangeAnnotations() Query {
	return Query{
		ID: "changes.annotations", Title: "Listing changes", Format: Table,
		Description: "One annotation per listing that changed a server's tools or trust: the newest 1,000 in the range.",
		SQL: `SELECT observed_at AS time,
       concat(registry, '/', server, ': ', arrayStringConcat(arraySort(groupArray(concat(change, ' ', tool))), ', ')) AS text,
       concat(registry, ',', server) AS tags
FROM registry_changes FINAL
WHERE deleted = 0 AND ` + inRange("observed_at") + `
  AND ` + in("registry", VarRegistry) + `
GROUP BY registry, server, observed_at
ORDER BY time DESC, text
LIMIT 1000`,
	}
}
