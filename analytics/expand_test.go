package analytics

import (
	"strings"
	"testing"
	"time"
)

// TestExpand: the expansion of the plugin's macros and of Grafana's
// variables, case by case, as the plugin's own tests and sources state
// them (pkg/macros/macros_test.go; CHDatasource.ts applyConditionalAll
// and format; Grafana's sqlstring format).
func TestExpand(t *testing.T) {
	from := time.Date(2014, 11, 12, 11, 45, 26, 371e6, time.UTC)
	to := time.Date(2015, 11, 12, 11, 45, 26, 371e6, time.UTC)
	vars := map[string]Value{
		"reg":   Selected("fleet-a", "fleet-b"),
		"one":   Selected("x"),
		"all":   All("p", "q"),
		"empty": Text(""),
		"sess":  Text("it's \"here\""),
		"plain": Text("abc"),
	}
	p := Params{From: from, To: to, Interval: 30 * time.Second, Vars: vars}
	tests := []struct{ in, want string }{
		{"$__fromTime", "toDateTime(1415792726)"},
		{"$__toTime", "toDateTime(1447328726)"},
		{"$__fromTime_ms", "fromUnixTimestamp64Milli(1415792726371)"},
		{"$__toTime_ms", "fromUnixTimestamp64Milli(1447328726371)"},
		{"$__timeFilter(ts)", "ts >= toDateTime(1415792726) AND ts <= toDateTime(1447328726)"},
		{"$__timeFilter_ms(ts)", "ts >= fromUnixTimestamp64Milli(1415792726371) AND ts <= fromUnixTimestamp64Milli(1447328726371)"},
		{"$__dateFilter(d)", "d >= toDate('2014-11-12') AND d <= toDate('2015-11-12')"},
		{"$__dateTimeFilter(d, t)", "(d >= toDate('2014-11-12') AND d <= toDate('2015-11-12')) AND (t >= toDateTime(1415792726) AND t <= toDateTime(1447328726))"},
		{"$__dt(d,t)", "(d >= toDate('2014-11-12') AND d <= toDate('2015-11-12')) AND (t >= toDateTime(1415792726) AND t <= toDateTime(1447328726))"},
		{"$__timeInterval(t)", "toStartOfInterval(toDateTime(t), INTERVAL 30 second)"},
		{"$__timeInterval_ms(t)", "toStartOfInterval(toDateTime64(t, 3), INTERVAL 30000 millisecond)"},
		{"$__interval_s", "30"},
		{"$__interval_ms", "30000"},
		// The longer name first: $__timeFilter_ms is not $__timeFilter.
		{"$__timeFilter_ms(a) OR $__timeFilter(b)", "a >= fromUnixTimestamp64Milli(1415792726371) AND a <= fromUnixTimestamp64Milli(1447328726371) OR b >= toDateTime(1415792726) AND b <= toDateTime(1447328726)"},
		// Arguments: nested brackets are one argument.
		{"$__timeInterval(toDateTime(x, 'UTC'))", "toStartOfInterval(toDateTime(toDateTime(x, 'UTC')), INTERVAL 30 second)"},
		// Variables: the plugin's format (lists quoted, values raw).
		{"r IN ($reg)", "r IN ('fleet-a','fleet-b')"},
		{"r IN (${reg})", "r IN ('fleet-a','fleet-b')"},
		{"r IN (${one})", "r IN ('x')"},
		{"s = '${plain}'", "s = 'abc'"},
		{"s = ${sess:sqlstring}", `s = 'it''s \"here\"'`},
		{"r IN (${reg:sqlstring})", "r IN ('fleet-a','fleet-b')"},
		{"r IN (${reg:singlequote})", "r IN ('fleet-a','fleet-b')"},
		{"${reg:csv}", "fleet-a,fleet-b"},
		{"r IN (${all:sqlstring})", "r IN ('p','q')"},
		// $__conditionalAll: the condition, or 1=1 for All and for empty.
		{"WHERE $__conditionalAll(r IN (${reg:sqlstring}), $reg)", "WHERE r IN ('fleet-a','fleet-b')"},
		{"WHERE $__conditionalAll(r IN (${all:sqlstring}), $all)", "WHERE 1=1"},
		{"WHERE $__conditionalAll(r IN (${all:sqlstring}), ${all})", "WHERE 1=1"},
		{"WHERE $__conditionalAll(s = '$empty', $empty)", "WHERE 1=1"},
		{"WHERE $__conditionalAll(hasAny(c, [${reg:sqlstring}]), $reg) AND $__conditionalAll(x IN ($all), $all)", "WHERE hasAny(c, ['fleet-a','fleet-b']) AND 1=1"},
		// Names that are neither stay for the backend.
		{"SELECT '$__fromTime'", "SELECT 'toDateTime(1415792726)'"},
	}
	for _, tt := range tests {
		got, err := Expand(tt.in, p)
		if err != nil {
			t.Errorf("Expand(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Expand(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestExpandErrors(t *testing.T) {
	p := Params{From: time.Unix(0, 0), To: time.Unix(60, 0), Vars: map[string]Value{"reg": Selected("a")}}
	for _, tt := range []struct{ in, want string }{
		{"x = $unknown", `"$unknown" is neither`},
		{"$__timeFilterX(t)", `"$__timeFilterX" is neither`},
		{"$__timeFilter(t", "missing close bracket"},
		{"$__timeFilter(a, b)", "expected 1 argument"},
		{"$__conditionalAll(a, b, $reg)", "want 2 arguments"},
		{"$__conditionalAll(a IN ($nope), $nope)", `variable "nope"`},
		{"${reg:percentencode}", "format"},
	} {
		_, err := Expand(tt.in, p)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Expand(%q) = %v, want an error with %q", tt.in, err, tt.want)
		}
	}
	if _, err := Expand("1", Params{From: time.Unix(60, 0), To: time.Unix(0, 0)}); err == nil {
		t.Error("no error for a range that ends before it starts")
	}
}
