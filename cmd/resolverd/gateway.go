package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/gateway"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

const gatewayHelp = `Serves an MCP endpoint (Streamable HTTP, at /mcp on --listen) that merges
the tools of several MCP servers, the upstreams of --config: commands
spawned and spoken to over stdio (restarted with a backoff when they
exit), or Streamable HTTP URLs, each with a name and a trust tier.

Clients see every tool as server__tool (the separator is configurable).
On connecting to an upstream, and whenever it sends
notifications/tools/list_changed, the gateway lists its tools, produces
a listing event to --listings-topic and applies it to its own registry,
then tells its clients the list changed.

Every tools/call is decided against the gateway's registry before any
upstream sees it. A name that is no one tool (fabricated, misspelt,
provided by several servers) is answered JSON-RPC error -32602 naming
the tools to call instead; arguments that fail the tool (undeclared,
missing, wrong type) and a definition changed since the client listed
it (M4, by any spelling of the name) are answered a result with isError
whose text says what is wrong, where and what would be right, for the
model to correct the call; the decision and hints are the error's data
or the result's _meta. A call that resolves is forwarded to its server. Either way the decision is
produced to the audit topic, and acknowledged, before the gateway acts
on it: resolverd run stores it in ClickHouse with source "gateway", once.
When Kafka cannot take it the call is refused (-32603), never executed
unaudited.

--brokers "" runs without Kafka (no listing events, no audit trail): for
development only.

Clients authenticate with the bearer tokens of --http-tokens-file (the
file of resolverd run's --http-tokens-file: one per line, optional
"name:" prefix); the token's name is the agent_id of the client's calls,
and a session is bound to the token that opened it. SIGHUP reloads the
tokens and the TLS certificate (--http-tls-cert, --http-tls-key).
/metrics, /healthz and /readyz (200 once every upstream has been listed)
are open.

The configuration file (YAML or JSON) holds the registry name, the
separator, the mode (strict or pin-assisted), observe (forward rejected
calls too, recorded as observed), list_ttl (how long a client may keep
a tools/list answer: a client without a session, protocol 2026-07-28,
gets M4 for a definition changed within it unless it listed since),
poll_tools (how often upstreams are listed besides list_changed), the
limits (sessions, request bytes, calls in flight, idle sessions, the
grace of a session whose client left without DELETE, upstream timeout)
and the upstreams; see docs/commands.md (resolverd gateway).

Every flag can also be set as RESOLVERD_<FLAG> (dashes as underscores).`

// gatewayFlags are the command's flags.
type gatewayFlags struct {
	frontEndFlags
	listingsTopic, tokensFile string
	approvals                 gateFlags
}

func gatewayCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd gateway", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var f gatewayFlags
	fe := frontEnd{name: "gateway", longHelp: gatewayHelp,
		shortHelp: "MCP gateway: merge MCP servers, decide every tools/call before it reaches them",
		listen:    "127.0.0.1:8090", serves: "the MCP endpoint /mcp, /metrics, /healthz, /readyz",
		decided: "the call is rejected or forwarded", refused: "the call",
		// --gc-percent 400: the MCP SDK allocates much per message, and
		// collecting less often spares CPU while the memory limit bounds
		// the heap.
		memLimitMB: 256, gcPercent: 400}
	f.frontEndFlags.register(fs, fe)
	f.approvals.registerLive(fs)
	fs.StringVar(&f.listingsTopic, "listings-topic", schema.TopicListings, "listings `topic` the upstreams' listings are produced to")
	fs.StringVar(&f.tokensFile, "http-tokens-file", "", "bearer tokens `FILE` (the API's: one per line, optional name: prefix, # comments): /mcp then needs Authorization: Bearer; reloaded on SIGHUP and when it changes")
	var cfg gateway.Config
	return f.command(std, fs, fe,
		func(path string) (err error) { cfg, err = gateway.LoadConfig(path); return err },
		func(ctx context.Context, log *slog.Logger) error { return runGateway(ctx, log, cfg, f) })
}

