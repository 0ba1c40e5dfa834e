package sink

import (
	"context"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/schema"
)

// readContext carries analysisID as server-side query parameter aid and
// do_not_merge_across_partitions_select_final: FINAL then deduplicates
// within each partition only, in parallel. That is exact for this table
// because a redelivered call has the same emitted_at, hence the same
// partition (the reason the table is partitioned by emitted_at).
func readContext(ctx context.Context, analysisID string) context.Context {
	return clickhouse.Context(ctx,
		clickhouse.WithParameters(clickhouse.Parameters{"aid": analysisID}),
		clickhouse.WithSettings(clickhouse.Settings{"do_not_merge_across_partitions_select_final": 1}))
}

// Counts returns the number of decisions of analysis analysisID by class,
// and their total, read with FINAL: one per call however often it was
// delivered.
func (c *ClickHouse) Counts(ctx context.Context, analysisID string) (map[schema.Class]int, int, error) {
	rows, err := c.conn.Query(readContext(ctx, analysisID),
		"SELECT class, count() FROM `"+c.db+"`.decisions FINAL WHERE analysis_id = {aid:String} GROUP BY class")
	if err != nil {
		return nil, 0, fmt.Errorf("sink: clickhouse counts: %w", err)
	}
	defer rows.Close()
	counts := map[schema.Class]int{}
	total := 0
	for rows.Next() {
		var class string
		var n uint64
		if err := rows.Scan(&class, &n); err != nil {
			return nil, 0, fmt.Errorf("sink: clickhouse counts: %w", err)
		}
		counts[schema.Class(class)] = int(n)
		total += int(n)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("sink: clickhouse counts: %w", err)
	}
	return counts, total, nil
}

// Stored returns how many rows of analysis analysisID are stored, without
// FINAL: redelivered calls count once per delivery until parts merge, so it
// is an upper bound of the number of decisions, cheap enough to poll (it
// reads only the sort key's first column).
func (c *ClickHouse) Stored(ctx context.Context, analysisID string) (int, error) {
	var n uint64
	err := c.conn.QueryRow(readContext(ctx, analysisID),
		"SELECT count() FROM `"+c.db+"`.decisions WHERE analysis_id = {aid:String}").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sink: clickhouse stored rows: %w", err)
	}
	return int(n), nil
}

// Rows returns the decisions of analysis analysisID read with FINAL (the
// latest decision of each call), ordered by call key; limit 0 means all.
// Times come back in UTC, the stored epoch as the zero time.
func (c *ClickHouse) Rows(ctx context.Context, analysisID string, limit int) ([]schema.Row, error) {
	q := "SELECT " + columnList(columns) + " FROM `" + c.db + "`.decisions FINAL WHERE analysis_id = {aid:String} ORDER BY call_key"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := c.conn.Query(readContext(ctx, analysisID), q)
	if err != nil {
		return nil, fmt.Errorf("sink: clickhouse rows: %w", err)
	}
	defer rows.Close()
	var out []schema.Row
	dest := make([]any, len(columns))
	for rows.Next() {
		out = append(out, schema.Row{})
		r := &out[len(out)-1]
		for i, col := range columns {
			switch {
			case col.Str != nil:
				dest[i] = col.Str(r)
			case col.Bool != nil:
				dest[i] = col.Bool(r)
			case col.Time != nil:
				dest[i] = col.Time(r)
			case col.Int32 != nil:
				dest[i] = col.Int32(r)
			default:
				dest[i] = col.Int64(r)
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("sink: clickhouse rows: %w", err)
		}
		r.EmittedAt, r.DecidedAt = loadTime(r.EmittedAt), loadTime(r.DecidedAt)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: clickhouse rows: %w", err)
	}
	return out, nil
}

// RolledUp returns how many decisions of analysis analysisID the hourly
// rollup (decisions_rollup_hour, fed by a materialized view) has counted.
// A decision's rows are visible in decisions a moment before the views of
// its INSERT have run: a reader that waited for the decisions and reads
// the rollups next waits for this too.
func (c *ClickHouse) RolledUp(ctx context.Context, analysisID string) (int, error) {
	var n uint64
	err := c.conn.QueryRow(readContext(ctx, analysisID),
		"SELECT sum(rows) FROM `"+c.db+"`.decisions_rollup_hour WHERE analysis_id = {aid:String}").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("sink: clickhouse rolled-up rows: %w", err)
	}
	return int(n), nil
}

// Sources returns the sources of the decisions stored under analysis
// analysisID, sorted; none for an analysis without decisions. It reads
// the sort key's columns only.
func (c *ClickHouse) Sources(ctx context.Context, analysisID string) ([]schema.Source, error) {
	rows, err := c.conn.Query(readContext(ctx, analysisID),
		"SELECT DISTINCT source FROM `"+c.db+"`.decisions WHERE analysis_id = {aid:String} ORDER BY source")
	if err != nil {
		return nil, fmt.Errorf("sink: clickhouse sources: %w", err)
	}
	defer rows.Close()
	var out []schema.Source
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("sink: clickhouse sources: %w", err)
		}
		out = append(out, schema.Source(s))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: clickhouse sources: %w", err)
	}
	return out, nil
}
