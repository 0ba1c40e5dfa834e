package analytics

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Value is the current value of a dashboard template variable, as Grafana
// holds it: one string (a text box, a single-value query variable), a
// selection of a multi-value variable, or All.
type Value struct {
	values []string
	multi  bool
	all    bool
}

// Text is the value of a single-value variable (a text box).
func Text(s string) Value { return Value{values: []string{s}} }

// Selected is a selection of a multi-value variable (a dropdown with
// several values allowed), even of one value: Grafana hands those over as
// a list.
func Selected(vs ...string) Value { return Value{values: slices.Clone(vs), multi: true} }

// All is the "All" option of a multi-value variable with no custom all
// value; options are every value it offers, which Grafana substitutes
// where $__conditionalAll does not apply.
func All(options ...string) Value {
	return Value{values: slices.Clone(options), multi: true, all: true}
}

// Params are what Grafana and the ClickHouse plugin fill a panel's SQL
// with: the dashboard's time range, the panel's interval and the
// template variables' current values.
type Params struct {
	From, To time.Time
	// Interval is the panel's interval ($__interval_s): the time range
	// over the panel's data points, at least its min interval.
	Interval time.Duration
	Vars     map[string]Value
}

// Expand returns the SQL that the grafana-clickhouse-datasource plugin
// sends to ClickHouse for a panel query, in the plugin's own three steps
// (plugin 4.x, src/data/CHDatasource.ts applyTemplateVariables, then
// pkg/macros/macros.go through grafana-plugin-sdk-go's
// sqlutil.Interpolate):
//
//  1. $__conditionalAll(condition, $var) becomes 1=1 when $var is All or
//     empty, the condition otherwise (processed last to first, as the
//     plugin does; arguments split at top-level commas, no quoting);
//  2. template variables ($var, ${var}, ${var:format}) are replaced by
//     Grafana's template service with the plugin's format: a list becomes
//     'a','b' and a single value is inserted as it is, unless the
//     reference names a format (sqlstring, singlequote, csv, raw);
//  3. the backend macros, longest name first: $__fromTime and $__toTime
//     (toDateTime(unix seconds)), $__fromTime_ms and $__toTime_ms
//     (fromUnixTimestamp64Milli(ms)), $__timeFilter(col),
//     $__timeFilter_ms(col), $__dateFilter(col), $__dateTimeFilter(d, t)
//     and $__dt, $__timeInterval(col), $__timeInterval_ms(col),
//     $__interval_s; and the SDK's defaults $__interval_ms.
//
// A reference left over (an unknown variable or macro) is an error: the
// plugin would send it as it is and ClickHouse would reject the query.
func Expand(sql string, p Params) (string, error) {
	if p.To.Before(p.From) {
		return "", fmt.Errorf("analytics: time range ends (%s) before it starts (%s)", p.To, p.From)
	}
	s, err := conditionalAll(sql, p.Vars)
	if err != nil {
		return "", err
	}
	if s, err = replaceVariables(s, p.Vars); err != nil {
		return "", err
	}
	if s, err = interpolateMacros(s, p); err != nil {
		return "", err
	}
	if m := leftover.FindString(s); m != "" {
		return "", fmt.Errorf("analytics: %q is neither a variable given nor a macro of the plugin", m)
	}
	return s, nil
}

var leftover = regexp.MustCompile(`\$\{?\w+`)

const conditionalAllMacro = "$__conditionalAll("

// conditionalAll is the plugin's applyConditionalAll.
func conditionalAll(sql string, vars map[string]Value) (string, error) {
	for {
		i := strings.LastIndex(sql, conditionalAllMacro)
		if i < 0 {
			return sql, nil
		}
		args, end := macroArgs(sql[i+len(conditionalAllMacro)-1:])
		if len(args) != 2 {
			// The plugin stops here and sends the rest unexpanded.
			return "", fmt.Errorf("analytics: $__conditionalAll at %d: want 2 arguments, have %d", i, len(args))
		}
		phrase := args[0]
		if m := varName.FindStringSubmatch(strings.TrimSpace(args[1])); m != nil {
			name := m[1] + m[2]
			v, ok := vars[name]
			if !ok {
				return "", fmt.Errorf("analytics: $__conditionalAll names variable %q, which has no value", name)
			}
			if v.all || (!v.multi && len(v.values) == 1 && v.values[0] == "") {
				phrase = "1=1"
			}
		}
		sql = sql[:i] + phrase + sql[i+len(conditionalAllMacro)-1+end:]
	}
}