func runGateway(ctx context.Context, log *slog.Logger, cfg gateway.Config, f gatewayFlags) error {
	log.Info("gateway starting", "build", build(), "registry", cfg.Registry, "mode", cfg.Mode, "upstreams", len(cfg.Upstreams), "observe", cfg.Observe)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := gateway.Options{Config: cfg, Hints: suggest.New(), ResolverBuild: build(), Getenv: os.Getenv, Logger: log, Registerer: reg}
	tracer, stopTracing, err := f.trace.tracer(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	opts.Tracer = tracer
	closeAudit := func() {}
	if opts.Approvals, err = f.approvals.gate(); err != nil {
		return err
	}
	followApprovals := func(context.Context) error { return nil }

	brokers := f.brokers.List()
	if len(brokers) == 0 && opts.Approvals != nil {
		return usageError{errors.New("--approvals needs Kafka (--brokers): the baseline is the approvals topic")}
	}
	if len(brokers) == 0 {
		log.Warn("no Kafka (--brokers is empty): listings are not produced and decisions are not audited; for development only")
	} else {
		f.kafka.Log = log
		kopts, err := f.kafka.Opts(os.Getenv)
		if err != nil {
			return usageError{err}
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{
			kgo.SeedBrokers(brokers...), kgo.ClientID("resolverd-gateway"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		}, kopts...)...)
		if err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		defer cl.Close()
		topics := []string{f.listingsTopic}
		if f.auditTopic != "" {
			topics = append(topics, f.auditTopic)
		}
		if err := f.checkTopics(ctx, log, cl, topics...); err != nil {
			return err
		}
		// Caught up before the first call is decided.
		followApprovals, err = f.approvals.follow(ctx, opts.Approvals,
			append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("resolverd-gateway-approvals")}, kopts...), log, reg)
		if err != nil {
			return err
		}
		opts.Listings = gateway.NewKafkaPublisher(cl, f.listingsTopic)
		if f.auditTopic != "" {
			k, err := audit.NewKafka(audit.KafkaConfig{Brokers: brokers, Topic: f.auditTopic, Timeout: f.auditTimeout,
				MaxRecordBytes: int32(cfg.Limits.MaxRequestBytes + 64<<10), ClientID: "resolverd-gateway-audit", Opts: kopts}, log, reg)
			if err != nil {
				return err
			}
			closeAudit = k.Close
			opts.Audit = k
		} else {
			log.Warn("no --audit-topic: the gateway acts on decisions that leave no audit trail")
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	var tokens *bearer.Tokens
	if f.tokensFile != "" {
		var err error
		if tokens, err = bearer.Load(f.tokensFile, log); err != nil {
			return usageError{err}
		}
		opts.Auth = tokens
		g.Go(func() error { tokens.Watch(gctx, 2*time.Second); return nil })
		log.Info("bearer tokens required on /mcp", "file", f.tokensFile, "tokens", tokens.Len())
	}

	gw, err := gateway.New(opts)
	if err != nil {
		return usageError{err}
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", gw.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, down := gw.Ready()
		switch {
		case !ok:
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not every upstream has been listed yet; not connected:", strings.Join(down, ", "))
		case len(down) > 0:
			fmt.Fprintln(w, "ready; upstreams not connected now:", strings.Join(down, ", "))
		default:
			fmt.Fprintln(w, "ready")
		}
	})
	// No read or write timeout: a session's event stream (GET /mcp) stays
	// open, and net/http would cancel it. Headers are bounded in time,
	// bodies by limits.max_request_bytes, calls by the upstream timeout,
	// connections by --http-max-conns.
	srv, err := httpapi.NewServer(mux, httpapi.ServerConfig{ReadTimeout: -1, WriteTimeout: -1, IdleTimeout: 2 * time.Minute,
		MaxConns: f.maxConns, TLSCert: f.tlsCert, TLSKey: f.tlsKey}, log, reg)
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	log.Info("gateway listening", "addr", ln.Addr().String(), "tls", srv.TLS())
	g.Go(func() error { return gw.Run(gctx) })
	g.Go(func() error { return followApprovals(gctx) })
	runServer(gctx, g, log, srv, ln, tokens, closeAudit)
	err = g.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	log.Info("gateway stopped", "err", err)
	return err
}
