package analytics

import (
	"strconv"
	"strings"
)

// Format is how the ClickHouse plugin shapes a query's result (its
// "format" field): a time series (long rows become one series per label
// value) or a table.
type Format int

// The plugin's formats (sqlutil.FormatQueryOption).
const (
	TimeSeries Format = 0
	Table      Format = 1
)

// Query is one ClickHouse query of a dashboard panel, a dashboard
// variable or an annotation, in the dialect of the grafana-clickhouse-datasource
// plugin: Grafana's template variables and the plugin's macros, expanded
// by Expand exactly as the plugin does. Tables are named without their
// database: the datasource's default database (and the report's
// connection) selects it.
type Query struct {
	// ID is stable and unique: "fleet.rates".
	ID string
	// Title and Description are the panel's; Description says what is
	// counted, from which table, and how exact it is.
	Title, Description string
	SQL                string
	Format             Format
}

// Variable names of the dashboards, referenced by the queries.
const (
	VarAnalysis = "analysis"
	VarRegistry = "registry"
	VarModel    = "model"
	VarSurface  = "surface"
	VarSource   = "source"
	VarClass    = "class"
	VarAgent    = "agent"
	VarSession  = "session"
)

// in is the filter of a multi-value variable: col IN the selection, or
// nothing when All is selected.
func in(col, v string) string {
	return "$__conditionalAll(" + col + " IN (${" + v + ":sqlstring}), $" + v + ")"
}

// is is the filter of a single-value variable.
func is(col, v string) string { return col + " = ${" + v + ":sqlstring}" }

func and(conds ...string) string { return strings.Join(conds, "\n  AND ") }

// TierSeconds is the longest time range that reads the minute rollup;
// longer ranges read the hour rollup.
const TierSeconds = 2 * 86400

// rollup is a subquery over the decisions rollups with column t (the
// bucket) and cols, for the dashboard's time range rounded out to whole
// buckets: the minute tier for ranges up to TierSeconds, the hour tier
// beyond. The tier not chosen is cut by a constant condition, so its
// table is not read.
func rollup(cols string, where ...string) string {
	w := and(where...)
	return `(
    SELECT minute AS t, ` + cols + `
    FROM decisions_rollup_minute
    WHERE $__toTime - $__fromTime <= ` + strconv.Itoa(TierSeconds) + `
      AND ` + inBuckets("minute", "toStartOfMinute") + `
      AND ` + w + `
    UNION ALL
    SELECT hour AS t, ` + cols + `
    FROM decisions_rollup_hour
    WHERE $__toTime - $__fromTime > ` + strconv.Itoa(TierSeconds) + `
      AND ` + inBuckets("hour", "toStartOfHour") + `
      AND ` + w + `
)`
}

// fleetFilters are the fleet dashboard's filters of a rollup.
func fleetFilters() []string {
	return []string{is("analysis_id", VarAnalysis), in("registry", VarRegistry), in("model", VarModel),
		in("surface", VarSurface), in("source", VarSource)}
}

// decided is the denominator of the rates: decisions that are not
// MALFORMED; NULL (no value) rather than a division by zero.
const decided = "nullIf(sumIf(rows, class != 'MALFORMED'), 0)"

const rollupNote = " Counts decisions as delivered (rollups fed at insert): equal to decisions FINAL unless a resolverd crash or partition move had calls decided twice, which then count twice. The range is rounded out to whole minutes (ranges up to 2 days) or hours."

