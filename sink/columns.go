package sink

import (
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// columns are the table of schema.Row's fields (schema.Columns): the
// INSERT's columns, the reads' and the types checked at start.
var columns = schema.Columns()

// columnList is "event_id, verdict, ..." for INSERT and SELECT.
func columnList() string {
	b := make([]byte, 0, 512)
	for i, c := range columns {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '`')
		b = append(b, c.Name...)
		b = append(b, '`')
	}
	return string(b)
}

// The store's time range: DateTime64's 1900..2299 cut at the end of Go's
// int64 nanoseconds (2262-04-11), which the client converts through.
var (
	epoch   = time.Unix(0, 0).UTC()
	minTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(2262, 4, 10, 23, 59, 59, 999e6, time.UTC)
)

// storeTime is t as stored: the zero time (no usable time) as the Unix
// epoch, milliseconds, clamped into the store's range (clamped reports it).
func storeTime(t time.Time) (_ time.Time, clamped bool) {
	switch {
	case t.IsZero():
		return epoch, false
	case t.Before(minTime):
		return minTime, true
	case t.After(maxTime):
		return maxTime, true
	}
	return t.Truncate(time.Millisecond).UTC(), false
}

// loadTime is the inverse of storeTime: the epoch means "no time".
func loadTime(t time.Time) time.Time {
	if t.Equal(epoch) {
		return time.Time{}
	}
	return t.UTC()
}
