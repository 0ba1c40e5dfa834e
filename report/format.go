package report

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/analytics"
)

// Format is how the report shows a value of a column: rates and shares
// (fractions) as percents with two decimals, *_pct columns (percents) with
// two decimals, other numbers as they are, times in UTC to the second
// (to the millisecond for the session's decisions), NULL as "-", an
// empty model, surface, agent, registry or session as "(none)".
func Format(col string, v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case float64:
		switch {
		case strings.HasSuffix(col, "_rate") || strings.HasSuffix(col, "_share"):
			return strconv.FormatFloat(100*x, 'f', 2, 64) + "%"
		case strings.HasSuffix(col, "_pct"):
			return strconv.FormatFloat(x, 'f', 2, 64) + "%"
		}
		return strconv.FormatFloat(x, 'g', 6, 64)
	case int64, uint64:
		return fmt.Sprint(x)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case time.Time:
		if col == "time" && x.Nanosecond() != 0 {
			return x.UTC().Format("2006-01-02 15:04:05.000")
		}
		return x.UTC().Format("2006-01-02 15:04:05")
	case []string:
		return strings.Join(x, " ")
	case string:
		if x == "" && slices.Contains(named, col) {
			// A MALFORMED call's: it has none that can be trusted.
			return "(none)"
		}
		return x
	}
	return fmt.Sprint(v)
}

// named are the columns whose empty value is shown as (none).
var named = []string{"model", "surface", "agent", "registry", "session"}

// Grouped is Format with an integer's thousands separated by commas
// (12,000), for the headline.
func Grouped(col string, v any) string {
	s := Format(col, v)
	if _, isInt := v.(uint64); !isInt {
		if _, isInt = v.(int64); !isInt {
			return s
		}
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// cellAt is the value of column col of row i, formatted; "" when absent.
func cellAt(r *analytics.Result, i int, col string) string {
	if r == nil {
		return ""
	}
	c := r.Col(col)
	if c < 0 || i >= len(r.Rows) {
		return ""
	}
	return Format(col, r.Rows[i][c])
}

// num is the value of column col of the first row as a number.
func num(r *analytics.Result, col string) (float64, bool) {
	if r == nil {
		return 0, false
	}
	c := r.Col(col)
	if c < 0 || len(r.Rows) == 0 {
		return 0, false
	}
	return analytics.Float(r.Rows[0][c])
}
