package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ClickHouse/ch-go"
	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/schema"
)

// The archive: table call_events (schema/ddl/0006_call_events.sql), the
// calls topic's records as they were produced, written with the decisions
// of the same batch when the pipeline archives (Batch.AppendEvents) and
// read back by the re-analysis (CallEvents).

// archiveColumns are the columns of call_events the writer fills and the
// readers read, in this order, with their types (checked by CheckArchive).
var archiveColumns = []schema.Column{
	{Name: "emitted_at", Type: schema.TypeTime},
	{Name: "topic", Type: schema.TypeLowCardinality},
	{Name: "partition", Type: schema.TypeInt32},
	{Name: "offset", Type: schema.TypeInt64},
	{Name: "timestamp", Type: schema.TypeTime},
	{Name: "key", Type: schema.TypeString},
	{Name: "value", Type: schema.TypeString},
	{Name: "archived_at", Type: schema.TypeTime},
}

// events are the archive rows of a Batch, in column form (archiveColumns'
// order), like the batch's decisions.
type events struct {
	emittedAt, ts, archivedAt *proto.ColDateTime64
	topic                     lcStr
	partition                 proto.ColInt32
	offset                    proto.ColInt64
	key, value                wireStr
	input                     proto.Input
	clamped                   int
}

func newEvents() *events {
	e := &events{}
	e.emittedAt = new(proto.ColDateTime64).WithPrecision(proto.PrecisionMilli).WithLocation(time.UTC)
	e.ts = new(proto.ColDateTime64).WithPrecision(proto.PrecisionMilli).WithLocation(time.UTC)
	e.archivedAt = new(proto.ColDateTime64).WithPrecision(proto.PrecisionMilli).WithLocation(time.UTC)
	data := []proto.ColInput{e.emittedAt, &e.topic, &e.partition, &e.offset, e.ts, &e.key, &e.value, e.archivedAt}
	for i, c := range archiveColumns {
		e.input = append(e.input, proto.InputColumn{Name: c.Name, Data: data[i]})
	}
	return e
}

func (e *events) rows() int {
	if e == nil {
		return 0
	}
	return e.offset.Rows()
}

func (e *events) size() int {
	if e == nil {
		return 0
	}
	return len(e.key.buf) + len(e.value.buf) + 4*len(e.topic.keys) + len(e.topic.dict.Buf) + e.rows()*(3*8+4+8)
}

func (e *events) appendTime(c *proto.ColDateTime64, t time.Time) {
	ms, cl := storeMilli(t)
	if cl {
		e.clamped++
	}
	c.AppendRaw(proto.DateTime64(ms))
}

func (e *events) append(evs []schema.CallEvent, now time.Time) {
	for i := range evs {
		ev := &evs[i]
		e.appendTime(e.emittedAt, ev.EmittedAt)
		e.topic.Append(ev.Topic)
		e.partition.Append(ev.Partition)
		e.offset.Append(ev.Offset)
		e.appendTime(e.ts, ev.Timestamp)
		e.key.AppendBytes(ev.Key)
		e.value.AppendBytes(ev.Value)
		e.archivedAt.Append(now)
	}
}

func (e *events) clampedTimes() int {
	if e == nil {
		return 0
	}
	return e.clamped
}

func (e *events) reset() {
	if e == nil {
		return
	}
	e.emittedAt.Reset()
	e.ts.Reset()
	e.archivedAt.Reset()
	e.topic.Reset()
	e.partition.Reset()
	e.offset.Reset()
	e.key.Reset()
	e.value.Reset()
	e.clamped = 0
}

// AppendEvents adds call records to the archive rows of the batch, copying
// them: Write stores them in table call_events, before the decisions, in
// the same call. Times are stored as Write stores the decisions' (a zero
// time as the epoch, milliseconds, clamped). EmittedAt must be the
// records' window time (schema.WindowTime).
func (b *Batch) AppendEvents(evs []schema.CallEvent) {
	if len(evs) == 0 {
		return
	}
	if b.events == nil {
		b.events = newEvents()
	}
	b.events.append(evs, time.Now())
}

// Events is the number of archive rows appended since the last Reset.
func (b *Batch) Events() int { return b.events.rows() }

// insertEvents writes the batch's archive rows as one INSERT into
// call_events, with the decisions' settings and a token of its own, so a
// retry after the decisions' INSERT failed is dropped by the server.
func (c *ClickHouse) insertEvents(ctx context.Context, b *Batch) error {
	cl, err := c.pool.get(ctx)
	if err != nil {
		return err
	}
	settings := append(insertSettings[:len(insertSettings):len(insertSettings)],
		ch.Setting{Key: "insert_deduplication_token", Value: b.tokenOf(b.events.input)})
	err = cl.Do(ctx, ch.Query{Body: c.archiveSQL, Input: b.events.input, Settings: settings})
	c.pool.put(cl, err)
	return err
}

