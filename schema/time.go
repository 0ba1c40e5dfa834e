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
//
// It reads the fixed positions itself, where time.Parse cost 95 ns of a
// call's decode (and took one-digit hours and "," before the fraction,
// found by FuzzDecodeCall, so a grammar check came first). It accepts and
// returns exactly what that did (TestParseTimeSameAsTimeParse,
// FuzzParseTime): the fields' ranges, February 29th only in leap years,
// no leap second, fraction digits past the ninth read and dropped.
func ParseTime(s string) (time.Time, error) {
	year, month, day, ok := parseDate(s)
	if !ok {
		return time.Time{}, errNotUTC
	}
	sec, ns, ok := parseClock(s)
	if !ok {
		return time.Time{}, errNotUTC
	}
	// time.Date normalizes a day past the month's end into the next
	// month (February 29th of a common year, April 31st): such a date
	// does not come back as its own day. (It normalizes the time of day
	// in seconds too, which stays within the day.)
	t := time.Date(year, time.Month(month), day, 0, 0, sec, ns, time.UTC)
	if t.Day() != day {
		return time.Time{}, errNotUTC
	}
	return t, nil
}

// parseDate reads the date of a timestamp, s[:10], with its fields'
// ranges (the month's own length is time.Date's to check); s is at least
// as long as the shortest timestamp.
func parseDate(s string) (year, month, day int, ok bool) {
	if len(s) < 20 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, false
	}
	y1, ok1 := digits2(s[0:2])
	y2, ok2 := digits2(s[2:4])
	month, ok3 := digits2(s[5:7])
	day, ok4 := digits2(s[8:10])
	if !(ok1 && ok2 && ok3 && ok4) || month < 1 || month > 12 || day < 1 {
		return 0, 0, 0, false
	}
	return y1*100 + y2, month, day, true
}

// parseClock reads the rest of a timestamp of at least 20 bytes, from
// the 'T' on: the time of day in seconds, the nanoseconds, and the UTC
// offset.
func parseClock(s string) (sec, ns int, ok bool) {
	if s[10]|0x20 != 't' || s[13] != ':' || s[16] != ':' {
		return 0, 0, false
	}
	hour, ok1 := digits2(s[11:13])
	minute, ok2 := digits2(s[14:16])
	second, ok3 := digits2(s[17:19])
	if !(ok1 && ok2 && ok3) || hour > 23 || minute > 59 || second > 59 {
		return 0, 0, false
	}
	rest := s[19:]
	if rest[0] == '.' {
		i := 1
		for ; i < len(rest) && rest[i]-'0' <= 9; i++ {
			if i <= 9 {
				ns = ns*10 + int(rest[i]-'0')
			}
		}
		if i == 1 {
			return 0, 0, false
		}
		for k := i; k <= 9; k++ {
			ns *= 10
		}
		rest = rest[i:]
	}
	if rest != "Z" && rest != "z" && rest != "+00:00" {
		return 0, 0, false
	}
	return hour*3600 + minute*60 + second, ns, true
}

// dayCache is ParseTime for a stream of timestamps that mostly share
// their day (a stream's calls): it keeps the last valid day's text and
// midnight, and for a timestamp of that day adds the time of day to the
// midnight, where ParseTime's time.Date (the calendar) cost a third of
// its time. The day's text decides alone whether the date is valid (the
// time of day cannot move time.Date into another day), so it returns
// what ParseTime returns, for every input (TestParseTimeSameAsTimeParse,
// FuzzParseTime). A nil *dayCache parses every timestamp with ParseTime.
type dayCache struct {
	day      [10]byte
	midnight time.Time
	ok       bool // day and midnight are set
}

func (c *dayCache) parseTime(s string) (time.Time, error) {
	if c == nil {
		return ParseTime(s)
	}
	if c.ok && len(s) >= 20 && s[:10] == string(c.day[:]) {
		sec, ns, ok := parseClock(s)
		if !ok {
			return time.Time{}, errNotUTC
		}
		return c.midnight.Add(time.Duration(sec)*time.Second + time.Duration(ns)), nil
	}
	t, err := ParseTime(s)
	if err != nil {
		return t, err
	}
	sec, ns, _ := parseClock(s)
	copy(c.day[:], s)
	c.midnight, c.ok = t.Add(-time.Duration(sec)*time.Second-time.Duration(ns)), true
	return t, nil
}

// digits2 reads two decimal digits.
func digits2(s string) (int, bool) {
	a, b := s[0]-'0', s[1]-'0'
	return int(a)*10 + int(b), a <= 9 && b <= 9
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
