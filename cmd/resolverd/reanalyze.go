package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	listingstopic "github.com/toolaudit/toolaudit/registry/topic"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/schollz/progressbar/v3"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/reanalyze"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
	"github.com/toolaudit/toolaudit/sink/appender"
)

const reanalyzeHelp = `Decides every call emitted in [--from, --to) again, against the registry
version current at its emitted_at (the whole listings topic is read
first), and writes the decisions to ClickHouse under --analysis, source
"reanalysis", beside the live ones; then prints a summary and exits.
Compare the analyses with resolverd diff.

A call is in the window when its emitted_at is at or after --from and
before --to; an event without a usable emitted_at (MALFORMED) counts at
its Kafka record's timestamp. Times are RFC 3339 (2026-12-01T00:00:00Z,
whole milliseconds) or a duration before now (-168h).

--source kafka (the default) reads each partition of the calls topic, as
it stands when the run starts (give a --to in the past), from its first
record stamped at or after --from minus --horizon until --confirm calls
in a row emitted at or after --to plus --horizon, or to its end. Record
timestamps out of order, hours off or missing do not cut the read short.
It then prints, per partition, the offsets read, the calls in the window,
the records outside it and the widest disorder seen, and exits 4 naming
the partitions and offsets where it cannot prove that it read every call
of the window: records deleted before the read's start (retention), or a
record stamped more than --horizon before its call's emitted_at (one
stamped so before the read's start would not be read). --accept-incomplete
exits 0 on them (the report stays). The guarantee and its limits:
docs/commands.md. A window older than the topic's retention: read it
with --source archive, the table call_events that resolverd run
--archive-calls fills (selected by emitted_at exactly).

Give the live pipeline's args_hash key (--args-hash-key-file or
RESOLVERD_ARGS_HASH_KEY), or the re-analysed rows' args_hash differs from
the live rows'. Calls decided by the API or the gateway (topic tool-audit)
are not re-analysed: the window is the calls topic's.

Idempotent: the table keeps one decision per call and analysis, so the
same command run again (after a failure, say) leaves one row per call.
An --analysis that holds decisions of another source (the live
pipeline's, the API's) is refused. A progress bar with rate and ETA goes
to stderr on a terminal, a progress line every --progress-every
otherwise.

Exit status: 0; 4 when completeness is not proven (above); 1 when a run
fails; 2 for a usage error.

--brokers and --clickhouse not given: when nothing answers at their
defaults (127.0.0.1:9092, 127.0.0.1:9000) and the embedded stack does
(resolverd stack, make demo: 127.0.0.1:19092 and 127.0.0.1:19000), the
stack's are used, and logged.

Every flag can also be set as RESOLVERD_<FLAG> (dashes as underscores).`

func reanalyzeCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd reanalyze", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var ch chFlags
	ch.register(fs)
	var brokers kafkaconf.Brokers
	brokers.Register(fs, kafkaconf.DefaultBrokers, "not given: the embedded stack's, 127.0.0.1:19092, when nothing answers here and it does")
	var kafka kafkaconf.Config
	kafka.Register(fs)
	cfg := reanalyze.DefaultConfig()
	from := fs.String("from", "", "window start, inclusive: RFC 3339 `TIME` or a duration before now (-24h); required")
	to := fs.String("to", "", "window end, exclusive: RFC 3339 `TIME` or a duration before now; required")
	fs.StringVar(&cfg.AnalysisID, "analysis", "", "analysis `ID` of the new decisions; required")
	mode := fs.String("mode", "strict", "resolution `mode`: strict or pin-assisted")
	formats := formatsFlag(fs)
	fs.StringVar(&cfg.PolicyVersion, "policy-version", "", "policy `VERSION` stamped on every decision (default: the resolver's stamp, as every decider's: the mode, +formats, +approvals(POLICY))")
	source := fs.String("source", "kafka", "where the calls are read: kafka (the calls topic) or archive (table call_events)")
	horizon := fs.Duration("horizon", 5*time.Minute, "with --source kafka: how far a partition may be out of place: a record stamped before its call's emitted_at, a call behind the calls before it")
	fs.DurationVar(horizon, "skew", *horizon, "the former name of --horizon")
	confirm := fs.Int("confirm", reanalyze.DefaultConfirm, "with --source kafka: calls in a row emitted at or after --to plus --horizon that end a partition's read")
	accept := fs.Bool("accept-incomplete", false, "with --source kafka: exit 0 even when completeness is not proven (the report still says where)")
	fs.StringVar(&cfg.Window.Topic, "calls-topic", cfg.Window.Topic, "calls `topic`")
	listingsTopic := fs.String("listings-topic", schema.TopicListings, "listings `topic` (full history)")
	fs.IntVar(&cfg.Workers, "workers", runtime.GOMAXPROCS(0), "goroutines deciding calls")
	fs.IntVar(&cfg.BatchRows, "batch-rows", cfg.BatchRows, "decisions per ClickHouse INSERT (two batches are held at most)")
	batchMB := fs.Int("batch-mb", cfg.BatchBytes>>20, "most `MiB` of decisions in one INSERT")
	fs.BoolVar(&cfg.KeepRawArgs, "keep-raw-args", false, "store raw argument values (they may hold secrets; default: shape and hash only)")
	keyFile := argsKeyFlag(fs)
	progress := fs.String("progress", "auto", "progress on stderr: auto (a bar on a terminal, lines otherwise), bar, lines or none")
	every := fs.Duration("progress-every", 10*time.Second, "interval of the progress lines")
	var common commonFlags
	common.register(fs, 384, 100, commonHelp{})
	var gf gateFlags // approvalgate.go
	gf.registerReanalysis(fs)
	return &ffcli.Command{
		Name:       "reanalyze",
		ShortUsage: "resolverd reanalyze --from T1 --to T2 --analysis NAME [--mode M] [--source kafka|archive] [flags]",
		ShortHelp:  "decide the calls of a past window again, under a new analysis id",
		LongHelp:   reanalyzeHelp,
		FlagSet:    fs,
		Options:    []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			now := time.Now()
			var err error
			if cfg.Window.From, err = parseWhen(*from, "--from", now); err != nil {
				return err
			}
			if cfg.Window.To, err = parseWhen(*to, "--to", now); err != nil {
				return err
			}
			if cfg.Resolver.Mode, err = resolve.ParseMode(*mode); err != nil {
				return usageError{err}
			}
			if cfg.Resolver.Formats, err = parseFormats(*formats); err != nil {
				return usageError{err}
			}
			if *source != "kafka" && *source != "archive" {
				return usageError{fmt.Errorf("--source %q: want kafka or archive", *source)}
			}
			switch *progress {
			case "auto", "bar", "lines", "none":
			default:
				return usageError{fmt.Errorf("--progress %q: want auto, bar, lines or none", *progress)}
			}
			if *horizon < 0 || *confirm <= 0 || *every <= 0 {
				return usageError{errors.New("--horizon must not be negative, --confirm and --progress-every must be positive")}
			}
			cfg.BatchBytes = *batchMB << 20
			cfg.ResolverBuild = build()
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			log, err := common.logger(std.err)
			if err != nil {
				return err
			}
			if cfg.ArgsKey, err = loadArgsKey(*keyFile, log); err != nil {
				return err
			}
			common.limitMemory()
			chCfg, err := ch.config(os.Getenv, log)
			if err != nil {
				return usageError{err}
			}
			if chCfg.TLS == nil { // the embedded stack takes no TLS: no fallback to it then
				if chCfg.Addr, err = stackDefault(ctx, fs, "clickhouse", chCfg.Addr, embeddedClickHouse, log); err != nil {
					return err
				}
			}
			kafka.Log = log
			kafkaOpts, err := kafka.Opts(os.Getenv)
			if err != nil {
				return usageError{err}
			}
			bs, err := stackDefault(ctx, fs, "brokers", brokers.List(), embeddedKafka, log)
			if err != nil {
				return err
			}
			kafkaOpts = append([]kgo.Opt{kgo.SeedBrokers(bs...), kgo.ClientID("resolverd-reanalyze")}, kafkaOpts...)
			if cfg.Resolver.Approvals, err = gf.gate(); err != nil {
				return err
			}
			actx, cancel := context.WithTimeout(ctx, common.connectTimeout)
			err = gf.once(actx, cfg.Resolver.Approvals, kafkaOpts, log)
			cancel()
			if err != nil {
				return err
			}
			return runReanalyze(ctx, std, log, reanalyzeArgs{cfg: cfg, ch: chCfg, kafka: kafka, brokers: bs, kafkaOpts: kafkaOpts,
				connectTimeout: common.connectTimeout, listingsTopic: *listingsTopic, source: *source, horizon: *horizon,
				confirm: *confirm, accept: *accept, progress: *progress, every: *every})
		},
	}
}

