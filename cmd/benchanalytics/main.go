// Command bench generates synthetic decisions in ClickHouse with INSERT
// ... SELECT FROM numbers() (gen.sql: a fleet of 20 registries over 58
// days), through the real schema and its materialized views, then runs
// every ClickHouse query of the dashboards (package analytics) in the
// dashboard states a user opens, each several times, and prints a
// markdown table: wall time (median and worst), the engine's CPU time,
// the rows read and returned.
//
//	go run ./cmd/benchanalytics --rows 10000000 --dir /tmp/bench10m
//	go run ./cmd/benchanalytics --rows 100000000 --dir /tmp/bench100m
//	go run ./cmd/benchanalytics --dir /tmp/bench10m --generate=false   # the queries again
//
// With --dir it runs its own engine (package chengine) with its data
// there, and measures that process's CPU; with --clickhouse it uses a
// running server (no CPU figures).
package main

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/sink"
)

//go:embed gen.sql
var genSQL string

//go:embed changes.sql
var changesSQL string

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type config struct {
	rows, chunk   uint64
	days          uint
	end           time.Time
	dir, addr, db string
	generate      bool
	views         bool
	queries       bool
	repeat        int
	out           string
}

func run() error {
	var c config
	var end string
	flag.Uint64Var(&c.rows, "rows", 10_000_000, "decisions to generate")
	flag.Uint64Var(&c.chunk, "chunk", 10_000_000, "decisions per INSERT")
	flag.UintVar(&c.days, "days", 58, "days the decisions span, ending at --end")
	flag.StringVar(&end, "end", "2026-11-29 00:00:00", "end of the generated span (UTC); the dashboard ranges end there")
	flag.StringVar(&c.dir, "dir", "", "run an engine with its data in `DIR` (reused by --generate=false)")
	flag.StringVar(&c.addr, "clickhouse", "", "use the ClickHouse server at `ADDR` instead of running an engine")
	flag.StringVar(&c.db, "database", "bench", "`database`")
	flag.BoolVar(&c.generate, "generate", true, "generate the decisions (false: query what the database holds)")
	flag.BoolVar(&c.views, "views", true, "keep the analytics' materialized views (false: drop them before generating, to measure what they cost the inserts)")
	flag.BoolVar(&c.queries, "queries", true, "run the queries after generating")
	flag.IntVar(&c.repeat, "repeat", 5, "runs of each query")
	flag.StringVar(&c.out, "out", "", "also write the table to `FILE`")
	flag.Parse()
	var err error
	if c.end, err = time.Parse(time.DateTime, end); err != nil {
		return fmt.Errorf("--end: %w", err)
	}
	if (c.dir == "") == (c.addr == "") {
		return errors.New("give --dir (run an engine) or --clickhouse (use a server)")
	}
	ctx := context.Background()
	cpu := func() time.Duration { return -1 }
	if c.dir != "" {
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return err
		}
		srv, err := chengine.Start(ctx, chengine.Options{Dir: c.dir, StartTimeout: 5 * time.Minute,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
		if err != nil {
			return err
		}
		defer srv.Stop()
		c.addr = srv.Addr()
		cpu = childrenCPU
	}
	cfg := sink.DefaultConfig()
	cfg.Addr, cfg.Database = []string{c.addr}, c.db
	cfg.ReadTimeout = time.Hour
	admin, err := cfg.Open(ctx)
	if err != nil {
		return err
	}
	defer admin.Close()
	if c.generate {
		if err := generate(ctx, admin, c, cpu); err != nil {
			return err
		}
	}
	if !c.queries {
		return nil
	}
	if err := settle(ctx, admin, c.db); err != nil {
		return err
	}
	conn, err := cfg.OpenIn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	table, err := measure(ctx, conn, c, cpu)
	if err != nil {
		return err
	}
	fmt.Print(table)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(table), 0o644)
	}
	return nil
}

