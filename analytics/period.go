package analytics

import "time"

// # Time ranges: one rule
//
// Every query reads its time range as half-open, [from, to): a call
// emitted at to belongs to the next range, so two adjacent ranges (the
// report's range and the period before it) never count one call twice.
// The helpers below are the only place the SQL of a range is written:
//
//   - a rollup's buckets (minute, hour: inBuckets; UTC day: inDays) are
//     those that intersect [from, to): bucket >= the start of from's
//     bucket AND bucket < to. A range that starts or ends inside a bucket
//     is rounded out to whole buckets: such a bucket is counted whole;
//   - a raw time column (inRange) is compared exactly; a state at the end
//     of the range (upTo) is that after every event before to.
//
// Hour rollups cannot say which of an hour's calls came before a
// boundary inside it, and no query reads table decisions over a time
// range (doc.go). So a comparison of adjacent periods (the report's
// headline against the period before) is made exact by aligning both to
// whole buckets of the tier they read (Align, then Previous): each
// bucket is then in exactly one of them, and the rollups' counts are
// those of the raw table in the two ranges. The report says the aligned
// range it counted.

// inBuckets selects the buckets (column col, of the unit's start
// function: toStartOfMinute, toStartOfHour) that intersect the
// dashboard's range [from, to).
func inBuckets(col, startOf string) string {
	return col + " >= " + startOf + "($__fromTime, 'UTC') AND " + col + " < $__toTime"
}

// inDays selects the UTC days (a Date column) that intersect the
// dashboard's range [from, to). (The plugin's $__dateFilter takes the day
// of to as well, even when to is that day's midnight.)
func inDays(col string) string {
	return col + " >= toDate($__fromTime, 'UTC') AND " + col + " < toDate($__toTime - 1, 'UTC') + 1"
}

// inRange selects the values of a DateTime64 column in [from, to), to the
// millisecond. (The plugin's $__timeFilter_ms takes to as well.)
func inRange(col string) string {
	return col + " >= $__fromTime_ms AND " + col + " < $__toTime_ms"
}

// upTo selects the events of a DateTime64 column before the end of the
// range: the state at to.
func upTo(col string) string { return col + " < $__toTime_ms" }

// Tier is the bucket of the rollup tier a range of that length reads:
// a minute up to TierSeconds, an hour beyond.
func Tier(span time.Duration) time.Duration {
	if span <= TierSeconds*time.Second {
		return time.Minute
	}
	return time.Hour
}

// Align returns the range whose counts the rollups give for [from, to),
// exactly: from rounded down and to rounded up to whole buckets of the
// tier it reads (Tier of the aligned length, so that the queries read
// that same tier). Times are in UTC, to the second, as $__fromTime and
// $__toTime are.
func Align(from, to time.Time) (time.Time, time.Time) {
	from, to = from.UTC(), to.UTC()
	a, b := floor(from, time.Minute), ceil(to, time.Minute)
	if Tier(b.Sub(a)) == time.Hour {
		a, b = floor(from, time.Hour), ceil(to, time.Hour)
	}
	return a, b
}

// Previous is the period before an aligned range [from, to): as long,
// ending where it starts, so of the same tier and as aligned.
func Previous(from, to time.Time) (time.Time, time.Time) {
	return from.Add(-to.Sub(from)), from
}

func floor(t time.Time, d time.Duration) time.Time { return t.Truncate(d) }

func ceil(t time.Time, d time.Duration) time.Time {
	if f := t.Truncate(d); !f.Equal(t) {
		return f.Add(d)
	}
	return t
}
