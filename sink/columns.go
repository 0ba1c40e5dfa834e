package sink

import (
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// columns are the table of schema.Row's fields (schema.Columns): the
// INSERT's columns, the reads' and the types checked at start.
var columns = schema.Columns()

// columnList is "`event_id`, `verdict`, ..." of cols, for INSERT and
// SELECT.
func columnList(cols []schema.Column) string {
	b := make([]byte, 0, 512)
	for i, c := range cols {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '`')
		b = append(b, c.Name...)
		b = append(b, '`')
	}
	return string(b)
}

// The store's time range is schema's supported range (one home for it),
// the last millisecond before schema.EndTime included. Times outside it
// reach here only on rows decided without a call time check (decided_at,
// passthrough rows).
var (
	epoch   = time.Unix(0, 0).UTC()
	minTime = schema.MinTime
	maxTime = schema.EndTime.Add(-time.Millisecond)
)

// storeMilli is t as stored, in the column's milliseconds since the
// epoch (what ColDateTime64 holds; no time built and divided again): the
// zero time (no usable time) as the Unix epoch, floored to the
// millisecond, clamped into the store's range (clamped reports it).
func storeMilli(t time.Time) (ms int64, clamped bool) {
	switch {
	case t.IsZero():
		return 0, false
	case t.Before(minTime):
		return minMilli, true
	case t.After(maxTime):
		return maxMilli, true
	}
	return t.UnixMilli(), false // floors, as Truncate does
}

var minMilli, maxMilli = minTime.UnixMilli(), maxTime.UnixMilli()

// loadTime is the inverse of storeMilli: the epoch means "no time".
func loadTime(t time.Time) time.Time {
	if t.Equal(epoch) {
		return time.Time{}
	}
	return t.UTC()
}
