package analytics

// The queries carry no SETTINGS clause: Grafana's ClickHouse user should
// be read-only (readonly = 1, as the plugin's documentation recommends),
// and such a user may change no setting, not even inside a query. The two
// that read decisions FINAL find their few call keys by primary key
// first, so FINAL merging across partitions costs little.

// sessionsRange selects the rows of sessions_by_hour of the dashboard's
// range and variables.
var sessionsRange = and(is("analysis_id", VarAnalysis),
	inBuckets("hour", "toStartOfHour"),
	in("registry", VarRegistry), in("model", VarModel), in("agent_id", VarAgent))

// Incident are the incident drill-down's queries.
func Incident() []Query {
	return []Query{
		{
			ID: "incident.sessions", Title: "Sessions in the range (top 50 by rejections)", Format: Table,
			Description: "Sessions of the selected registries, models and agents with decisions in the range (whole hours of table sessions_by_hour), those with the most rejections first; with the class filter, only sessions that had a decision of those classes. Counts decisions as delivered.",
			// The 50 sessions are chosen first on counts alone; only they
			// gather their classes (a week of a large fleet holds hundreds
			// of thousands of sessions: building every one's class set was
			// most of the query's cost at 100M decisions).
			SQL: `SELECT session_id AS session, agent_id AS agent, model,
       sum(rows) AS decisions, sum(rejects) AS rejected,
       min(first_emitted) AS first, max(last_emitted) AS last,
       arrayStringConcat(arraySort(groupUniqArrayArray(classes)), ' ') AS seen_classes
FROM sessions_by_hour
WHERE ` + sessionsRange + `
  AND (session_id, agent_id, model) IN (
    SELECT session_id, agent_id, model
    FROM sessions_by_hour
    WHERE ` + sessionsRange + `
    GROUP BY session_id, agent_id, model
    HAVING $__conditionalAll(max(hasAny(classes, [${class:sqlstring}])) = 1, $class)
    ORDER BY sum(rejects) DESC, max(last_emitted) DESC, session_id
    LIMIT 50
  )
GROUP BY session, agent, model
ORDER BY rejected DESC, last DESC, session
LIMIT 50`,
		},
		{
			ID: "incident.session_decisions", Title: "The session's decisions, in order (newest 5,000)", Format: Table,
			Description: "The decisions of the session in the range (the newest 5,000 if there are more), in emission order, with the reason, the JSON pointer of the failing argument, what the name resolved to, the nearest valid name of an unknown one, the registry version and the digests the agent saw and the registry held, and the OpenTelemetry trace the call was recorded in (a link to it with the trace_url variable). Read from decisions with FINAL, found by primary key through the call keys of the session's hours (sessions_by_hour; session_calls for history written before migration 0011): exact, one row per call and source.",
			SQL: `SELECT * FROM (
SELECT emitted_at AS time, source, action, event_id, tool, server AS pin, class, verdict, reason, path,
       resolved_server, resolved_tool, suggested_tool AS nearest, drift,
       registry_version, seen_digest, current_digest, agent_id AS agent, model, trace_id AS trace
FROM decisions FINAL
WHERE ` + and(is("analysis_id", VarAnalysis), is("session_id", VarSession),
				inRange("emitted_at"), in("registry", VarRegistry), in("class", VarClass)) + `
  AND call_key GLOBAL IN (
    SELECT arrayJoin(call_keys) FROM sessions_by_hour
    WHERE ` + and(is("analysis_id", VarAnalysis), is("session_id", VarSession), inBuckets("hour", "toStartOfHour")) + `
    UNION ALL
    SELECT call_key FROM session_calls
    WHERE ` + and(is("analysis_id", VarAnalysis), is("session_id", VarSession), inRange("emitted_at")) + `
  )
ORDER BY time DESC, event_id DESC, source DESC
LIMIT 5000
) ORDER BY time, event_id, source`,
		},
		TOCTOU(false),
		Malformed(),
		RegistryChanges(),
	}
}

