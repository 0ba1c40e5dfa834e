package sink

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/schema"
)

// DiffQuery names the two analyses a Diff compares, and the calls it
// compares them on.
type DiffQuery struct {
	// Analysis is the new analysis, Against the one it is compared with
	// (the baseline: the live analysis, or a re-analysis under the
	// current build).
	Analysis, Against string
	// From and To, when not zero, keep the calls whose stored emitted_at is
	// in [From, To) (a call without a usable emitted_at is stored at the
	// epoch).
	From, To time.Time
	// Registries, when not empty, keeps the calls of these registries.
	Registries []string
	// Examples is how many calls each group shows (the first by call key).
	Examples int
}

// Outcome is a call's class and verdict in one analysis; the zero Outcome
// means the analysis has no decision of the call.
type Outcome struct {
	Class   schema.Class   `json:"class"`
	Verdict schema.Verdict `json:"verdict"`
}

// DiffGroup counts the calls whose decision went from Before (Against's)
// to After (Analysis's).
type DiffGroup struct {
	Before, After Outcome
	Calls         int64
	Examples      []DiffExample
}

// DiffExample is one call of a group.
type DiffExample struct {
	CallKey      string `json:"call_key"`
	EventID      string `json:"event_id"`
	Tool         string `json:"tool"`
	ReasonBefore string `json:"reason_before"`
	ReasonAfter  string `json:"reason_after"`
}

// Diff compares two analyses call by call: each call of either is put in
// the group of its (before, after) outcome, unchanged ones included, one
// call once (read with FINAL). The decisions compared are those taken
// from the calls topic, sources stream and reanalysis; when an analysis
// has both for a call, the later decision counts. Groups come ordered by
// their number of calls, largest first.
func (c *ClickHouse) Diff(ctx context.Context, q DiffQuery) ([]DiffGroup, error) {
	params := clickhouse.Parameters{"analysis": q.Analysis, "against": q.Against}
	where := "analysis_id IN ({analysis:String}, {against:String}) AND source IN ('" +
		string(schema.SourceStream) + "', '" + string(schema.SourceReanalysis) + "')"
	if !q.From.IsZero() {
		params["from"] = strconv.FormatInt(q.From.UnixMilli(), 10)
		where += " AND emitted_at >= fromUnixTimestamp64Milli({from:Int64}, 'UTC')"
	}
	if !q.To.IsZero() {
		params["to"] = strconv.FormatInt(q.To.UnixMilli(), 10)
		where += " AND emitted_at < fromUnixTimestamp64Milli({to:Int64}, 'UTC')"
	}
	if len(q.Registries) > 0 {
		var regs []string
		for i, r := range q.Registries {
			k := "r" + strconv.Itoa(i)
			params[k] = r
			regs = append(regs, "{"+k+":String}")
		}
		where += " AND registry IN (" + strings.Join(regs, ", ") + ")"
	}
	// Per call, the decision of each side (argMax: the later when a side
	// has two), then per (before, after) the count and the first examples
	// by call key. The examples are tuples
	// (call_key, event_id, tool, reason before, reason after).
	q.Examples = max(q.Examples, 0)
	// groupArraySorted wants at least 1; the surplus is dropped below.
	query := `SELECT bc, bv, ac, av, count(),
    groupArraySorted(` + strconv.Itoa(max(q.Examples, 1)) + `)((call_key, if(ha, a.4, b.4), if(ha, a.5, b.5), b.3, a.3))
FROM (
    SELECT call_key,
        argMaxIf((class, verdict, reason, event_id, tool), decided_at, analysis_id = {against:String}) AS b,
        argMaxIf((class, verdict, reason, event_id, tool), decided_at, analysis_id = {analysis:String}) AS a,
        countIf(analysis_id = {against:String}) > 0 AS hb,
        countIf(analysis_id = {analysis:String}) > 0 AS ha
    FROM ` + "`" + c.db + "`" + `.decisions FINAL
    WHERE ` + where + `
    GROUP BY call_key
)
GROUP BY if(hb, b.1, '') AS bc, if(hb, b.2, '') AS bv, if(ha, a.1, '') AS ac, if(ha, a.2, '') AS av
ORDER BY count() DESC, bc, bv, ac, av`
	ctx = clickhouse.Context(ctx, clickhouse.WithParameters(params),
		clickhouse.WithSettings(clickhouse.Settings{"do_not_merge_across_partitions_select_final": 1}))
	rows, err := c.conn.Query(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("sink: clickhouse diff: %w", err)
	}
	defer rows.Close()
	var out []DiffGroup
	for rows.Next() {
		var (
			g              DiffGroup
			bc, bv, ac, av string
			n              uint64
			examples       [][]any
		)
		if err := rows.Scan(&bc, &bv, &ac, &av, &n, &examples); err != nil {
			return nil, fmt.Errorf("sink: clickhouse diff: %w", err)
		}
		g.Before = Outcome{schema.Class(bc), schema.Verdict(bv)}
		g.After = Outcome{schema.Class(ac), schema.Verdict(av)}
		g.Calls = int64(n)
		for _, e := range examples[:min(len(examples), q.Examples)] {
			s := make([]string, len(e))
			for i, v := range e {
				s[i], _ = v.(string)
			}
			g.Examples = append(g.Examples, DiffExample{CallKey: s[0], EventID: s[1], Tool: s[2], ReasonBefore: s[3], ReasonAfter: s[4]})
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: clickhouse diff: %w", err)
	}
	return out, nil
}
