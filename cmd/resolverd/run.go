package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/embedded"
	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/otlp"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/sink"
	"github.com/toolaudit/toolaudit/sink/appender"
	"github.com/toolaudit/toolaudit/sink/decisions"
	"github.com/toolaudit/toolaudit/stream"
)

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// build is the resolver build stamped into every row: the module version
// and VCS revision when the binary carries them.
func build() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += "+" + s.Value[:12]
		}
	}
	return v
}

const runHelp = `Consumes tool calls and listing-change events from Kafka, resolves each
call against the registry version current at its emitted_at, and writes
one classified, version-stamped decision per call to ClickHouse (table
decisions). Offsets are committed only after ClickHouse acknowledged the
decisions before them, and the table deduplicates re-deliveries, so each
call has exactly one decision per analysis when read with FINAL.

Every instance reads the listings topic, from the newest registry
checkpoint (--checkpoint-topic) or from the start; instances
of one --group share the calls topic's partitions, one worker each; one
writer gathers the decisions of all of them into large INSERTs
(--batch-rows, --batch-mb, --batch-wait), which ClickHouse takes far more
cheaply than many small ones. Undecodable records are decided MALFORMED and copied to
the dead-letter topic.

--embedded DIR runs everything on loopback with no external service: a
Kafka-protocol broker (kfake, data in DIR/kafka, port 19092) and the
ClickHouse engine (DIR/clickhouse, native port 19000, HTTP 18123), and
creates the schema. Point cmd/ingest at 127.0.0.1:19092. The
--embedded-*-port flags choose other ports. The engine is supervised:
when it dies it is restarted on its data, the cause is logged (its own
log is DIR/clickhouse/log/engine.log), the restart counted in
toolaudit_engine_restarts_total, and /readyz answers 503 meanwhile.

HTTP (--http): POST /v1/resolve (synchronous decision for enforcement
points: one call event or an array, with hints; api/openapi.yaml), GET
/metrics, /healthz, /readyz. Each answered decision is first produced to
--audit-topic and acknowledged (503 when it cannot be: fail closed); run
consumes that topic in its group and stores those decisions with source
api, exactly once. --http-tls-cert/--http-tls-key serve HTTPS;
--http-tokens-file requires bearer tokens on /v1/*. SIGHUP reloads the
tokens and the certificate. --decisions-topic also produces every stored
decision to Kafka.

--otlp-spans-topic and --otlp-logs-topic also consume the OpenTelemetry
Collector's Kafka exporter topics (encoding --otlp-encoding): each
record, a batch of spans or log records, yields a decision per tool call
it holds (the calls a model returned, execute_tool and MCP tools/call
spans; one call seen twice in a batch is one call), committed once all of
them are stored. A call resolves against the tool definitions recorded
with it (gen_ai.tool.definitions, OpenInference's llm.tools) when the
trace has them, else against --otlp-registry; a call whose arguments were
not recorded is decided on its name and never allowed. A record that is
not OTLP goes to the dead-letter topic (docs/commands.md maps every
attribute). --otlp-http and --otlp-grpc receive OTLP exports themselves
(no Collector needed) and produce each to those topics, answering once
Kafka has it.

--archive-calls also stores every record of the calls topic, as it was
produced, in table call_events (in the same INSERT round as its
decision, before its offset is committed; 90 days), so that resolverd
reanalyze --source archive can decide calls again once Kafka's
retention has dropped them. The events hold the raw arguments, which
may be secrets: grant SELECT on call_events only to whoever re-analyses.

Secured services: --kafka-tls* and --kafka-sasl-* (as ingest's; SASL
OAUTHBEARER with --kafka-sasl-oauth-*, AWS MSK IAM with the AWS
credential chain) for Kafka, --clickhouse-tls* for ClickHouse's secure
native port. Passwords come from --kafka-sasl-password-file and
--clickhouse-password-file or the TOOLAUDIT_KAFKA_SASL_PASSWORD and
TOOLAUDIT_CLICKHOUSE_PASSWORD variables, never from flags (ps shows
them); prefer the files: the same user's other processes and root can
read a process's environment in /proc/PID/environ. A broker that refuses
the TLS handshake or the SASL authentication (or a token endpoint that
refuses the client) stops resolverd at start with an error saying what
to check.

--cluster NAME writes to a ClickHouse cluster: the start-up migration
lays the schema out on it (see resolverd migrate --help), and the
decisions go through the Distributed table decisions, which acknowledges
an INSERT once every shard has stored its rows.

Every flag can also be set as RESOLVERD_<FLAG> (dashes as underscores).`

func runCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd run", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var ch chFlags
	ch.register(fs)
	sc := stream.DefaultConfig()
	var brokers kafkaconf.Brokers
	brokers.Register(fs, kafkaconf.DefaultBrokers, "")
	var kafka kafkaconf.Config
	kafka.Register(fs)
	var cf clusterFlags
	cf.register(fs)
	var common commonFlags
	common.register(fs, 384, 100, commonHelp{
		logLevel: "log `level`: debug (also the Kafka client's own logs), info, warn, error",
		memLimit: "soft memory limit of the Go heap in `MiB` (GOMEMLIMIT; 0: none); fetch buffers are bounded separately",
		connect:  "how long to wait at start for a Kafka broker, and for ClickHouse, to answer (a refused TLS handshake, SASL authentication or ClickHouse login fails at once)",
	})
	fs.StringVar(&sc.Group, "group", sc.Group, "consumer `group` of the calls topic")
	fs.StringVar(&sc.CallsTopic, "calls-topic", sc.CallsTopic, "calls `topic`")
	fs.StringVar(&sc.ListingsTopic, "listings-topic", sc.ListingsTopic, "listings `topic` (full history, never compacted)")
	fs.StringVar(&sc.CheckpointTopic, "checkpoint-topic", sc.CheckpointTopic, "registry checkpoint `topic`: start from the newest checkpoint and read only the listings after it (empty: read the listings topic from the start)")
	fs.DurationVar(&sc.CheckpointEvery, "checkpoint-every", sc.CheckpointEvery, "write a registry checkpoint this often when listings were applied, and at shutdown (0: never write, still read)")
	fs.StringVar(&sc.DLQTopic, "dlq-topic", sc.DLQTopic, "dead-letter `topic` for undecodable calls")
	fs.IntVar(&sc.BatchRows, "batch-rows", sc.BatchRows, "decisions per ClickHouse INSERT, gathered from all partitions (two batches are held at most)")
	batchMB := fs.Int("batch-mb", sc.BatchBytes>>20, "most `MiB` of decisions in one INSERT, however few rows (raw arguments can be large)")
	fs.DurationVar(&sc.BatchWait, "batch-wait", sc.BatchWait, "longest a partial batch waits before it is written")
	fs.DurationVar(&sc.BatchIdle, "batch-idle", sc.BatchIdle, "write a batch a tenth full or more once no decisions were added to it for this long (0: wait for --batch-wait)")
	partBuf := fs.Int("partition-buffer-mb", sc.MaxPartitionBuffer>>20, "fetched records held per partition before its fetching pauses, `MiB`; must cover a partition's byte rate times --listing-hold")
	fs.DurationVar(&sc.ListingHold, "listing-hold", sc.ListingHold, "how late a listing may reach Kafka after the calls it governs and still be applied first (0: no wait)")
	fs.StringVar(&sc.AnalysisID, "analysis", sc.AnalysisID, "analysis `id` stamped on every decision; a new id re-decides beside the old")
	fs.BoolVar(&sc.Passthrough, "passthrough", false, "benchmarking only: store each call decoded but not resolved (the baseline for the cost of resolution)")
	fs.BoolVar(&sc.KeepRawArgs, "keep-raw-args", false, "store raw argument values (they may hold secrets; default: shape and hash only)")
	fs.BoolVar(&sc.ArchiveCalls, "archive-calls", false, "archive every call record as produced in table call_events, for resolverd reanalyze --source archive beyond Kafka's retention (events may hold secrets: restrict access to the table)")
	fs.StringVar(&sc.OTLPSpansTopic, "otlp-spans-topic", "", "also consume `TOPIC` of the OpenTelemetry Collector's Kafka exporter (its default: otlp_spans): the tool calls in its traces and the tool definitions recorded with them (empty: not read)")
	fs.StringVar(&sc.OTLPLogsTopic, "otlp-logs-topic", "", "also consume `TOPIC` of the Collector's exporter (its default: otlp_logs): the tool calls in gen_ai log events (empty: not read)")
	otlpEnc := fs.String("otlp-encoding", sc.OTLPEncoding.String(), "`encoding` of the OpenTelemetry topics' records, as the exporter is configured: otlp_proto or otlp_json")
	fs.StringVar(&sc.OTLPRegistry, "otlp-registry", "", "`REGISTRY` of the OpenTelemetry topics' calls: those without recorded tool definitions resolve against it; the definitions a trace records are a registry of their own under it (NAME:tools-DIGEST); required with --otlp-*-topic")
	keyFile := argsKeyFlag(fs)
	mode := fs.String("mode", "strict", "resolution `mode`: strict or pin-assisted")
	formats := formatsFlag(fs)
	var gf gateFlags
	gf.registerLive(fs)
	gf.registerApprovers(fs)
	var hf httpFlags
	hf.register(fs)
	var of otlpFlags
	of.register(fs)
	var tf traceFlags
	tf.register(fs, "resolverd")
	embed := fs.String("embedded", "", "run an embedded Kafka broker and ClickHouse engine with data in `DIR`")
	var ports portFlags
	ports.register(fs, "embedded-")
	migrate := fs.Bool("migrate", true, "create or upgrade the ClickHouse schema at start")
	history := fs.Bool("registry-history", false, "write the registry history (what each listing changed, table registry_changes, read by the dashboards and registry diff) as listings are applied, and every approval event of --approvals-topic (table approval_events, kept beyond the topic's compaction); it needs every listing, so the instance reads the listings topic from the start, not from a checkpoint: turn it on in one instance of a fleet")
	session := fs.Duration("session-timeout", 45*time.Second, "consumer group session timeout: how long a dead instance keeps its partitions")
	rebalance := fs.Duration("rebalance-timeout", 60*time.Second, "consumer group rebalance timeout: how long a rebalance waits for members to rejoin")
	return &ffcli.Command{
		Name:       "run",
		ShortUsage: "resolverd run [--embedded DIR | --brokers B --clickhouse A] [flags]",
		ShortHelp:  "consume Kafka, resolve, write decisions to ClickHouse",
		LongHelp:   runHelp,
		FlagSet:    fs,
		Options:    []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			if err := ports.validate(); err != nil {
				return err
			}
			if err := hf.validate(); err != nil {
				return err
			}
			if err := gf.validateHTTP(hf.addr); err != nil {
				return err
			}
			sc.AuditTopic = hf.auditTopic
			enc, err := otlp.ParseEncoding(*otlpEnc)
			if err != nil {
				return usageError{err}
			}
			sc.OTLPEncoding = enc
			if err := of.validate(&sc); err != nil {
				return usageError{err}
			}
			sc.MaxPartitionBuffer = *partBuf << 20
			sc.BatchBytes = *batchMB << 20
			log, err := common.logger(std.err)
			if err != nil {
				return err
			}
			if *embed != "" && (kafka.Enabled() || ch.secured(os.Getenv)) {
				return usageError{errors.New("--embedded runs a plaintext broker and engine on loopback: drop the --kafka-tls*, --kafka-sasl-*, --clickhouse-tls* and password settings")}
			}
			if *embed != "" && cf.name != "" {
				return usageError{errors.New("--embedded runs one engine: drop --cluster")}
			}
			chCfg, err := ch.config(os.Getenv, log)
			if err != nil {
				return usageError{err}
			}
			kafka.Log = log
			kafkaOpts, err := kafka.Opts(os.Getenv)
			if err != nil {
				return usageError{err}
			}
			cluster, err := cf.cluster()
			if err != nil {
				return usageError{err}
			}
			m, err := resolve.ParseMode(*mode)
			if err != nil {
				return usageError{err}
			}
			assertFormats, err := parseFormats(*formats)
			if err != nil {
				return usageError{err}
			}
			if sc.ArgsKey, err = loadArgsKey(*keyFile, log); err != nil {
				return err
			}
			if sc.ArgsKey == nil {
				log.Info("args_hash is an unkeyed SHA-256: set --args-hash-key-file or " + argsKeyEnv + " to key it")
			}
			common.limitMemory()
			sc.Resolver = resolve.Resolver{Mode: m, Formats: assertFormats}
			if sc.Resolver.Approvals, err = gf.gate(); err != nil {
				return err
			}
			sc.Brokers = brokers.List()
			sc.ResolverBuild = build()
			sc.KafkaOpts = append(sc.KafkaOpts, kafkaOpts...)
			sc.KafkaOpts = append(sc.KafkaOpts, kgo.SessionTimeout(*session), kgo.RebalanceTimeout(*rebalance))
			err = runDaemon(ctx, log, daemonArgs{stream: sc, ch: chCfg, kafka: kafka, kafkaOpts: kafkaOpts, connectTimeout: common.connectTimeout,
				cluster: cluster, http: hf, embedded: *embed, ports: ports, migrate: *migrate, history: *history, approvals: gf, otlp: of, trace: tf})
			if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
				// A signal during start-up (connecting, migrating) is a
				// shutdown asked for, not a failure.
				log.Info("resolverd stopped during start-up", "err", err)
				return nil
			}
			return err
		},
	}
}