// TOCTOU is the time-of-check/time-of-use comparison: calls decided in
// the call path whose stream decision has another class. The incident
// dashboard's panel (bySession false) lists them for the whole range
// whatever the session picked, each with its session, so that it opens
// on them; `resolverd report --toctou --session` narrows to one
// (bySession true, ID incident.toctou_session).
func TOCTOU(bySession bool) Query {
	id, scope, session := "incident.toctou", "Calls of the selected registries, models and agents in the range, of every session", "1=1"
	if bySession {
		id, scope, session = "incident.toctou_session", "Calls of the session (and the selected registries, models and agents) in the range", is("session_id", VarSession)
	}
	return Query{
		ID: id, Title: "Call path against stream (time of check, time of use; newest 500)", Format: Table,
		Description: "Newest first, at most 500: calls decided in the call path (API or gateway) whose decision from the stream has another class: the registry or the arguments seen at the gate were not those of the record. " + scope + " (call_path_decisions), compared by decisions FINAL: exact.",
		SQL: `SELECT call_key, min(emitted_at) AS time, any(session_id) AS session, any(agent_id) AS agent, any(tool) AS tool,
       arrayStringConcat(arraySort(groupArray(concat(source, ': ', class, if(action != '', concat(' (', action, ')'), '')))), ', ') AS decisions,
       arrayStringConcat(arraySort(groupUniqArray(registry_version)), ', ') AS versions
FROM decisions FINAL
WHERE ` + is("analysis_id", VarAnalysis) + `
  AND call_key GLOBAL IN (
    SELECT call_key FROM call_path_decisions
    WHERE ` + and(is("analysis_id", VarAnalysis), inRange("emitted_at"),
			in("registry", VarRegistry), in("model", VarModel), in("agent_id", VarAgent), session) + `
  )
GROUP BY call_key
HAVING uniqExact(source) > 1 AND uniqExact(class) > 1
ORDER BY time DESC, call_key
LIMIT 500`,
	}
}

// VariableQuery is the ClickHouse query that lists a dashboard
// variable's options, in the order the dashboard offers them: with no
// saved value, Grafana selects the first, so each lists the option that
// opens on the most data first.
type VariableQuery struct {
	Name, Label string
	SQL         string
}

// hourRange selects the hours of the dashboard's range in the hour tables.
var hourRange = inBuckets("hour", "toStartOfHour")

// busiest lists col's values with decisions in the range, busiest first
// (decisions_rollup_hour; first is the tie breaker's column order).
func busiest(col, first string, where ...string) string {
	where = append([]string{is("analysis_id", VarAnalysis), hourRange}, where...)
	where = append(where, col+" != ''")
	return "SELECT " + col + "\nFROM decisions_rollup_hour\nWHERE " + and(where...) +
		"\nGROUP BY " + col + "\nORDER BY " + first + "sum(rows) DESC, " + col
}

// Variables are the option queries of the dashboards' query variables,
// by name: every one lists only what has decisions in the time range,
// busiest first.
func Variables() map[string]VariableQuery {
	return map[string]VariableQuery{
		// live (resolverd run's analysis) first, then the latest.
		VarAnalysis: {VarAnalysis, "Analysis", "SELECT analysis_id\nFROM registry_versions_seen\nGROUP BY analysis_id\nORDER BY analysis_id = 'live' DESC, max(last_emitted) DESC, analysis_id"},
		VarRegistry: {VarRegistry, "Registry", busiest("registry", "")},
		VarModel:    {VarModel, "Model", busiest("model", "", in("registry", VarRegistry))},
		VarSurface:  {VarSurface, "Surface", busiest("surface", "", in("registry", VarRegistry))},
		VarSource:   {VarSource, "Source", busiest("source", "")},
		VarAgent: {VarAgent, "Agent", "SELECT agent_id\nFROM sessions_by_hour\nWHERE " + and(is("analysis_id", VarAnalysis), hourRange,
			in("registry", VarRegistry), in("model", VarModel), "agent_id != ''") + "\nGROUP BY agent_id\nORDER BY sum(rows) DESC, agent_id\nLIMIT 1000"},
		VarSession: {VarSession, "Session", "SELECT session_id\nFROM sessions_by_hour\nWHERE " + and(sessionsRange, "session_id != ''") +
			"\nGROUP BY session_id\nORDER BY sum(rejects) DESC, max(last_emitted) DESC, session_id\nLIMIT 1000"},
	}
}

// MCPRegistry is the MCP servers dashboard's registry variable: one
// registry (its panels compare the servers of one deployment), the one
// with the most MCP calls in the range first.
func MCPRegistry() VariableQuery {
	return VariableQuery{VarRegistry, "Registry", busiest("registry", "sumIf(rows, surface = 'mcp') DESC, ")}
}