// generate migrates the database and fills it: the decisions in chunks,
// then the stream's decisions of the call-path calls, then a registry
// history.
func generate(ctx context.Context, conn driver.Conn, c config, cpu func() time.Duration) error {
	if _, err := sink.Migrate(ctx, conn, c.db, nil); err != nil {
		return err
	}
	if !c.views {
		for _, v := range analyticsViews {
			if err := conn.Exec(ctx, "DROP VIEW IF EXISTS `"+c.db+"`."+v); err != nil {
				return err
			}
		}
	}
	q := strings.ReplaceAll(genSQL, "{db}", "`"+c.db+"`")
	t0, c0 := time.Now(), cpu()
	for pair := range 2 {
		for from := uint64(0); from < c.rows; from += c.chunk {
			n := min(c.chunk, c.rows-from)
			p := clickhouse.Parameters{"from": strconv.FormatUint(from, 10), "n": strconv.FormatUint(n, 10),
				"total": strconv.FormatUint(c.rows, 10), "days": strconv.Itoa(int(c.days)),
				"end": c.end.Format(time.DateTime), "pair": strconv.Itoa(pair)}
			qctx := clickhouse.Context(ctx, clickhouse.WithParameters(p))
			t1, c1 := time.Now(), cpu()
			if err := conn.Exec(qctx, q); err != nil {
				return fmt.Errorf("generate rows %d..%d: %w", from, from+n, err)
			}
			fmt.Fprintf(os.Stderr, "generated %s rows %d..%d in %s (engine CPU %s)\n",
				map[int]string{0: "decision", 1: "stream pair"}[pair], from, from+n, time.Since(t1).Round(time.Second), cpuSince(cpu, c1))
		}
	}
	changes := strings.ReplaceAll(changesSQL, "{db}", "`"+c.db+"`")
	p := clickhouse.Parameters{"end": c.end.Format(time.DateTime), "days": strconv.Itoa(int(c.days))}
	if err := conn.Exec(clickhouse.Context(ctx, clickhouse.WithParameters(p)), changes); err != nil {
		return fmt.Errorf("generate registry changes: %w", err)
	}
	fmt.Fprintf(os.Stderr, "generated %d decisions in %s (engine CPU %s)\n", c.rows, time.Since(t0).Round(time.Second), cpuSince(cpu, c0))
	return nil
}

func cpuSince(cpu func() time.Duration, c0 time.Duration) string {
	if c0 < 0 {
		return "-"
	}
	return (cpu() - c0).Round(time.Millisecond).String()
}

// analyticsViews are the materialized views of migration 0007's tables:
// what --views=false drops. decisions_by_minute (0002) stays fed, and so
// does the grouping it reads since 0010 (decisions_groups_mv).
var analyticsViews = []string{"decisions_rollup_minute_mv", "decisions_rollup_hour_mv", "decisions_by_tool_day_mv",
	"fabricated_names_day_mv", "registry_versions_seen_mv", "sessions_by_hour_mv", "call_path_decisions_mv"}

// settle waits until the engine has no merge running in the database (at
// most 30 minutes), so that the queries meet the parts a running system
// would have, and prints the tables' sizes.
func settle(ctx context.Context, conn driver.Conn, db string) error {
	deadline := time.Now().Add(30 * time.Minute)
	for time.Now().Before(deadline) {
		var n uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.merges WHERE database = ?", db).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Second)
	}
	rows, err := conn.Query(ctx, `SELECT table, sum(rows), sum(bytes_on_disk), count() FROM system.parts
WHERE active AND database = ? GROUP BY table ORDER BY table`, db)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Fprintln(os.Stderr, "table                      rows         on disk   parts")
	for rows.Next() {
		var table string
		var n, bytes, parts uint64
		if err := rows.Scan(&table, &n, &bytes, &parts); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%-24s %12d %9.1f MB %5d\n", table, n, float64(bytes)/1e6, parts)
	}
	return rows.Err()
}

// state is a dashboard state: a time range ending at the data's end and
// the variables' values.
type state struct {
	name  string
	span  time.Duration
	vars  map[string]analytics.Value
	query []analytics.Query
}

