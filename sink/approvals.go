package sink

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/approvals"
)

// approvalColumns are the columns of table approval_events
// (ddl/0009_approval_events.sql) in the order WriteApprovalEvents and
// ApprovalEvents use them.
const approvalColumns = "registry, server, tool, digest, description_digest, verb, decided_by, decided_at, " +
	"reason, event_id, baseline_version, recorded_at"

// WriteApprovalEvents stores approval events (table approval_events, the
// history of the approved baseline) as one INSERT, returning nil once
// ClickHouse acknowledged it. An event written again collapses with its
// first copy (same key): redelivery is harmless. Errors are classified as
// Write's (IsRetryable, IsPermanent).
func (c *ClickHouse) WriteApprovalEvents(ctx context.Context, es []approvals.Recorded) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if len(es) == 0 {
		return nil
	}
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"async_insert": 0}))
	b, err := c.conn.PrepareBatch(ctx, "INSERT INTO `"+c.db+"`.approval_events ("+approvalColumns+")")
	if err != nil {
		return fmt.Errorf("sink: approval events: %w", err)
	}
	defer b.Abort()
	now := time.Now().UTC()
	for i := range es {
		e := &es[i]
		if e.Version <= 0 {
			return fmt.Errorf("sink: approval events: event %q has baseline version %d", e.EventID, e.Version)
		}
		if err := b.Append(e.Registry, e.Server, e.Tool, e.Digest, e.DescriptionDigest, string(e.Verb), e.By,
			e.At.UTC(), e.Reason, e.EventID, uint64(e.Version), now); err != nil {
			return fmt.Errorf("sink: approval events: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("sink: approval events: %w", err)
	}
	return nil
}

// ApprovalEvents reads the history of the approved baseline of registry
// ("" for all) with FINAL (each event once), in the order the baseline
// applied them; limit 0 means all.
func (c *ClickHouse) ApprovalEvents(ctx context.Context, registry string, limit int) ([]approvals.Recorded, error) {
	q := "SELECT " + approvalColumns + " FROM `" + c.db + "`.approval_events FINAL"
	params := clickhouse.Parameters{}
	if registry != "" {
		q += " WHERE registry = {registry:String}"
		params["registry"] = registry
	}
	q += " ORDER BY baseline_version, decided_at, registry, server, tool, digest"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := c.conn.Query(clickhouse.Context(ctx, clickhouse.WithParameters(params)), q)
	if err != nil {
		return nil, fmt.Errorf("sink: read approval events: %w", err)
	}
	defer rows.Close()
	var out []approvals.Recorded
	for rows.Next() {
		var (
			e       approvals.Recorded
			verb    string
			at, rec time.Time
			version uint64
		)
		if err := rows.Scan(&e.Registry, &e.Server, &e.Tool, &e.Digest, &e.DescriptionDigest, &verb, &e.By,
			&at, &e.Reason, &e.EventID, &version, &rec); err != nil {
			return nil, fmt.Errorf("sink: read approval events: %w", err)
		}
		e.Verb, e.At, e.Version = approvals.Verb(verb), at.UTC(), int64(version)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: read approval events: %w", err)
	}
	return out, nil
}
