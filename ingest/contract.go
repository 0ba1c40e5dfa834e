package ingest

import (
	"bytes"
	"fmt"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// convertEvent passes a contract event through unchanged once it can be
// routed: its type and event_id must be right. A bad time is a warning:
// the event still goes out (with no record timestamp) so that the
// resolver can mark it MALFORMED.
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
	ev := Event{Kind: kind, Value: append([]byte(nil), bytes.TrimSpace(line)...)}
	if kind == KindCall {
		ev.Key = callKey(o.str("session_id"), o.str("agent_id"))
	} else {
		ev.Key = []byte(schema.ListingKey(o.str("registry"), o.str("server")))
	}
	ts := o.str(timeField)
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		ev.Timestamp = t
	} else {
		c.warn(fmt.Errorf("%s %s: %s %q is not RFC 3339; passed through without a record timestamp", typ, id, timeField, ts))
	}
	return emit(ev)
}
