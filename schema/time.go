package schema

import (
	"errors"
	"time"
)

var errNotUTC = errors.New("not an RFC 3339 UTC timestamp")

// ParseTime parses an RFC 3339 timestamp in UTC: the offset must be "Z" (or
// "z", or "+00:00", which RFC 3339 defines as the same instant). "-00:00"
// means "offset unknown" in RFC 3339 and is rejected, as is any other
// offset: event time must be unambiguous.
func ParseTime(s string) (time.Time, error) {
	n := len(s)
	if !wellFormed(s) {
		return time.Time{}, errNotUTC
	}
	if s[10] == 't' || s[n-1] == 'z' { // RFC 3339 allows lower case; Go does not
		b := []byte(s)
		b[10] = 'T'
		if b[n-1] == 'z' {
			b[n-1] = 'Z'
		}
		s = string(b)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errNotUTC
	}
	return t.UTC(), nil
}

// wellFormed checks the RFC 3339 grammar exactly, with a UTC offset:
// time.Parse alone also accepts one-digit hours and "," before the
// fraction (found by FuzzDecodeCall).
func wellFormed(s string) bool {
	const layout = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(layout)+1 {
		return false
	}
	for i := 0; i < len(layout); i++ {
		c := s[i]
		switch layout[i] {
		case 'd':
			if c < '0' || c > '9' {
				return false
			}
		case 'T':
			if c != 'T' && c != 't' {
				return false
			}
		default:
			if c != layout[i] {
				return false
			}
		}
	}
	rest := s[len(layout):]
	if rest[0] == '.' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 1 {
			return false
		}
		rest = rest[i:]
	}
	return rest == "Z" || rest == "z" || rest == "+00:00"
}

// AppendTime appends t as RFC 3339 UTC with millisecond precision, the
// precision of the wire contract and of ClickHouse DateTime64(3).
func AppendTime(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
}

// The supported range of event times (wire contract rule 10): from
// MinTime up to, not including, EndTime. It is the store's range
// (DateTime64(3): 1900 to 2299) cut before the end of Go's int64
// nanoseconds (2262-04-11T23:47:16Z), through which times are compared
// and sent to the store. An event outside it is MALFORMED with a reason
// that names the range, never decided against the wrong version.
var (
	MinTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	EndTime = time.Date(2262, 4, 11, 0, 0, 0, 0, time.UTC)
)

// TimeRange names the supported range in MALFORMED reasons.
const TimeRange = "[1900-01-01T00:00:00Z, 2262-04-11T00:00:00Z)"

// InTimeRange reports whether t is within the supported range.
func InTimeRange(t time.Time) bool { return !t.Before(MinTime) && t.Before(EndTime) }