type reanalyzeArgs struct {
	cfg            reanalyze.Config
	ch             sink.Config
	kafka          kafkaconf.Config
	brokers        []string
	kafkaOpts      []kgo.Opt // with the brokers and client id
	connectTimeout time.Duration
	listingsTopic  string
	source         string
	horizon        time.Duration
	confirm        int
	accept         bool
	progress       string
	every          time.Duration
}

func runReanalyze(ctx context.Context, std stdio, log *slog.Logger, a reanalyzeArgs) error {
	if err := checkKafka(ctx, log, a.brokers, "resolverd-reanalyze", a.kafka, a.kafkaOpts, a.connectTimeout); err != nil {
		return err
	}
	store, err := sink.NewClickHouse(ctx, a.ch, sink.WithLogger(log))
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	defer store.Close()
	srcs, err := store.Sources(ctx, a.cfg.AnalysisID)
	if err != nil {
		return err
	}
	for _, s := range srcs {
		if s != schema.SourceReanalysis {
			return usageError{fmt.Errorf("analysis %q holds decisions of source %s: a re-analysis goes under an id of its own", a.cfg.AnalysisID, s)}
		}
	}
	ks := &reanalyze.KafkaSource{Window: a.cfg.Window, Horizon: a.horizon, Confirm: a.confirm, Opts: a.kafkaOpts, Log: log}
	var src reanalyze.Source = ks
	if a.source == "archive" {
		if err := store.CheckArchive(ctx); err != nil {
			return fmt.Errorf("clickhouse: --source archive: %w", err)
		}
		src = &reanalyze.ArchiveSource{Archive: store, Window: a.cfg.Window}
	}

	start := time.Now()
	reg := newStore(a.cfg.Resolver)
	ls, err := listingstopic.LoadListings(ctx, a.kafkaOpts, a.listingsTopic, reg, log)
	if err != nil {
		return fmt.Errorf("listings: %w", err)
	}
	snap := reg.Snapshot()
	log.Info("listings applied", "topic", a.listingsTopic, "records", ls.Records, "applied", ls.Applied, "bad", ls.Bad,
		"issues", ls.Issues, "registries", snap.Registries(), "took", time.Since(start).Round(time.Millisecond))

	r, err := reanalyze.New(a.cfg, snap, src, func() appender.Batch { return store.NewBatch() }, log)
	if err != nil {
		return err
	}
	stop := showProgress(std.err, a.progress, a.every, r.Progress)
	sum, err := r.Run(ctx)
	stop()
	if err != nil {
		if errors.Is(err, reanalyze.ErrTruncated) {
			return fmt.Errorf("reanalyze: %w: read the window with --source archive", err)
		}
		return fmt.Errorf("reanalyze (the decisions written so far stay; run it again to complete them): %w", err)
	}
	printReanalysis(std.out, a, sum)
	if a.source != "kafka" {
		return nil
	}
	rep := ks.Report()
	printPartitions(std.out, a, rep)
	var unproven []string
	for _, r := range rep {
		for _, u := range r.Unproven {
			unproven = append(unproven, fmt.Sprintf("partition %d: %s", r.Partition, u))
		}
	}
	if len(unproven) == 0 {
		return nil
	}
	msg := fmt.Sprintf("not proven to hold every call of the window:\n  %s\nread the window with --source archive, or widen --horizon", strings.Join(unproven, "\n  "))
	if a.accept {
		log.Warn("--accept-incomplete: " + msg)
		return nil
	}
	return exitError{exitUnproven, errors.New(msg + "; --accept-incomplete accepts it")}
}

// exitUnproven is reanalyze's exit status when it cannot prove that it
// read every call of the window, and diff's when calls of the range are
// absent from the new analysis.
const exitUnproven = 4

// printPartitions prints the Kafka source's report, a line per partition.
func printPartitions(w io.Writer, a reanalyzeArgs, rep []reanalyze.PartitionReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "partition\toffsets read\tof\tin window\toutside\tended\tdisorder\tstamped early\tno timestamp\tcomplete\t\n")
	for _, r := range rep {
		ended := "at its end"
		if r.PastWindow {
			ended = fmt.Sprintf("%d calls past", a.confirm)
		}
		complete := "proven"
		if len(r.Unproven) > 0 {
			complete = "NOT PROVEN"
		}
		fmt.Fprintf(tw, "%d\t[%d, %d)\t[%d, %d)\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t\n", r.Partition, r.Start, r.End, r.LogStart, r.HighWatermark,
			r.InWindow, r.Outside, ended, r.Disorder, r.EarlyStamp, r.NoTimestamp, complete)
	}
	tw.Flush()
}

