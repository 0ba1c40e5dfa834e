package schema

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// parseTimeRef is ParseTime as it was before it read the fields itself
// (1aafffa): the grammar check, then time.Parse. ParseTime must give what
// it gives, for every input.
func parseTimeRef(s string) (time.Time, error) {
	n := len(s)
	if !wellFormedRef(s) {
		return time.Time{}, errNotUTC
	}
	if s[10] == 't' || s[n-1] == 'z' {
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

func wellFormedRef(s string) bool {
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

// sameAsRef fails t unless ParseTime and parseTimeRef agree on s: both
// refuse it, or both return the identical time.Time (==: instant,
// wall/ext encoding and location).
func sameAsRef(t *testing.T, s string) (ok bool) {
	t.Helper()
	got, err := ParseTime(s)
	want, werr := parseTimeRef(s)
	if (err == nil) != (werr == nil) || got != want {
		t.Fatalf("ParseTime(%q) = %v, %v; before: %v, %v", s, got, err, want, werr)
	}
	// The day cache, from the last day it saw (the tests' inputs come in
	// runs of one day) and from this one's, when it is valid.
	for range 2 {
		if got, err := testDays.parseTime(s); (err == nil) != (werr == nil) || got != want {
			t.Fatalf("dayCache.parseTime(%q) = %v, %v (day %q); before: %v, %v", s, got, err, testDays.day[:], want, werr)
		}
	}
	return err == nil
}

// testDays is sameAsRef's day cache.
var testDays dayCache

// TestParseTimeSameAsTimeParse: every combination of the fields' edge
// values (years of the calendar's rules and of the supported range,
// months and days in and out of range, leap days, hours, minutes and
// seconds at and past their limits, fractions of 0 to 14 digits, every
// offset and separator form) parses as time.Parse did, and some of each
// kind parse.
func TestParseTimeSameAsTimeParse(t *testing.T) {
	years := []string{"0000", "0001", "0004", "0100", "0400", "1582", "1899", "1900", "1969", "1970", "1972", "2000", "2024", "2026", "2100", "2262", "2263", "2400", "9999"}
	var months, days []string
	for m := 0; m <= 13; m++ {
		months = append(months, twoDigits(m))
	}
	for d := 0; d <= 32; d++ {
		days = append(days, twoDigits(d))
	}
	valid := 0
	for _, y := range years {
		for _, m := range months {
			for _, d := range days {
				if sameAsRef(t, y+"-"+m+"-"+d+"T12:34:56.789Z") {
					valid++
				}
			}
		}
	}
	// 0000, 0004, 0400, 1972, 2000, 2024 and 2400 are leap years; 0100,
	// 1900 and 2100 are not.
	if want := len(years)*365 + 7; valid != want {
		t.Fatalf("%d of the grid's dates parse, want %d", valid, want)
	}

	seps := []string{"T", "t", " ", "_"}
	clocks := []string{"00:00:00", "23:59:59", "24:00:00", "23:60:00", "23:59:60", "12:00:99", "1:00:00Z", "12:0a:00", "12-00-00", "12:00:0"}
	fracs := []string{"", ".", ".0", ".5", ".12", ".123", ".123456", ".12345678", ".123456789", ".1234567891", ".99999999999999", ",123", ".12a", "..1"}
	offsets := []string{"Z", "z", "+00:00", "-00:00", "+01:00", "+00:01", "+0000", "+00", "Z ", " Z", "ZZ", "", "UTC", "+00:00Z", "Z+00:00"}
	dates := []string{"2026-12-01", "2024-02-29", "2023-02-29", "0000-01-01", "9999-12-31", "1969-12-31", "2026-1-01", "2026/12/01", "20261201"}
	kinds := 0
	for _, d := range dates {
		for _, sep := range seps {
			for _, c := range clocks {
				for _, f := range fracs {
					for _, o := range offsets {
						if sameAsRef(t, d+sep+c+f+o) {
							kinds++
						}
					}
				}
			}
		}
	}
	if kinds == 0 {
		t.Fatal("no combination parsed")
	}

	// Every prefix and every single-byte change of valid timestamps.
	for _, s := range []string{"2026-11-29T09:00:00.000Z", "2024-02-29t23:59:59.123456789z", "0000-03-01T00:00:00+00:00", "1900-01-01T00:00:00.1234567890123Z"} {
		for i := 0; i <= len(s); i++ {
			sameAsRef(t, s[:i])
		}
		for i := 0; i < len(s); i++ {
			for c := 0; c < 256; c++ {
				sameAsRef(t, s[:i]+string([]byte{byte(c)})+s[i+1:])
			}
		}
	}

	// Random valid instants across the four-digit years, each fraction
	// length.
	r := rand.New(rand.NewPCG(1, 2))
	lo, hi := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for i := 0; i < 200_000; i++ {
		ts := time.Unix(lo+r.Int64N(hi-lo), r.Int64N(1e9)).UTC()
		s := ts.Format("2006-01-02T15:04:05") + "." + strings.Repeat("123456789", 2)[:i%12] + "Z"
		if i%12 == 0 {
			s = ts.Format("2006-01-02T15:04:05Z")
		}
		if !sameAsRef(t, s) {
			t.Fatalf("%q refused", s)
		}
	}
}

func twoDigits(n int) string { return string([]byte{byte('0' + n/10), byte('0' + n%10)}) }

// FuzzParseTime: ParseTime and time.Parse behind the grammar check agree
// on any input.
func FuzzParseTime(f *testing.F) {
	for _, s := range []string{"2026-11-29T09:00:00.000Z", "2024-02-29t23:59:59.123456789z", "0000-03-01T00:00:00+00:00", "2026-12-01T00:00:00-00:00", "1900-01-01T00:00:00.1234567890123Z", "2023-02-29T00:00:00Z", "2026-12-01T24:00:00Z", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { sameAsRef(t, s) })
}

var benchTime time.Time

// BenchmarkParseTime: the corpus's timestamp form.
func BenchmarkParseTime(b *testing.B) {
	for b.Loop() {
		benchTime, _ = ParseTime("2026-11-29T09:00:00.001Z")
	}
}
