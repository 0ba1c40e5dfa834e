package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/analytics"
)

// Format is how the report shows a value of a column: rates and shares
// (fractions) as percents with two decimals, *_pct columns (percents) with
// two decimals, other numbers as they are, times in UTC to the second
// (to the millisecond for the session's decisions), NULL as "-".
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
		return x
	}
	return fmt.Sprint(v)
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
