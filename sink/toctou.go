package sink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// TOCTOUQuery lists the calls of an analysis whose decision in the call
// path (source api or gateway: what the host enforced) and decision from
// the stream (the same event through the calls topic, decided later)
// differ in class: the time-of-check/time-of-use gap made visible, most
// often a listing that changed between the two (compare the registry
// versions). Both sides are read with FINAL: one decision per (call,
// source). {db} is the database, {aid:String} the analysis id, {limit:UInt64} the most
// rows (a ClickHouse server-side parameter each, as in sink.Counts). It
// is the one text of this query: the dashboards read it from here.
const TOCTOUQuery = `SELECT
    e.call_key, e.event_id, e.registry, e.session_id, e.tool, e.server,
    e.source AS enforcement_source, e.action, e.class AS enforcement_class,
    e.registry_version AS enforcement_version, e.decided_at AS enforced_at,
    s.class AS stream_class, s.registry_version AS stream_version, s.decided_at AS streamed_at
FROM
    (SELECT call_key, event_id, registry, session_id, tool, server, source, action, class, registry_version, decided_at
     FROM {db}.decisions FINAL
     WHERE analysis_id = {aid:String} AND source IN ('api', 'gateway')) AS e
INNER JOIN
    (SELECT call_key, class, registry_version, decided_at
     FROM {db}.decisions FINAL
     WHERE analysis_id = {aid:String} AND source = 'stream') AS s
ON e.call_key = s.call_key
WHERE e.class != s.class
ORDER BY e.decided_at DESC, e.call_key
LIMIT {limit:UInt64}`

// Gap is one row of TOCTOUQuery: a call decided one way in the call path
// and another from the stream.
type Gap struct {
	CallKey, EventID, Registry, SessionID, Tool, Server string
	// Enforcement: the decision the host got (and what it reports it did).
	EnforcementSource  schema.Source
	Action             schema.Action
	EnforcementClass   schema.Class
	EnforcementVersion string
	EnforcedAt         time.Time
	// Stream: the same event decided from the calls topic.
	StreamClass   schema.Class
	StreamVersion string
	StreamedAt    time.Time
}

// TOCTOU runs TOCTOUQuery for analysisID, at most limit rows (0: 1000).
func (c *ClickHouse) TOCTOU(ctx context.Context, analysisID string, limit int) ([]Gap, error) {
	if limit <= 0 {
		limit = 1000
	}
	q := strings.ReplaceAll(TOCTOUQuery, "{db}", "`"+c.db+"`")
	q = strings.ReplaceAll(q, "{limit:UInt64}", fmt.Sprint(limit))
	rows, err := c.conn.Query(readContext(ctx, analysisID), q)
	if err != nil {
		return nil, fmt.Errorf("sink: clickhouse toctou: %w", err)
	}
	defer rows.Close()
	var out []Gap
	for rows.Next() {
		var g Gap
		var src, action, ec, sc string
		if err := rows.Scan(&g.CallKey, &g.EventID, &g.Registry, &g.SessionID, &g.Tool, &g.Server,
			&src, &action, &ec, &g.EnforcementVersion, &g.EnforcedAt, &sc, &g.StreamVersion, &g.StreamedAt); err != nil {
			return nil, fmt.Errorf("sink: clickhouse toctou: %w", err)
		}
		g.EnforcementSource, g.Action = schema.Source(src), schema.Action(action)
		g.EnforcementClass, g.StreamClass = schema.Class(ec), schema.Class(sc)
		g.EnforcedAt, g.StreamedAt = g.EnforcedAt.UTC(), g.StreamedAt.UTC()
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: clickhouse toctou: %w", err)
	}
	return out, nil
}