type daemonArgs struct {
	stream         stream.Config
	ch             sink.Config
	kafka          kafkaconf.Config
	kafkaOpts      []kgo.Opt // kafka's, for the start-up check
	connectTimeout time.Duration
	cluster        *sink.Cluster // nil: one server
	http           httpFlags
	embedded       string
	ports          portFlags // of the embedded stack
	migrate        bool
	history        bool // registry history (registry.go)
	approvals      gateFlags
	otlp           otlpFlags
	trace          traceFlags
}

func runDaemon(ctx context.Context, log *slog.Logger, a daemonArgs) error {
	log.Info("resolverd starting", "build", a.stream.ResolverBuild, "mode", a.stream.Resolver.Mode, "analysis", a.stream.AnalysisID)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var st *embedded.Stack
	if a.embedded != "" {
		if err := a.ports.check(); err != nil {
			return err
		}
		opts := a.ports.options(a.embedded, log)
		opts.Registerer = reg
		var err error
		st, err = embedded.Start(ctx, opts)
		if err != nil {
			return err
		}
		defer func() {
			if err := st.Close(); err != nil {
				log.Warn("embedded stack stop", "err", err)
			}
			log.Info("embedded stack stopped")
		}()
		a.stream.Brokers = st.Brokers
		a.ch.Addr = []string{st.ClickHouse.Addr()}
		a.migrate = true
		a.approvals.embedded = true // a missing approvals topic is created (gateFlags.follow)
		if err := ensureTopics(ctx, st.Brokers, a.http.auditTopic, a.http.decisionsTopic, a.stream.OTLPSpansTopic, a.stream.OTLPLogsTopic); err != nil {
			return err
		}
	}
	if err := a.stream.Validate(); err != nil {
		return usageError{err}
	}
	if err := checkKafka(ctx, log, a.stream.Brokers, a.stream.ClientID, a.kafka, a.kafkaOpts, a.connectTimeout); err != nil {
		return err
	}
	approvalsOpts := append([]kgo.Opt{kgo.SeedBrokers(a.stream.Brokers...), kgo.ClientID(a.stream.ClientID + "-approvals")}, a.kafkaOpts...)
	followApprovals, err := a.approvals.follow(ctx, a.stream.Resolver.Approvals, approvalsOpts, log, reg)
	if err != nil {
		return err
	}
	opts := []sink.Option{sink.WithLogger(log), sink.WithRegisterer(reg)}
	if a.migrate {
		opts = append(opts, sink.WithMigrate())
	}
	if a.cluster != nil {
		opts = append(opts, sink.WithCluster(*a.cluster))
	}
	ch, err := connectClickHouse(ctx, log, a.ch, a.connectTimeout, opts...)
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	defer ch.Close()
	if a.stream.ArchiveCalls {
		if err := ch.CheckArchive(ctx); err != nil {
			return fmt.Errorf("clickhouse: --archive-calls: %w", err)
		}
	}
	log.Info("clickhouse connected", "addr", a.ch.Addr, "database", a.ch.Database, "archive_calls", a.stream.ArchiveCalls)

	rec, err := registryHistory(a, ch, log, reg)
	if err != nil {
		return err
	}
	approvalRec, err := approvalHistory(a, approvalsOpts, ch, log, reg)
	if err != nil {
		return err
	}
	var storeOpts []registry.Option
	if rec != nil {
		// The store reports what each listing changed; it then reads the
		// listings topic from the start, not from a checkpoint.
		storeOpts = append(storeOpts, registry.WithChanges(rec.ObserveChanges))
	}
	store := newStore(a.stream.Resolver, storeOpts...)
	a.stream.Suggester = suggest.New()
	out := appender.Sink(ch.Appender())
	if a.http.decisionsTopic != "" {
		dk, err := decisions.NewKafka(decisions.Config{Brokers: a.stream.Brokers, Topic: a.http.decisionsTopic, Opts: a.stream.KafkaOpts}, reg)
		if err != nil {
			return err
		}
		defer dk.Close()
		out = appender.Tee(out, dk)
		log.Info("decisions topic on", "topic", a.http.decisionsTopic)
	}
	p, err := stream.New(a.stream, store, out, log, reg)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.Run(gctx) })
	g.Go(func() error { return followApprovals(gctx) })
	if rec != nil {
		g.Go(func() error { return rec.Run(gctx) })
	}
	if approvalRec != nil {
		g.Go(func() error { return approvalRec.Run(gctx) })
	}
	if err := serveOTLP(gctx, g, log, reg, a.otlp, a.stream); err != nil {
		return err
	}
	if a.http.addr != "" {
		ready := func() error {
			if st != nil {
				if err := st.Ready(); err != nil {
					return err
				}
			}
			if !p.Ready() {
				return errors.New("registry history not caught up or consumer group not joined")
			}
			return nil
		}
		if err := serveHTTP(gctx, g, log, reg, a, store, ready, p.Decides); err != nil {
			return err
		}
	}
	err = g.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	log.Info("resolverd stopped", "err", err)
	return err
}

