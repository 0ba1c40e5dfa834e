package schema

import "time"

// CallEvent is a record of the calls topic as it was produced: what the
// archive keeps (table call_events, written by `resolverd run
// --archive-calls`) and what the re-analysis decides again, from Kafka or
// from the archive.
type CallEvent struct {
	// EmittedAt is when the call counts as emitted (WindowTime): set by
	// the archive's writer, and read back from it; zero in a record read
	// from Kafka, whose time is known once it is decoded.
	EmittedAt time.Time
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time // the record's
	Key       []byte
	Value     []byte // the event, as produced
}

// WindowTime is when a call record counts as emitted, for the windows of
// the re-analysis and of the archive: the call's emitted_at as its row
// holds it (Row.FillCall keeps it even for an event that fails to decode
// after it), or, for an event without a usable emitted_at, the record's
// timestamp (the producer's clock; ingest stamps records with emitted_at).
func WindowTime(emittedAt, recordTime time.Time) time.Time {
	if emittedAt.IsZero() {
		return recordTime
	}
	return emittedAt
}

// Window is the calls of one topic emitted in [From, To): the records whose
// window time (WindowTime) is at or after From and before To.
type Window struct {
	Topic    string
	From, To time.Time
}

// Contains reports whether a record of window time t is in w.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.From) && t.Before(w.To) }