// Fleet are the fleet overview's queries.
func Fleet() []Query {
	f := fleetFilters()
	hall := sqlList(Hallucination)
	return []Query{
		{
			ID: "fleet.rates", Title: "Headline rates", Format: Table,
			Description: "Hallucination rate (H1-H5, M1, M5), unknown-tool rate (H1, M1) and schema-reject rate (H2, H3, H5, M5) of the decisions that are not MALFORMED; the coercible share of H3 (a value like \"5\" for 5); the near-miss share of unknown names (a nearest valid name was found)." + rollupNote,
			SQL: `SELECT
    sumIf(rows, class IN ` + hall + `) / ` + decided + ` AS hallucination_rate,
    sumIf(rows, class IN ` + sqlList(UnknownTool) + `) / ` + decided + ` AS unknown_tool_rate,
    sumIf(rows, class IN ` + sqlList(SchemaReject) + `) / ` + decided + ` AS schema_reject_rate,
    sumIf(coercible, class = 'H3') / nullIf(sumIf(rows, class = 'H3'), 0) AS h3_coercible_share,
    sumIf(suggested, class IN ` + sqlList(UnknownTool) + `) / nullIf(sumIf(rows, class IN ` + sqlList(UnknownTool) + `), 0) AS near_miss_share
FROM ` + rollup("class, rows, coercible, suggested", f...),
		},
		{
			ID: "fleet.verdicts", Title: "Verdicts", Format: Table,
			Description: "Decisions allowed and rejected, and their total." + rollupNote,
			SQL: `SELECT
    sumIf(rows, verdict = 'allow') AS allowed,
    sumIf(rows, verdict = 'reject') AS rejected,
    sum(rows) AS decisions
FROM ` + rollup("verdict, rows", f...),
		},
		{
			ID: "fleet.class_mix", Title: "Class mix", Format: Table,
			Description: "Decisions per class and their share of all decisions." + rollupNote,
			SQL: `SELECT class, sum(rows) AS decisions, round(100 * decisions / sum(decisions) OVER (), 2) AS share_pct
FROM ` + rollup("class, rows", f...) + `
GROUP BY class
ORDER BY indexOf(` + classOrder() + `, class)`,
		},
		rateTable("model", "Models", "Each model's decisions and rates over the range: hallucination (H1-H5, M1, M5), unknown tool (H1, M1), schema reject (H2, H3, H5, M5), of its decisions that are not MALFORMED.", f),
		rateTable("surface", "Invocation surfaces", "Each invocation surface's decisions and rates over the range (raw JSON, schema-enforced decoding, MCP, ...): hallucination, unknown tool, schema reject, of its decisions that are not MALFORMED.", f),
		rateSeries("model", "Hallucination rate by model", "Share of each model's decisions (not MALFORMED) that are hallucinations (H1-H5, M1, M5), per interval.", f),
		rateSeries("surface", "Hallucination rate by surface", "Share of each invocation surface's decisions (not MALFORMED) that are hallucinations (H1-H5, M1, M5), per interval: raw JSON against schema-enforced decoding against MCP.", f),
		{
			ID: "fleet.classes_over_time", Title: "Decisions by class", Format: TimeSeries,
			Description: "Decisions per class and interval." + rollupNote,
			SQL: `SELECT $__timeInterval(t) AS time, class, sum(rows) AS decisions
FROM ` + rollup("class, rows", f...) + `
GROUP BY time, class
ORDER BY time, class`,
		},
		Malformed(),
		{
			ID: "fleet.top_fabricated", Title: "Top 20 fabricated tool names", Format: Table,
			Description: "Unknown names (H1, M1) by calls, with the nearest valid name of the registry version (suggested_tool) and what separates them: another server (the name is right, the server is not), case, a prefix (functions., mcp__server__), separators, a plural, a typo (edit distance), or nothing near (an invention). Whole UTC days of table fabricated_names_day; counts as delivered (see the rates).",
			SQL:         fabricatedSQL(f, "") + "\nLIMIT 20",
		},
	}
}

// Malformed is the MALFORMED decisions per interval and source, of
// every registry, model, surface and session: a record that could not be
// read has none of those that can be trusted, so a view filtered to a
// registry would hide it. On the fleet and incident dashboards.
func Malformed() Query {
	return Query{
		ID: "malformed.over_time", Title: "Unreadable calls (MALFORMED), every registry", Format: TimeSeries,
		Description: "Call records that could not be read (MALFORMED) per interval and source. Not narrowed by registry, model, surface, agent or session: such a record has none that can be trusted." + rollupNote,
		SQL: `SELECT $__timeInterval(t) AS time, source, sum(rows) AS malformed
FROM ` + rollup("source, rows", is("analysis_id", VarAnalysis), in("source", VarSource), "class = 'MALFORMED'") + `
GROUP BY time, source
ORDER BY time, source`,
	}
}

