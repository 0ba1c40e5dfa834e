package sink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/registry/diff"
)

// registryColumns are the columns of table registry_changes
// (ddl/0007_analytics.sql) in the order WriteRegistryChanges and
// RegistryChanges use them.
const registryColumns = "registry, server, tool, observed_at, event_id, change, trust_before, trust_after, " +
	"digest_before, digest_after, props_added, props_removed, props_retyped, required_added, " +
	"required_removed, enum_added, enum_removed, other, summary, recorded_at, deleted"

// WriteRegistryChanges stores rows of the registry history (table
// registry_changes) as one INSERT, returning nil once ClickHouse
// acknowledged it. The table keeps, per (registry, server, tool,
// observed_at), the row with the greatest RecordedAt (a zero RecordedAt
// is stored as the time of the write), and FINAL drops the deleted ones:
// writing the same rows again is harmless. Errors are as Write's
// (appender.IsPermanent, IsRetryable).
func (c *ClickHouse) WriteRegistryChanges(ctx context.Context, cs []diff.Change) error {
	return markPermanent(c.writeRegistryChanges(ctx, cs))
}

func (c *ClickHouse) writeRegistryChanges(ctx context.Context, cs []diff.Change) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	if len(cs) == 0 {
		return nil
	}
	ctx = clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"async_insert": 0}))
	b, err := c.conn.PrepareBatch(ctx, "INSERT INTO `"+c.db+"`.registry_changes ("+registryColumns+")")
	if err != nil {
		return fmt.Errorf("sink: registry changes: %w", err)
	}
	defer b.Abort()
	now := time.Now().UTC()
	for i := range cs {
		ch := &cs[i]
		rec := ch.RecordedAt
		if rec.IsZero() {
			rec = now
		}
		d := &ch.Diff
		if err := b.Append(ch.Registry, ch.Server, ch.Tool, ch.ObservedAt.UTC(), ch.EventID, string(ch.Kind),
			int32(ch.TrustBefore), int32(ch.TrustAfter), ch.DigestBefore, ch.DigestAfter,
			strs(d.PropsAdded), strs(d.PropsRemoved), strs(d.PropsRetyped), strs(d.RequiredAdded),
			strs(d.RequiredRemoved), strs(d.EnumAdded), strs(d.EnumRemoved), strs(d.Other),
			ch.Summary, rec.UTC(), boolByte(ch.Deleted)); err != nil {
			return fmt.Errorf("sink: registry changes: %w", err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("sink: registry changes: %w", err)
	}
	return nil
}

func strs(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// ChangeFilter selects rows of the registry history. Registry is
// required; empty Server or Tool and zero From or To select all.
type ChangeFilter struct {
	Registry, Server, Tool string
	From, To               time.Time // observed_at within [From, To]
}

// RegistryChanges reads the registry history with FINAL (the last write
// of each change, deleted ones dropped), ordered by time, server and tool;
// limit 0 means all.
func (c *ClickHouse) RegistryChanges(ctx context.Context, f ChangeFilter, limit int) ([]diff.Change, error) {
	where := []string{"deleted = 0", "registry = {registry:String}"}
	params := clickhouse.Parameters{"registry": f.Registry}
	if f.Server != "" {
		where, params["server"] = append(where, "server = {server:String}"), f.Server
	}
	if f.Tool != "" {
		where, params["tool"] = append(where, "tool = {tool:String}"), f.Tool
	}
	if !f.From.IsZero() {
		where, params["from"] = append(where, "observed_at >= {from:DateTime64(3, 'UTC')}"), f.From.UTC().Format("2006-01-02 15:04:05.000")
	}
	if !f.To.IsZero() {
		where, params["to"] = append(where, "observed_at <= {to:DateTime64(3, 'UTC')}"), f.To.UTC().Format("2006-01-02 15:04:05.000")
	}
	q := "SELECT " + registryColumns + " FROM `" + c.db + "`.registry_changes FINAL WHERE " +
		strings.Join(where, " AND ") + " ORDER BY observed_at, server, tool"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	rows, err := c.conn.Query(clickhouse.Context(ctx, clickhouse.WithParameters(params)), q)
	if err != nil {
		return nil, fmt.Errorf("sink: read registry changes: %w", err)
	}
	defer rows.Close()
	var out []diff.Change
	for rows.Next() {
		var (
			ch            diff.Change
			kind          string
			tb, ta        int32
			deleted       uint8
			d             = &ch.Diff
			observed, rec time.Time
		)
		if err := rows.Scan(&ch.Registry, &ch.Server, &ch.Tool, &observed, &ch.EventID, &kind, &tb, &ta,
			&ch.DigestBefore, &ch.DigestAfter, &d.PropsAdded, &d.PropsRemoved, &d.PropsRetyped, &d.RequiredAdded,
			&d.RequiredRemoved, &d.EnumAdded, &d.EnumRemoved, &d.Other, &ch.Summary, &rec, &deleted); err != nil {
			return nil, fmt.Errorf("sink: read registry changes: %w", err)
		}
		ch.Kind, ch.TrustBefore, ch.TrustAfter, ch.Deleted = diff.Kind(kind), int(tb), int(ta), deleted != 0
		ch.ObservedAt, ch.RecordedAt = observed.UTC(), rec.UTC()
		out = append(out, ch)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: read registry changes: %w", err)
	}
	return out, nil
}
