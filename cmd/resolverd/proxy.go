package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/resolve/suggest"
)

const proxyHelp = `Serves as an HTTP proxy in front of model APIs (OpenAI Chat Completions
and Anthropic Messages, streaming or not; OpenAI Responses, not
streaming): an unmodified SDK pointed at it
(its base URL) works as before, and every tool call a response returns
is decided against the tools its request declared, recorded in the
audit topic (acknowledged) before the client gets the response, and,
under the route's policy block, withheld from the client when it is
rejected; under retry the proxy first answers the model the call's fix
text as that tool's error and asks again, a bounded number of times. resolverd run stores the decisions with source "model-proxy".

The client's credentials (Authorization, x-api-key) pass through to
the upstream and are never logged or kept. An upstream error passes
through as it is. When the audit topic does not acknowledge, the
response is refused (503 in the API's error shape): no audit, no tool
call.

The configuration file (YAML or JSON) holds the routes (path prefix,
api openai or anthropic, upstream base URL, registry, policy observe,
block or retry, retries, retry_deadline), the mode, formats and the limits; see docs/commands.md
(resolverd proxy).

Every flag can also be set as RESOLVERD_<FLAG> (dashes as underscores).`

// proxyGCPercent is the proxy's --gc-percent. Its live heap is small (a
// few MB: the compiled tool sets) and every response allocates tens of
// KB, so at the runtime's 100 the collector runs tens of times a second
// at 1,000 responses a second, and its pauses and assists are most of
// the latency the proxy adds at p99 (docs/performance.md §15);
// --memory-limit-mb still bounds the heap.
const proxyGCPercent = 400

// proxyFlags are the command's flags.
type proxyFlags struct {
	commonFlags
	config, listen  string
	brokers         kafkaconf.Brokers
	kafka           kafkaconf.Config
	auditTopic      string
	auditTimeout    time.Duration
	tlsCert, tlsKey string
	maxConns        int
	pprof           bool
	trace           traceFlags
}

func proxyCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd proxy", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var f proxyFlags
	fs.StringVar(&f.config, "config", "", "proxy configuration `FILE` (YAML or JSON)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8091", "HTTP listen `address`: the routes, /metrics, /healthz")
	f.brokers.Register(fs, kafkaconf.DefaultBrokers, "empty: no Kafka, no audit trail; development only")
	f.kafka.Register(fs)
	fs.StringVar(&f.auditTopic, "audit-topic", audit.DefaultTopic, "audit `topic`: every decision is produced there, and acknowledged, before the response is answered (resolverd run stores them)")
	fs.DurationVar(&f.auditTimeout, "audit-timeout", 5*time.Second, "longest wait for the audit topic's acknowledgement before the response is refused (at least 1s)")
	fs.StringVar(&f.tlsCert, "http-tls-cert", "", "PEM certificate `FILE`: with --http-tls-key, HTTPS only (reloaded on SIGHUP)")
	fs.StringVar(&f.tlsKey, "http-tls-key", "", "PEM private key `FILE` of --http-tls-cert")
	fs.IntVar(&f.maxConns, "http-max-conns", httpapi.DefaultMaxConns, "most HTTP connections open at once (more are answered 503 and closed)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve runtime profiles under /debug/pprof/ on --listen")
	f.commonFlags.register(fs, 512, proxyGCPercent, commonHelp{})
	f.trace.register(fs, "resolverd-proxy")
	return &ffcli.Command{
		Name:       "proxy",
		ShortUsage: "resolverd proxy --config FILE [flags]",
		ShortHelp:  "model API proxy: decide every tool call a model returns against the tools its request declared",
		LongHelp:   proxyHelp,
		FlagSet:    fs,
		Options:    []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			log, err := frontEndStart(args, f.config, &f.commonFlags, std.err, f.auditTimeout, f.tlsCert, f.tlsKey, f.maxConns)
			if err != nil {
				return err
			}
			cfg, err := modelproxy.LoadConfig(f.config)
			if err != nil {
				return usageError{err}
			}
			f.limitMemory()
			return runProxy(ctx, log, cfg, f)
		},
	}
}