// rateTable is the rates per value of one dimension (model, surface).
func rateTable(dim, title, description string, f []string) Query {
	return Query{
		ID: "fleet.by_" + dim, Title: title, Format: Table,
		Description: description + rollupNote,
		SQL: `SELECT ` + dim + `, sum(rows) AS decisions,
    sumIf(rows, class IN ` + sqlList(Hallucination) + `) / ` + decided + ` AS hallucination_rate,
    sumIf(rows, class IN ` + sqlList(UnknownTool) + `) / ` + decided + ` AS unknown_tool_rate,
    sumIf(rows, class IN ` + sqlList(SchemaReject) + `) / ` + decided + ` AS schema_reject_rate
FROM ` + rollup(dim+", class, rows", f...) + `
GROUP BY ` + dim + `
ORDER BY decisions DESC, ` + dim,
	}
}

// rateSeries is the hallucination rate per interval and value of one
// dimension (model, surface).
func rateSeries(dim, title, description string, f []string) Query {
	return Query{
		ID: "fleet.hallucination_by_" + dim, Title: title, Format: TimeSeries,
		Description: description + rollupNote,
		SQL: `SELECT $__timeInterval(t) AS time, ` + dim + `, sumIf(rows, class IN ` + sqlList(Hallucination) + `) / ` + decided + ` AS rate
FROM ` + rollup(dim+", class, rows", f...) + `
GROUP BY time, ` + dim + `
ORDER BY time, ` + dim,
	}
}

// Span is the time range that holds all of an analysis's decisions in
// the rollups, half-open: from the start of the first hour to the start
// of the hour after the last,
// for a report over all of it. A decision without a usable emitted_at
// counts at its decision time, as in the rollups.
func Span() Query {
	return Query{
		ID: "analysis.span", Title: "Time span of the analysis", Format: Table,
		Description: "From the first hour with decisions of the analysis to the end of the last (decisions_rollup_hour), half-open: [first, last).",
		SQL: `SELECT min(hour) AS first, max(hour) + INTERVAL 1 HOUR AS last
FROM decisions_rollup_hour
WHERE ` + is("analysis_id", VarAnalysis),
	}
}

// unqualified is suggested_tool without a server__ qualification.
const unqualified = "if(position(suggested_tool, '__') > 0, substring(suggested_tool, position(suggested_tool, '__') + 2), suggested_tool)"

// nearMissKind classifies an unknown name against its nearest valid name
// (SQL over tool and suggested_tool), first match wins: invention (no
// nearest name), server (the name is right but another server provides
// it: the nearest is qualified, server__tool, and the emitted name is the
// tool alone or qualified by another server), case, prefix (functions., tools., mcp__x__, x__ or x.
// dropped), separator (-, _, ., space), plural (s or es), typo.
var nearMissKind = func() string {
	n := "lower(" + unqualified + ")"
	stripped := `lower(replaceRegexpOne(tool, '^(functions\\.|tools\\.|mcp__[^_]+__|[A-Za-z0-9-]+__|[A-Za-z0-9-]+\\.)', ''))`
	sep := func(s string) string { return "replaceRegexpAll(" + s + ", '[-_. ]', '')" }
	return `multiIf(
        suggested_tool = '', 'invention',
        position(suggested_tool, '__') > 0
            AND replaceRegexpOne(tool, '^[A-Za-z0-9-]+__', '') = ` + unqualified + `, 'server',
        lower(tool) = ` + n + `, 'case',
        ` + stripped + ` = ` + n + `, 'prefix',
        ` + sep(stripped) + ` = ` + sep(n) + `, 'separator',
        ` + sep(stripped) + ` IN (concat(` + sep(n) + `, 's'), concat(` + sep(n) + `, 'es'))
            OR ` + sep(n) + ` IN (concat(` + sep(stripped) + `, 's'), concat(` + sep(stripped) + `, 'es')), 'plural',
        'typo')`
}()