var varName = regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`)

// macroArgs is the plugin's getMacroArgs: s starts at the macro's "(";
// the arguments are split at commas at bracket depth 1 (quotes are not
// special) and returned untrimmed, with the length up to the closing ")".
func macroArgs(s string) ([]string, int) {
	var args []string
	depth, last := 0, 1
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 1 {
				args = append(args, s[last:i])
				last = i + 1
			}
			continue
		default:
			continue
		}
		if depth == 0 {
			return append(args, s[last:i]), i + 1
		}
	}
	return nil, 0
}

// templateRef is Grafana's variable syntax: $name, [[name:fmt]] and
// ${name.path:fmt}.
var templateRef = regexp.MustCompile(`\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?:\.([^:^\}]+))?(?::([^\}]+))?\}`)

// replaceVariables is Grafana's templateSrv.replace with the plugin's
// format function; names that are not variables (the macros) are left.
func replaceVariables(sql string, vars map[string]Value) (string, error) {
	var err error
	out := templateRef.ReplaceAllStringFunc(sql, func(ref string) string {
		m := templateRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[4]
		format := m[3] + m[6]
		v, ok := vars[name]
		if !ok {
			return ref
		}
		s, ferr := formatValue(v, format)
		if ferr != nil && err == nil {
			err = fmt.Errorf("analytics: %s: %w", ref, ferr)
		}
		return s
	})
	return out, err
}

func formatValue(v Value, format string) (string, error) {
	switch format {
	case "":
		// The plugin's format: a list quoted and joined, anything else raw.
		if v.multi {
			return "'" + strings.Join(v.values, "','") + "'", nil
		}
		return v.one(), nil
	case "raw":
		return strings.Join(v.values, ","), nil
	case "csv":
		return strings.Join(v.values, ","), nil
	case "singlequote":
		return quoteEach(v.values, func(s string) string { return strings.ReplaceAll(s, "'", `\'`) }), nil
	case "sqlstring":
		return quoteEach(v.values, func(s string) string {
			return strings.ReplaceAll(strings.ReplaceAll(s, "'", "''"), `"`, `\"`)
		}), nil
	}
	return "", fmt.Errorf("format %q is not one the dashboards use", format)
}

func (v Value) one() string {
	if len(v.values) == 0 {
		return ""
	}
	return v.values[0]
}

func quoteEach(vs []string, escape func(string) string) string {
	if len(vs) == 0 {
		vs = []string{""}
	}
	q := make([]string, len(vs))
	for i, s := range vs {
		q[i] = "'" + escape(s) + "'"
	}
	return strings.Join(q, ",")
}

type macroFunc func(p Params, args []string) (string, error)

func timeToDateTime(t time.Time) string { return fmt.Sprintf("toDateTime(%d)", t.Unix()) }
func timeToDateTime64(t time.Time) string {
	return fmt.Sprintf("fromUnixTimestamp64Milli(%d)", t.UnixMilli())
}
func timeToDate(t time.Time) string { return fmt.Sprintf("toDate('%s')", t.Format("2006-01-02")) }

func oneArg(f func(p Params, col string) string) macroFunc {
	return func(p Params, args []string) (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("expected 1 argument, received %d", len(args))
		}
		return f(p, args[0]), nil
	}
}

func intervalSeconds(p Params) int { return int(math.Max(p.Interval.Seconds(), 1)) }