// frontEndStart checks what the gateway and the proxy check before they
// start (no arguments, --config given, the common flags, --audit-timeout,
// TLS, --http-max-conns) and returns the command's logger.
func frontEndStart(args []string, config string, c *commonFlags, w io.Writer, auditTimeout time.Duration, tlsCert, tlsKey string, maxConns int) (*slog.Logger, error) {
	if len(args) > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q", args)}
	}
	if config == "" {
		return nil, usageError{errors.New("needs --config FILE")}
	}
	log, err := c.logger(w)
	if err != nil {
		return nil, err
	}
	switch {
	case auditTimeout < time.Second:
		return nil, usageError{fmt.Errorf("--audit-timeout %v: at least 1s", auditTimeout)}
	case (tlsCert == "") != (tlsKey == ""):
		return nil, usageError{errors.New("--http-tls-cert and --http-tls-key go together")}
	case maxConns <= 0:
		return nil, usageError{errors.New("--http-max-conns must be positive")}
	}
	return log, nil
}

func runProxy(ctx context.Context, log *slog.Logger, cfg modelproxy.Config, f proxyFlags) error {
	log.Info("proxy starting", "build", build(), "routes", len(cfg.Routes))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := modelproxy.Options{Config: cfg, Hints: suggest.New(), ResolverBuild: build(), Logger: log}
	tracer, stopTracing, err := f.trace.tracer(ctx, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	opts.Tracer = tracer
	closeAudit := func() {}
	brokers := f.brokers.List()
	switch {
	case len(brokers) == 0:
		log.Warn("no Kafka (--brokers is empty): decisions are not audited; for development only")
	case f.auditTopic == "":
		log.Warn("no --audit-topic: the proxy acts on decisions that leave no audit trail")
	default:
		kopts, err := f.kafka.Opts(os.Getenv)
		if err != nil {
			return usageError{err}
		}
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("resolverd-proxy")}, kopts...)...)
		if err != nil {
			return fmt.Errorf("kafka: %w", err)
		}
		err = checkTopics(ctx, log, gatewayFlags{commonFlags: f.commonFlags, brokers: f.brokers, kafka: f.kafka}, cl, f.auditTopic)
		cl.Close()
		if err != nil {
			return err
		}
		k, err := audit.NewKafka(audit.KafkaConfig{Brokers: brokers, Topic: f.auditTopic, Timeout: f.auditTimeout,
			MaxRecordBytes: int32(min(cfg.Limits.MaxResponseBytes, 64<<20) + 64<<10), ClientID: "resolverd-proxy-audit", Opts: kopts}, log, reg)
		if err != nil {
			return err
		}
		closeAudit = k.Close
		opts.Audit = k
	}
	p, err := modelproxy.New(opts)
	if err != nil {
		return usageError{err}
	}
	mux := http.NewServeMux()
	mux.Handle("/", p)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	if f.pprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	}
	// No write timeout: a model may think for minutes
	// (limits.upstream_timeout bounds the exchange).
	srv, err := httpapi.NewServer(mux, httpapi.ServerConfig{ReadTimeout: httpapi.DefaultReadTimeout, WriteTimeout: -1, IdleTimeout: 2 * time.Minute,
		MaxConns: f.maxConns, TLSCert: f.tlsCert, TLSKey: f.tlsKey}, log, reg)
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", f.listen, err)
	}
	log.Info("proxy listening", "addr", ln.Addr().String(), "tls", srv.TLS())
	g, gctx := errgroup.WithContext(ctx)
	runServer(gctx, g, log, srv, ln, nil, closeAudit)
	err = g.Wait()
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil
	}
	log.Info("proxy stopped", "err", err)
	return err
}
