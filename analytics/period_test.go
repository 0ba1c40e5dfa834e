package analytics

import (
	"testing"
	"time"
)

// TestAlign: a range is rounded out to whole buckets of the tier its
// aligned length reads (the tier the queries then choose), and the
// period before is as long and ends where the range starts.
func TestAlign(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		from, to, wantFrom, wantTo string
	}{
		{"2026-03-03T12:07:30Z", "2026-03-03T18:07:30Z", "2026-03-03T12:07:00Z", "2026-03-03T18:08:00Z"},
		{"2026-03-03T12:07:00Z", "2026-03-03T18:07:00Z", "2026-03-03T12:07:00Z", "2026-03-03T18:07:00Z"},
		{"2026-03-03T12:07:00.5Z", "2026-03-03T12:07:00.7Z", "2026-03-03T12:07:00Z", "2026-03-03T12:08:00Z"},
		// Two days whole: still the minute tier; a second more reads hours.
		{"2026-03-01T12:07:00Z", "2026-03-03T12:07:00Z", "2026-03-01T12:07:00Z", "2026-03-03T12:07:00Z"},
		{"2026-03-01T12:07:00Z", "2026-03-03T12:07:01Z", "2026-03-01T12:00:00Z", "2026-03-03T13:00:00Z"},
		{"2026-01-15T10:20:30Z", "2026-12-11T15:37:30Z", "2026-01-15T10:00:00Z", "2026-12-11T16:00:00Z"},
	} {
		f, to := Align(at(tc.from), at(tc.to))
		if !f.Equal(at(tc.wantFrom)) || !to.Equal(at(tc.wantTo)) {
			t.Errorf("Align(%s, %s) = %s, %s; want %s, %s", tc.from, tc.to, f, to, tc.wantFrom, tc.wantTo)
		}
		if b := Tier(to.Sub(f)); f.Truncate(b) != f || to.Truncate(b) != to {
			t.Errorf("Align(%s, %s) = %s, %s: not whole %s of its tier", tc.from, tc.to, f, to, b)
		}
		pf, pt := Previous(f, to)
		if !pt.Equal(f) || pt.Sub(pf) != to.Sub(f) || Tier(pt.Sub(pf)) != Tier(to.Sub(f)) {
			t.Errorf("Previous(%s, %s) = %s, %s", f, to, pf, pt)
		}
	}
}
