package analytics

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Result is a query's answer: column names and rows of values, each a
// string, int64, uint64, float64, bool, time.Time, []string or nil (NULL,
// or a float that is not a number).
type Result struct {
	Columns []string
	Rows    [][]any
}

// Col returns the index of the named column, or -1.
func (r *Result) Col(name string) int {
	for i, c := range r.Columns {
		if c == name {
			return i
		}
	}
	return -1
}

// MaxRows bounds what Run reads of one result: the dashboards' queries
// aggregate or LIMIT, and the report prints them.
const MaxRows = 100_000

// Run expands q's SQL with p (Expand) and runs it on conn, whose default
// database holds the tables. ctx bounds the query.
func Run(ctx context.Context, conn driver.Conn, q Query, p Params) (*Result, error) {
	sql, err := Expand(q.SQL, p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q.ID, err)
	}
	res, err := RunSQL(ctx, conn, sql)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", q.ID, err)
	}
	return res, nil
}

// RunSQL runs an expanded query.
func RunSQL(ctx context.Context, conn driver.Conn, sql string) (*Result, error) {
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		return nil, fmt.Errorf("analytics: query: %w", err)
	}
	defer rows.Close()
	cts := rows.ColumnTypes()
	res := &Result{Columns: rows.Columns()}
	for rows.Next() {
		if len(res.Rows) == MaxRows {
			return nil, fmt.Errorf("analytics: more than %d rows", MaxRows)
		}
		dest := make([]any, len(cts))
		for i, ct := range cts {
			dest[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("analytics: scan: %w", err)
		}
		row := make([]any, len(dest))
		for i, d := range dest {
			row[i] = normalize(reflect.ValueOf(d).Elem())
		}
		res.Rows = append(res.Rows, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("analytics: query: %w", err)
	}
	return res, nil
}

// normalize maps a scanned value onto the few types of Result.
func normalize(v reflect.Value) any {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case time.Time:
		return x.UTC()
	case string:
		return x
	case bool:
		return x
	case []string:
		return x
	}
	switch v.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		f := v.Float()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		return f
	case reflect.String:
		return v.String()
	}
	return fmt.Sprint(v.Interface())
}

// Float is v as a number, for the numeric types of Result; ok is false
// for anything else (NULL included).
func Float(v any) (f float64, ok bool) {
	switch x := v.(type) {
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

// Select returns r with only the named columns, in that order (those r
// lacks are left out).
func (r *Result) Select(cols ...string) *Result {
	if r == nil {
		return nil
	}
	var idx []int
	out := &Result{}
	for _, c := range cols {
		if i := r.Col(c); i >= 0 {
			idx = append(idx, i)
			out.Columns = append(out.Columns, c)
		}
	}
	for _, row := range r.Rows {
		sel := make([]any, len(idx))
		for j, i := range idx {
			sel[j] = row[i]
		}
		out.Rows = append(out.Rows, sel)
	}
	return out
}