// macros are the plugin's (pkg/macros) and the SDK's defaults the
// dashboards may use.
var macros = map[string]macroFunc{
	"fromTime":    func(p Params, _ []string) (string, error) { return timeToDateTime(p.From), nil },
	"toTime":      func(p Params, _ []string) (string, error) { return timeToDateTime(p.To), nil },
	"fromTime_ms": func(p Params, _ []string) (string, error) { return timeToDateTime64(p.From), nil },
	"toTime_ms":   func(p Params, _ []string) (string, error) { return timeToDateTime64(p.To), nil },
	"timeFilter": oneArg(func(p Params, c string) string {
		return fmt.Sprintf("%s >= %s AND %s <= %s", c, timeToDateTime(p.From), c, timeToDateTime(p.To))
	}),
	"timeFilter_ms": oneArg(func(p Params, c string) string {
		return fmt.Sprintf("%s >= %s AND %s <= %s", c, timeToDateTime64(p.From), c, timeToDateTime64(p.To))
	}),
	"dateFilter": oneArg(func(p Params, c string) string {
		return fmt.Sprintf("%s >= %s AND %s <= %s", c, timeToDate(p.From), c, timeToDate(p.To))
	}),
	"timeInterval": oneArg(func(p Params, c string) string {
		return fmt.Sprintf("toStartOfInterval(toDateTime(%s), INTERVAL %d second)", c, intervalSeconds(p))
	}),
	"timeInterval_ms": oneArg(func(p Params, c string) string {
		ms := int(math.Max(float64(p.Interval.Milliseconds()), 1))
		return fmt.Sprintf("toStartOfInterval(toDateTime64(%s, 3), INTERVAL %d millisecond)", c, ms)
	}),
	"interval_s": func(p Params, _ []string) (string, error) { return strconv.Itoa(intervalSeconds(p)), nil },
	"interval_ms": func(p Params, _ []string) (string, error) {
		return strconv.FormatInt(p.Interval.Milliseconds(), 10), nil
	},
	"dateTimeFilter": dateTimeFilter,
	"dt":             dateTimeFilter,
}

func dateTimeFilter(p Params, args []string) (string, error) {
	if len(args) != 2 {
		return "", fmt.Errorf("expected 2 arguments, received %d", len(args))
	}
	return fmt.Sprintf("(%s >= %s AND %s <= %s) AND (%s >= %s AND %s <= %s)",
		args[0], timeToDate(p.From), args[0], timeToDate(p.To),
		args[1], timeToDateTime(p.From), args[1], timeToDateTime(p.To)), nil
}

// macroNames are the macros longest first, as sqlutil.Interpolate applies
// them (a shorter name must not eat a longer one's prefix).
var macroNames = func() []string {
	names := make([]string, 0, len(macros))
	for n := range macros {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if len(a) != len(b) {
			return len(b) - len(a)
		}
		return strings.Compare(a, b)
	})
	return names
}()

var macroRefs = func() map[string]*regexp.Regexp {
	m := map[string]*regexp.Regexp{}
	for _, n := range macroNames {
		m[n] = regexp.MustCompile(`\$__` + n + `\b`)
	}
	return m
}()

// interpolateMacros is sqlutil.Interpolate with the plugin's macros: each
// occurrence with its bracketed arguments (split at top-level commas,
// trimmed) is replaced by the macro's text, every identical occurrence at
// once.
func interpolateMacros(sql string, p Params) (string, error) {
	for _, name := range macroNames {
		locs := macroRefs[name].FindAllStringIndex(sql, -1)
		type match struct {
			full string
			args []string
		}
		var ms []match
		for _, loc := range locs {
			args, n := sdkArgs(sql[loc[1]:])
			if n < 0 {
				return "", errors.New("analytics: failed to parse macro arguments (missing close bracket?)")
			}
			ms = append(ms, match{sql[loc[0] : loc[1]+n], args})
		}
		for _, m := range ms {
			res, err := macros[name](p, m.args)
			if err != nil {
				return "", fmt.Errorf("analytics: $__%s: %w", name, err)
			}
			sql = strings.ReplaceAll(sql, m.full, res)
		}
	}
	return sql, nil
}

// sdkArgs is sqlutil's parseArgs: a bracketed argument list at the start
// of s, its arguments trimmed, and its length; no list is (nil, 0), an
// unclosed one (nil, -1).
func sdkArgs(s string) ([]string, int) {
	if !strings.HasPrefix(s, "(") {
		return nil, 0
	}
	var args []string
	depth := 0
	var arg strings.Builder
	for i, r := range s {
		switch r {
		case '(':
			depth++
			if depth == 1 {
				continue
			}
		case ')':
			depth--
			if depth == 0 {
				return append(args, strings.TrimSpace(arg.String())), i + 1
			}
		case ',':
			if depth == 1 {
				args = append(args, strings.TrimSpace(arg.String()))
				arg.Reset()
				continue
			}
		}
		arg.WriteRune(r)
	}
	return nil, -1
}