// parseWhen reads a window bound: RFC 3339, or a negative duration
// before now (truncated to the millisecond).
func parseWhen(s, flagName string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, usageError{fmt.Errorf("%s is required", flagName)}
	}
	if strings.HasPrefix(s, "-") {
		d, err := time.ParseDuration(s)
		if err != nil {
			return time.Time{}, usageError{fmt.Errorf("%s %q: %w", flagName, s, err)}
		}
		return now.Add(d).Truncate(time.Millisecond).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, usageError{fmt.Errorf("%s %q: want an RFC 3339 time (2026-12-01T00:00:00Z) or a duration before now (-24h)", flagName, s)}
	}
	return t.UTC(), nil
}

// showProgress reports progress on w until the returned func is called: a
// bar with rate and ETA on a terminal (mode auto or bar), a line every
// interval otherwise (auto or lines).
func showProgress(w io.Writer, mode string, every time.Duration, progress func() reanalyze.Progress) (stop func()) {
	if mode == "auto" {
		mode = "lines"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			mode = "bar"
		}
	}
	if mode == "none" {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		var bar *progressbar.ProgressBar
		tick := every
		if mode == "bar" {
			tick = 200 * time.Millisecond
		}
		t := time.NewTicker(tick)
		defer t.Stop()
		start := time.Now()
		for {
			select {
			case <-done:
				if bar != nil {
					_ = bar.Finish()
				}
				return
			case <-t.C:
			}
			p := progress()
			if mode == "lines" {
				fmt.Fprintln(w, progressLine(p, time.Since(start)))
				continue
			}
			if bar == nil && p.Total >= 0 {
				bar = progressbar.NewOptions64(p.Total,
					progressbar.OptionSetWriter(w),
					progressbar.OptionSetDescription("reanalyze"),
					progressbar.OptionSetItsString("records"),
					progressbar.OptionShowIts(),
					progressbar.OptionShowCount(),
					progressbar.OptionSetPredictTime(true),
					progressbar.OptionSetWidth(30),
					progressbar.OptionSetSpinnerChangeInterval(0),
					progressbar.OptionThrottle(100*time.Millisecond),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionUseANSICodes(true),
				)
			}
			if bar != nil {
				_ = bar.Set64(min(p.Read, bar.GetMax64()))
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// progressLine is one plain progress line: records read of the planned
// total, the rate, the ETA at that rate.
func progressLine(p reanalyze.Progress, took time.Duration) string {
	rate := float64(p.Read) / max(took.Seconds(), 1e-3)
	s := fmt.Sprintf("reanalyze: %d records read", p.Read)
	if p.Total > 0 {
		s += fmt.Sprintf(" of about %d (%.0f%%)", p.Total, 100*float64(p.Read)/float64(p.Total))
	}
	s += fmt.Sprintf(", %d decided, %d written, %.0f records/s", p.Decided, p.Written, rate)
	if p.Total > p.Read && rate > 0 {
		s += ", ETA " + time.Duration(float64(p.Total-p.Read)/rate*float64(time.Second)).Round(time.Second).String()
	}
	return s
}

// printReanalysis prints what a re-analysis decided, per class, and how.
func printReanalysis(w io.Writer, a reanalyzeArgs, s reanalyze.Summary) {
	printClasses(w, func(c schema.Class) int64 { return s.ByClass[c.Index()] }, s.Decided)
	w0 := a.cfg.Window
	fmt.Fprintf(w, "analysis %q, mode %s, source %s: %d calls emitted in [%s, %s) decided in %s (%.0f calls/s); %d records read, %d outside the window\n",
		a.cfg.AnalysisID, a.cfg.Resolver.Mode, a.source, s.Decided, w0.From.Format(time.RFC3339Nano), w0.To.Format(time.RFC3339Nano),
		s.Took.Round(time.Millisecond), float64(s.Decided)/max(s.Took.Seconds(), 1e-3), s.Read, s.Outside)
	fmt.Fprintf(w, "compare over the same window: resolverd diff --analysis %s --from %s --to %s\n",
		a.cfg.AnalysisID, w0.From.Format(time.RFC3339Nano), w0.To.Format(time.RFC3339Nano))
}
