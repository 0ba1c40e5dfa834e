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
	if n < len("2006-01-02T15:04:05Z") || (s[10] != 'T' && s[10] != 't') {
		return time.Time{}, errNotUTC
	}
	switch {
	case s[n-1] == 'Z' || s[n-1] == 'z':
	case n > 6 && s[n-6:] == "+00:00":
	default:
		return time.Time{}, errNotUTC
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errNotUTC
	}
	return t.UTC(), nil
}

// AppendTime appends t as RFC 3339 UTC with millisecond precision, the
// precision of the wire contract and of ClickHouse DateTime64(3).
func AppendTime(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
}
