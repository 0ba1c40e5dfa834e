package analytics

// finalSettings reads decisions with FINAL partition by partition, in
// parallel: exact, because a redelivered call has the same emitted_at,
// hence the same partition (see sink.readContext).
const finalSettings = "SETTINGS do_not_merge_across_partitions_select_final = 1"

// sessionsRange selects the rows of sessions_by_hour of the dashboard's
// range and variables.
var sessionsRange = and(is("analysis_id", VarAnalysis),
	"hour >= toStartOfHour($__fromTime) AND hour <= $__toTime",
	in("registry", VarRegistry), in("model", VarModel), in("agent_id", VarAgent))

// Incident are the incident drill-down's queries.
func Incident() []Query {
	return []Query{
		{
			ID: "incident.sessions", Title: "Sessions in the range", Format: Table,
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
			ID: "incident.session_decisions", Title: "The session's decisions, in order", Format: Table,
			Description: "Every decision of the session in the range, in emission order, with the reason, the JSON pointer of the failing argument, what the name resolved to, the nearest valid name of an unknown one, the registry version and the digests the agent saw and the registry held. Read from decisions with FINAL, found by primary key through session_calls: exact, one row per call and source.",
			SQL: `SELECT emitted_at AS time, source, action, event_id, tool, server AS pin, class, verdict, reason, path,
       resolved_server, resolved_tool, suggested_tool AS nearest, drift,
       registry_version, seen_digest, current_digest, agent_id AS agent, model
FROM decisions FINAL
WHERE ` + and(is("analysis_id", VarAnalysis), is("session_id", VarSession),
				"$__timeFilter_ms(emitted_at)", in("registry", VarRegistry), in("class", VarClass)) + `
  AND call_key GLOBAL IN (
    SELECT call_key FROM session_calls
    WHERE ` + and(is("analysis_id", VarAnalysis), is("session_id", VarSession), "$__timeFilter_ms(emitted_at)") + `
  )
ORDER BY time, event_id, source
LIMIT 5000
` + finalSettings,
		},
		{
			ID: "incident.toctou", Title: "Call path against stream (time of check, time of use)", Format: Table,
			Description: "Calls decided in the call path (API or gateway) whose decision from the stream has another class: the registry or the arguments seen at the gate were not those of the record. Calls of the selected registries, models and agents (and session, when set) in the range (call_path_decisions), compared by decisions FINAL: exact.",
			SQL: `SELECT call_key, min(emitted_at) AS time, any(session_id) AS session, any(agent_id) AS agent, any(tool) AS tool,
       arrayStringConcat(arraySort(groupArray(concat(source, ': ', class, if(action != '', concat(' (', action, ')'), '')))), ', ') AS decisions,
       arrayStringConcat(arraySort(groupUniqArray(registry_version)), ', ') AS versions
FROM decisions FINAL
WHERE ` + is("analysis_id", VarAnalysis) + `
  AND call_key GLOBAL IN (
    SELECT call_key FROM call_path_decisions
    WHERE ` + and(is("analysis_id", VarAnalysis), "$__timeFilter_ms(emitted_at)",
				in("registry", VarRegistry), in("model", VarModel), in("agent_id", VarAgent),
				"(${session:sqlstring} = '' OR session_id = ${session:sqlstring})") + `
  )
GROUP BY call_key
HAVING uniqExact(source) > 1 AND uniqExact(class) > 1
ORDER BY time, call_key
LIMIT 500
` + finalSettings,
		},
		RegistryChanges(),
	}
}

// VariableQuery is the ClickHouse query that lists a dashboard
// variable's options.
type VariableQuery struct {
	Name, Label string
	SQL         string
}

// Variables are the option queries of the dashboards' query variables,
// by name.
func Variables() map[string]VariableQuery {
	hourRange := "hour >= toStartOfHour($__fromTime) AND hour <= $__toTime"
	distinct := func(col, table string, where ...string) string {
		where = append(where, col+" != ''")
		return "SELECT DISTINCT " + col + " FROM " + table + "\nWHERE " + and(where...) + "\nORDER BY " + col
	}
	return map[string]VariableQuery{
		VarAnalysis: {VarAnalysis, "Analysis", "SELECT DISTINCT analysis_id FROM registry_versions_seen ORDER BY analysis_id"},
		VarRegistry: {VarRegistry, "Registry", distinct("registry", "registry_versions_seen", is("analysis_id", VarAnalysis))},
		VarModel:    {VarModel, "Model", distinct("model", "decisions_rollup_hour", is("analysis_id", VarAnalysis), hourRange, in("registry", VarRegistry))},
		VarSurface:  {VarSurface, "Surface", distinct("surface", "decisions_rollup_hour", is("analysis_id", VarAnalysis), hourRange, in("registry", VarRegistry))},
		VarSource:   {VarSource, "Source", distinct("source", "decisions_rollup_hour", is("analysis_id", VarAnalysis), hourRange)},
		VarAgent: {VarAgent, "Agent", distinct("agent_id", "sessions_by_hour", is("analysis_id", VarAnalysis), hourRange,
			in("registry", VarRegistry), in("model", VarModel)) + "\nLIMIT 1000"},
	}
}
