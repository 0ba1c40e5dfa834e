package ingest

import (
	"bytes"
	"fmt"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// convertEvent passes a contract event through unchanged once it can be
// routed: its type and event_id must be right. Its record timestamp is its
// own time (emitted_at, observed_at) when the resolver can use it (RFC
// 3339 UTC within schema's range: schema.ParseTime, schema.InTimeRange),
// else, with a warning, the own time of the event before it in its source
// (the log's order places it), or, for a source's first, the time ingest
// read it. The event still goes out, so that the resolver can mark it
// MALFORMED; the re-analysis, which places an event without a usable time
// at its record's timestamp (schema.WindowTime), finds it where the log
// had it; and the partition's timestamps stay in the log's order (a
// record stamped at ingestion among last week's would make every read of
// the partition start there).
func convertEvent(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	typ := o.str("type")
	var kind Kind
	var timeField string
	switch typ {
	case "call":
		kind, timeField = KindCall, "emitted_at"
	case "listing":
		kind, timeField = KindListing, "observed_at"
	default:
		return fmt.Errorf("%w: type is %q, want \"call\" or \"listing\"", ErrBadEvent, typ)
	}
	id := o.str("event_id")
	if id == "" {
		return fmt.Errorf("%w: no event_id", ErrBadEvent)
	}
	ev := Event{Kind: kind, ID: id, Value: append([]byte(nil), bytes.TrimSpace(line)...)}
	if kind == KindCall {
		ev.Key = callKey(o.str("session_id"), o.str("agent_id"))
	} else {
		ev.Key = []byte(schema.ListingKey(o.str("registry"), o.str("server")))
	}
	ts := o.str(timeField)
	if t, err := schema.ParseTime(ts); err == nil && schema.InTimeRange(t) {
		ev.Timestamp = t
	} else {
		ev.Timestamp, ev.borrowed = c.Last, true
		stamp := "the time of the event before it, " + c.Last.Format(TimeLayout)
		if c.Last.IsZero() {
			ev.Timestamp, stamp = time.Now().UTC(), "the time of ingestion (no event before it)"
		}
		fate := "the resolver marks it MALFORMED"
		if kind == KindListing {
			fate = "the registry rejects it"
		}
		c.warn(fmt.Errorf("%s %s: %s %q is not an RFC 3339 UTC time in %s; passed through (%s), its record stamped with %s",
			typ, id, timeField, ts, schema.TimeRange, fate, stamp))
	}
	return emit(ev)
}
