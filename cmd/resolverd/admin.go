package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolaudit/toolaudit/embedded"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/report"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

func migrateCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd migrate", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var ch chFlags
	ch.register(fs)
	var cf clusterFlags
	cf.register(fs)
	printDDL := fs.Bool("print", false, "with --cluster: print the statements a fresh database gets, connect to nothing")
	return &ffcli.Command{
		Name:       "migrate",
		ShortUsage: "resolverd migrate [--clickhouse ADDR] [--database DB] [--cluster NAME [--print]]",
		ShortHelp:  "create or upgrade the ClickHouse schema",
		LongHelp: `Creates the database if absent and applies the schema migrations
(schema/ddl) that it has not applied yet, recording each in table
schema_migrations. Idempotent: a second run applies nothing. Refuses to
go on when an applied migration's text has changed since.

--cluster NAME lays the schema out on the ClickHouse cluster NAME of the
servers' remote_servers: every statement ON CLUSTER, the tables
Replicated per shard (decisions_local, decisions_by_minute_local,
schema_migrations on every server) and Distributed tables decisions
(sharded by cityHash64(call_key), so a redelivered call meets its first
decision on its shard) and decisions_by_minute over them. It needs
ClickHouse Keeper, macros {shard} and {replica} on every server and
internal_replication=true on the cluster's shards. --print shows the
statements. --cluster-replicated=false makes plain shards without
replicas instead (no Keeper; run migrate against every server). Give
resolverd run the same --cluster flags: a database laid out for one
server refuses the other layout's migrations.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			cluster, err := cf.cluster()
			if err != nil {
				return usageError{err}
			}
			if *printDDL {
				if cluster == nil {
					return usageError{errors.New("--print needs --cluster")}
				}
				stmts, err := sink.ClusterStatements(*cluster, ch.db)
				if err != nil {
					return usageError{err}
				}
				fmt.Fprintln(std.out, strings.Join(stmts, ";\n\n")+";")
				return nil
			}
			log := slog.New(slog.NewTextHandler(std.err, nil))
			cfg, err := ch.config(os.Getenv, log)
			if err != nil {
				return usageError{err}
			}
			// Not NewClickHouse: it checks the schema this command creates.
			conn, err := cfg.Open(ctx)
			if err != nil {
				return fmt.Errorf("clickhouse: %w", err)
			}
			defer conn.Close()
			var applied []string
			if cluster != nil {
				applied, err = sink.MigrateCluster(ctx, conn, ch.db, *cluster, log)
			} else {
				applied, err = sink.Migrate(ctx, conn, ch.db, log)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(std.out, "applied %d migration(s) to %s: %v\n", len(applied), ch.db, applied)
			return nil
		},
	}
}

func reportCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd report", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var ch chFlags
	ch.register(fs)
	analysis := fs.String("analysis", "live", "analysis `id`")
	since := fs.String("since", "24h", "the calls emitted this long before --to (a `DURATION`), or all: the analysis's whole span")
	to := fs.String("to", "", "end of the range, an RFC 3339 `TIME` (default: now)")
	registries := fs.String("registry", "", "only these `REGISTRIES`, comma-separated (default: all)")
	models := fs.String("model", "", "only these `MODELS`, comma-separated (default: all)")
	session := fs.String("session", "", "add the incident timeline of this `SESSION`")
	htmlFile := fs.String("html", "", "also write the report as one self-contained HTML page to `FILE`")
	expect := fs.Int("expect", 0, "instead, wait until at least `N` decisions are stored (and counted by the rollups), then print the exact count per class")
	timeout := fs.Duration("timeout", 2*time.Minute, "longest wait for --expect")
	poll := fs.Duration("poll", 500*time.Millisecond, "how often --expect counts the stored decisions (benchmarks poll faster to time the end closely)")
	toctou := fs.Bool("toctou", false, "list the calls of the range whose decisions in the call path (api, gateway) and from the stream differ, instead of the counts")
	return &ffcli.Command{
		Name:       "report",
		ShortUsage: "resolverd report [--analysis ID] [--since 24h|all] [--registry R] [--model M] [--session S] [--html FILE] | --expect N | --toctou",
		ShortHelp:  "headline analytics of the decisions, on a terminal or as HTML",
		LongHelp: `Prints the fleet analytics of one analysis over a time range of the
calls' emitted_at (--since, --to), answer first: the decisions, rejections
and hallucination, unknown-tool and schema-reject rates with their change
against the period before (as long as the range), the unreadable
(MALFORMED) calls, and the top 5 problems by calls affected (fabricated
tool names, colliding and shadowed names, drifting servers, sessions with
the most rejections). Then each of those sections (top 10 rows and how
many more), the rates by model and by invocation surface, and the latest
registry versions. --session adds that session's decisions in order, the
calls whose gate and stream decisions differ, and the registry changes in
the range. The numbers are those of the Grafana dashboards (dashboards/):
the same rollups, queried per section over every registry at once. --html
FILE also writes it as one HTML page with inline SVG charts (the rate per
bucket of 1 minute to 1 week, chosen from the range) that loads nothing
from anywhere and fits a laptop's screen.

With --expect N it does something else: it waits until N decisions of the
analysis are stored, then prints their exact count per class and verdict
(read with FINAL): the demo's and the benchmarks' way of knowing that every
call was decided.

With --toctou it lists instead the calls of the range decided in the call
path (POST /v1/resolve, the gateway: source api or gateway) whose
decisions disagree on class (most often the stream's, made later against
another registry version), with every decision and registry version of
each: the time-of-check/time-of-use gap, the incident dashboard's panel
of that name (at most 500 calls; --registry, --model and --session
narrow it).`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			if *poll <= 0 {
				return usageError{fmt.Errorf("--poll %s: want a positive interval", *poll)}
			}
			cfg, err := ch.config(os.Getenv, slog.New(slog.NewTextHandler(std.err, nil)))
			if err != nil {
				return usageError{err}
			}
			if *expect > 0 {
				return waitAndCount(ctx, std, cfg, *analysis, *expect, *timeout, *poll)
			}
			o := report.Options{Analysis: *analysis, Registries: splitList(*registries), Models: splitList(*models), Session: *session}
			all := *since == "all"
			var span time.Duration
			if !all {
				d, err := time.ParseDuration(*since)
				if err != nil || d <= 0 {
					return usageError{fmt.Errorf("--since %q: want a positive duration or all", *since)}
				}
				span = d
			}
			o.To = time.Now().UTC()
			if *to != "" {
				t, err := time.Parse(time.RFC3339Nano, *to)
				if err != nil {
					return usageError{fmt.Errorf("--to %q: want an RFC 3339 time", *to)}
				}
				o.To = t.UTC()
			}
			o.From = o.To.Add(-span)
			conn, err := cfg.OpenIn(ctx)
			if err != nil {
				return fmt.Errorf("clickhouse: %w", err)
			}
			defer conn.Close()
			if all {
				first, last, ok, err := report.SpanOf(ctx, conn, *analysis)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("analysis %q has no decided calls", *analysis)
				}
				o.From, o.To = first, last
				if !o.To.After(o.From) {
					o.To = o.From.Add(time.Second)
				}
			}
			if *toctou {
				res, err := report.TOCTOU(ctx, conn, o)
				if err != nil {
					return err
				}
				return report.WriteTOCTOU(std.out, o, res)
			}
			r, err := report.Collect(ctx, conn, o)
			if err != nil {
				return err
			}
			if err := r.WriteText(std.out); err != nil {
				return err
			}
			if *htmlFile != "" {
				var b bytes.Buffer
				if err := r.WriteHTML(&b); err != nil {
					return err
				}
				if err := os.WriteFile(*htmlFile, b.Bytes(), 0o644); err != nil {
					return err
				}
				fmt.Fprintf(std.out, "\nHTML report: %s\n", *htmlFile)
			}
			return nil
		},
	}
}

// waitAndCount is report --expect: wait until n decisions of the analysis
// are stored (or timeout), then print the exact count per class.
func waitAndCount(ctx context.Context, std stdio, cfg sink.Config, analysis string, n int, timeout, poll time.Duration) error {
	c, err := sink.NewClickHouse(ctx, cfg)
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	defer c.Close()
	deadline := time.Now().Add(timeout)
	for {
		// Polling with FINAL would cost the server a merge of the
		// whole analysis twice a second; the raw count is an upper
		// bound that says when FINAL is worth asking.
		if time.Now().Before(deadline) {
			stored, err := c.Stored(ctx, analysis)
			if err != nil {
				return err
			}
			if stored < n {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(poll):
				}
				continue
			}
		}
		counts, total, err := c.Counts(ctx, analysis)
		if err != nil {
			return err
		}
		if total >= n {
			// The rollups (what report without --expect and the
			// dashboards read) are filled by the same INSERTs, a moment
			// after their rows show in decisions.
			if rolled, err := c.RolledUp(ctx, analysis); err != nil {
				return err
			} else if rolled < total && time.Now().Before(deadline) {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(poll):
				}
				continue
			}
			printCounts(std, analysis, counts, total)
			return nil
		}
		if time.Now().After(deadline) {
			printCounts(std, analysis, counts, total)
			return fmt.Errorf("only %d of %d decisions stored after %s", total, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

func printCounts(std stdio, analysis string, counts map[schema.Class]int, total int) {
	tw := tabwriter.NewWriter(std.out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "class\tverdict\tdecisions\tshare\t\n")
	for _, c := range schema.Classes {
		if n := counts[c]; n > 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f%%\t\n", c, schema.VerdictOf(c), n, 100*float64(n)/float64(max(total, 1)))
		}
	}
	fmt.Fprintf(tw, "total\t\t%d\t\t\n", total)
	tw.Flush()
	fmt.Fprintf(std.out, "analysis %q, read from ClickHouse with FINAL\n", analysis)
}

func stackCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd stack", flag.ContinueOnError)
	fs.SetOutput(std.err)
	dir := fs.String("dir", "", "data `DIR` of the broker and the engine (required)")
	var ports portFlags
	ports.register(fs, "")
	httpAddr := fs.String("http", "127.0.0.1:19080", "listen `address` of /metrics, /healthz and /readyz (empty: none)")
	chConfig := fs.String("clickhouse-config", "", "a ClickHouse server configuration `FILE` merged over the engine's own (e.g. to turn on system.query_log)")
	return &ffcli.Command{
		Name:       "stack",
		ShortUsage: "resolverd stack --dir DIR [--kafka-port N] [--clickhouse-port N] [--clickhouse-http-port N] [--clickhouse-config FILE] [--http ADDR]",
		ShortHelp:  "run only the embedded Kafka broker and ClickHouse engine",
		LongHelp: `Runs the embedded stack of run --embedded (Kafka-protocol broker on
127.0.0.1:19092, ClickHouse engine on 127.0.0.1:19000 and HTTP 18123
unless the port flags say otherwise, data in DIR) in the foreground,
without the resolver: for development, benchmarks, or several resolverd
instances sharing one local stack. Prints the addresses it listens on.
Stops on SIGINT or SIGTERM.

The engine is supervised: when it exits on its own, reports a fatal
error or stops answering, the stack logs why (exit status or signal, the
engine's last output and log lines; its log is
DIR/clickhouse/log/engine.log), restarts it on its data and ports after a
backoff (0.5 s doubling to 30 s while it keeps failing), counts it in
toolaudit_engine_restarts_total (--http serves /metrics), and answers 503
on /readyz until the new engine answers.

--clickhouse-config FILE is merged over the engine's configuration at
every start, as a server's config.d file is: the embedded engine keeps
no system logs, and this is how to turn on system.query_log,
system.query_views_log, part_log or trace_log, for instance to see where
its time goes (scripts/bench-pipeline.sh does with PROFILE=1).`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if *dir == "" || len(args) > 0 {
				return usageError{fmt.Errorf("stack needs --dir DIR and no arguments")}
			}
			if err := ports.validate(); err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(std.err, nil))
			if err := ports.check(); err != nil {
				return err
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
			var ln net.Listener
			if *httpAddr != "" {
				var err error
				if ln, err = net.Listen("tcp", *httpAddr); err != nil {
					return fmt.Errorf("--http %s: %w (choose another address, or --http \"\" for none)", *httpAddr, err)
				}
				defer ln.Close()
			}
			opts := ports.options(*dir, log)
			opts.Registerer = reg
			opts.ClickHouseConfig = *chConfig
			st, err := embedded.Start(ctx, opts)
			if err != nil {
				return err
			}
			admin := ""
			if ln != nil {
				mux := http.NewServeMux()
				mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
				mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
				mux.Handle("GET /readyz", httpapi.Readiness(st.Ready))
				srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
				go srv.Serve(ln)
				defer srv.Close()
				admin = ", metrics and readyz http://" + ln.Addr().String()
			}
			fmt.Fprintf(std.out, "kafka %s, clickhouse %s (http %s)%s; Ctrl-C stops\n", st.Brokers[0], st.ClickHouse.Addr(), st.ClickHouse.HTTPAddr(), admin)
			<-ctx.Done()
			return st.Close()
		},
	}
}