// checkKafka fails fast when the brokers refuse the connection's TLS or
// SASL, which the clients would otherwise retry for as long as the
// process lives (kafkaconf.Check), and waits up to timeout for a broker to
// answer. opts are kafka's.
func checkKafka(ctx context.Context, log *slog.Logger, brokers []string, clientID string, kafka kafkaconf.Config, opts []kgo.Opt, timeout time.Duration) error {
	// The check's client id last: opts may name the command's own.
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...), kgo.ClientID(clientID+"-check"))...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := kafka.Check(cctx, cl); err != nil {
		return fmt.Errorf("kafka %v: %w", brokers, err)
	}
	log.Info("kafka connected", append([]any{"brokers", brokers}, kafka.Describe()...)...)
	return nil
}

// connectClickHouse opens the sink, retrying while ClickHouse cannot be
// reached: a server restarting, or started with resolverd, is a wait, not
// a failed start. Nothing listening or no answer in time is waited for up
// to timeout (--connect-timeout). A connection closed or reset by the
// server is waited for only resetWait: an engine that aborts resets the
// connections it had (chengine) and is back within about two seconds,
// while a plaintext client at a TLS port is reset every time, and that
// configuration error must fail fast. A refused login, a refused TLS
// handshake (sink.KindTLS: a client certificate missing or not trusted, a
// server certificate that does not verify) or a schema that does not fit
// fails at once.
func connectClickHouse(ctx context.Context, log *slog.Logger, cfg sink.Config, timeout time.Duration, opts ...sink.Option) (*sink.ClickHouse, error) {
	const resetWait = 5 * time.Second
	start := time.Now()
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		ch, err := sink.NewClickHouse(ctx, cfg, opts...)
		if err == nil {
			return ch, nil
		}
		limit := timeout
		switch {
		case errors.Is(err, syscall.ECONNREFUSED), sink.Kind(err) == sink.KindTimeout:
		case sink.Kind(err) == sink.KindNetwork:
			limit = min(timeout, resetWait)
		default:
			return nil, err
		}
		if time.Since(start)+wait > limit {
			if limit < timeout {
				hint := "a TLS port? see --clickhouse-tls"
				if cfg.TLS != nil { // a refused handshake fails at once (sink.KindTLS): not that
					hint = "TLS is on: is this ClickHouse's secure port? see --clickhouse"
				}
				return nil, fmt.Errorf("connection closed by the server on every try for %s (%s): %w", time.Since(start).Round(100*time.Millisecond), hint, err)
			}
			return nil, fmt.Errorf("not reachable for %s (--connect-timeout): %w", timeout, err)
		}
		log.Warn("clickhouse not reachable yet, retrying", "addr", cfg.Addr, "attempt", attempt, "in", wait, "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}