func measure(ctx context.Context, conn driver.Conn, c config, cpu func() time.Duration) (string, error) {
	all := func(kv ...string) map[string]analytics.Value {
		m := map[string]analytics.Value{
			analytics.VarAnalysis: analytics.Text("live"), analytics.VarRegistry: analytics.All(), analytics.VarModel: analytics.All(),
			analytics.VarSurface: analytics.All(), analytics.VarSource: analytics.All(), analytics.VarClass: analytics.All(),
			analytics.VarAgent: analytics.All(), analytics.VarSession: analytics.Text(""),
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i] == analytics.VarSession || kv[i] == analytics.VarRegistry && kv[i+1] == "fleet-00" {
				m[kv[i]] = analytics.Text(kv[i+1])
			} else {
				m[kv[i]] = analytics.Selected(kv[i+1])
			}
		}
		return m
	}
	var vars []analytics.Query
	for _, name := range []string{analytics.VarAnalysis, analytics.VarRegistry, analytics.VarModel, analytics.VarSurface, analytics.VarSource, analytics.VarAgent, analytics.VarSession} {
		vars = append(vars, analytics.Query{ID: "var." + name, SQL: analytics.Variables()[name].SQL})
	}
	vars = append(vars, analytics.Query{ID: "var.mcp_registry", SQL: analytics.MCPRegistry().SQL})
	day := 24 * time.Hour
	// A session of the last six hours (sessions are 20 consecutive rows).
	session := fmt.Sprintf("s-%d", (c.rows-c.rows/(uint64(c.days)*24*10))/20)
	fleet := append(analytics.Fleet(), analytics.ChangeAnnotations())
	states := []state{
		{"fleet, 6 h", 6 * time.Hour, all(), fleet},
		{"fleet, 7 days", 7 * day, all(), fleet},
		{"fleet, 30 days", 30 * day, all(), fleet},
		{fmt.Sprintf("fleet, %d days", c.days), time.Duration(c.days) * day, all(), fleet},
		// gen.sql draws a session's registry and model from one hash:
		// registry 7 (hash = 7 mod 20) goes with models 3, 7 and 11.
		{"fleet, 30 days, one registry and model", 30 * day, all(analytics.VarRegistry, "fleet-07", analytics.VarModel, "claude-sonnet-4"), analytics.Fleet()},
		{"MCP servers, 7 days", 7 * day, all(analytics.VarRegistry, "fleet-00"), analytics.Servers()},
		{"MCP servers, 30 days", 30 * day, all(analytics.VarRegistry, "fleet-00"), analytics.Servers()},
		{"incident, 6 h, a session", 6 * time.Hour, all(analytics.VarSession, session), analytics.Incident()},
		{"incident, 7 days, a session", 7 * day, all(analytics.VarSession, session), analytics.Incident()},
		{"report, 7 days", 7 * day, all(), analytics.Report()},
		{"variables, 7 days", 7 * day, all(), vars},
		{"variables, 30 days", 30 * day, all(), vars},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| dashboard state | query | median ms | worst ms | engine CPU ms | rows read | rows out |\n|---|---|---:|---:|---:|---:|---:|\n")
	for _, s := range states {
		p := analytics.Params{From: c.end.Add(-s.span), To: c.end, Interval: max(time.Minute, s.span/200), Vars: s.vars}
		for _, q := range s.query {
			sql, err := analytics.Expand(q.SQL, p)
			if err != nil {
				return "", fmt.Errorf("%s: %w", q.ID, err)
			}
			var walls, cpus []time.Duration
			var read, out uint64
			for range c.repeat {
				read = 0
				qctx := clickhouse.Context(ctx, clickhouse.WithProgress(func(pr *clickhouse.Progress) { read += pr.Rows }))
				c0, t0 := cpu(), time.Now()
				res, err := analytics.RunSQL(qctx, conn, sql)
				walls = append(walls, time.Since(t0))
				if c0 >= 0 {
					cpus = append(cpus, cpu()-c0)
				}
				if err != nil {
					return "", fmt.Errorf("%s in %s: %w", q.ID, s.name, err)
				}
				out = uint64(len(res.Rows))
			}
			slices.Sort(walls)
			slices.Sort(cpus)
			cpuText := "-"
			if len(cpus) > 0 {
				cpuText = ms(cpus[len(cpus)/2])
			}
			line := fmt.Sprintf("| %s | %s | %s | %s | %s | %d | %d |\n", s.name, q.ID, ms(walls[len(walls)/2]), ms(walls[len(walls)-1]), cpuText, read, out)
			b.WriteString(line)
			fmt.Fprint(os.Stderr, line)
		}
	}
	return b.String(), nil
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}

// childrenCPU is the CPU time (user and system) of this process's
// children: the engine.
func childrenCPU() time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	var ticks uint64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, pid := range strings.Fields(string(b)) {
			stat, err := os.ReadFile("/proc/" + pid + "/stat")
			if err != nil {
				continue
			}
			// Fields after the command's closing parenthesis: utime and
			// stime are the 12th and 13th.
			s := string(stat)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
			if len(f) > 12 {
				u, _ := strconv.ParseUint(f[11], 10, 64)
				st, _ := strconv.ParseUint(f[12], 10, 64)
				ticks += u + st
			}
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