// CheckArchive verifies that table call_events has the columns the archive
// writes and reads, with their types: a missing or mismatched table is
// ErrSchemaMismatch (permanent), found before the first write.
func (c *ClickHouse) CheckArchive(ctx context.Context) error {
	return checkColumns(ctx, c.conn, c.db, "call_events", archiveColumns)
}

func windowParams(w schema.Window) []proto.Parameter {
	return ch.Parameters(map[string]any{
		"topic": w.Topic,
		"from":  w.From.UTC().UnixMilli(),
		"to":    w.To.UTC().UnixMilli(),
	})
}

// archiveWhere selects a window (schema.Window: the topic's records with
// From <= emitted_at < To); the bounds are compared in milliseconds, the
// table's precision.
const archiveWhere = " WHERE topic = {topic:String} AND emitted_at >= fromUnixTimestamp64Milli({from:Int64}, 'UTC') AND emitted_at < fromUnixTimestamp64Milli({to:Int64}, 'UTC')"

// CountCallEvents returns how many archive rows the window holds, without
// FINAL: a record archived twice (redelivered) counts twice until parts
// merge, so it is an upper bound of what CallEvents reads, and cheap.
func (c *ClickHouse) CountCallEvents(ctx context.Context, w schema.Window) (int64, error) {
	var n proto.ColUInt64
	err := c.do(ctx, ch.Query{
		Body:       "SELECT count() FROM `" + c.db + "`.call_events" + archiveWhere,
		Parameters: windowParams(w),
		Result:     proto.Results{{Name: "count()", Data: &n}},
	})
	if err != nil {
		return 0, fmt.Errorf("sink: count call_events: %w", err)
	}
	if n.Rows() != 1 {
		return 0, errors.New("sink: count call_events: no answer")
	}
	return int64(n.Row(0)), nil
}

// CallEvents reads the archived records of window w, each once (FINAL), in
// blocks of the server's size (max_block_size, 65,409 rows by default),
// and calls fn with each block's records. The records and their bytes are
// fn's to keep: every block is copied out of the connection's buffers.
// The order is the table's (emitted_at, topic, partition, offset) within
// a partition of the table. An error from fn stops the read and is
// returned.
func (c *ClickHouse) CallEvents(ctx context.Context, w schema.Window, fn func([]schema.CallEvent) error) error {
	var (
		emittedAt, archivedAt, ts proto.ColDateTime64
		topic                     = new(proto.ColStr).LowCardinality()
		partition                 proto.ColInt32
		offset                    proto.ColInt64
		key, value                proto.ColStr
	)
	res := proto.Results{
		{Name: "emitted_at", Data: &emittedAt}, {Name: "topic", Data: topic}, {Name: "partition", Data: &partition},
		{Name: "offset", Data: &offset}, {Name: "timestamp", Data: &ts}, {Name: "key", Data: &key},
		{Name: "value", Data: &value}, {Name: "archived_at", Data: &archivedAt},
	}
	err := c.do(ctx, ch.Query{
		Body:       "SELECT " + columnList(archiveColumns) + " FROM `" + c.db + "`.call_events FINAL" + archiveWhere,
		Parameters: windowParams(w),
		Settings:   []ch.Setting{ch.SettingInt("do_not_merge_across_partitions_select_final", 1)},
		Result:     res,
		OnResult: func(ctx context.Context, _ proto.Block) error {
			n := offset.Rows()
			if n == 0 {
				return nil
			}
			// One copy of each block's bytes, which the records slice.
			keys := append([]byte(nil), key.Buf...)
			vals := append([]byte(nil), value.Buf...)
			evs := make([]schema.CallEvent, n)
			for i := range evs {
				k, v := key.Pos[i], value.Pos[i]
				evs[i] = schema.CallEvent{
					EmittedAt: loadTime(emittedAt.Row(i)),
					Topic:     topic.Row(i),
					Partition: partition.Row(i),
					Offset:    offset.Row(i),
					Timestamp: loadTime(ts.Row(i)),
					Key:       keys[k.Start:k.End:k.End],
					Value:     vals[v.Start:v.End:v.End],
				}
			}
			return fn(evs)
		},
	})
	if err != nil {
		return fmt.Errorf("sink: read call_events: %w", err)
	}
	return nil
}

// do runs q on a connection of the pool.
func (c *ClickHouse) do(ctx context.Context, q ch.Query) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return ErrClosed
	}
	cl, err := c.pool.get(ctx)
	if err != nil {
		return err
	}
	err = cl.Do(ctx, q)
	c.pool.put(cl, err)
	return err
}
