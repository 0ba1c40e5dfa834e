package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/resolve/suggest"
)

const proxyHelp = `Serves as an HTTP proxy in front of model APIs (OpenAI Chat Completions
and Responses, Anthropic Messages; streaming or not): an unmodified SDK
pointed at it (its base URL) works as before, and every tool call a
response returns is decided against the tools its request declared,
recorded in the audit topic (acknowledged) before the client gets the
response, and, under the route's policy block, withheld from the client
when it is rejected; under retry the proxy first answers the model the
call's fix text as that tool's error and asks again, a bounded number
of times. resolverd run stores the decisions with source "model-proxy".

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
	frontEndFlags
	pprof bool
}

func proxyCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd proxy", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var f proxyFlags
	fe := frontEnd{name: "proxy", longHelp: proxyHelp,
		shortHelp: "model API proxy: decide every tool call a model returns against the tools its request declared",
		listen:    "127.0.0.1:8091", serves: "the routes, /metrics, /healthz",
		decided: "the response is answered", refused: "the response",
		memLimitMB: 512, gcPercent: proxyGCPercent}
	f.frontEndFlags.register(fs, fe)
	fs.BoolVar(&f.pprof, "pprof", false, "serve runtime profiles under /debug/pprof/ on --listen")
	var cfg modelproxy.Config
	return f.command(std, fs, fe,
		func(path string) (err error) { cfg, err = modelproxy.LoadConfig(path); return err },
		func(ctx context.Context, log *slog.Logger) error { return runProxy(ctx, log, cfg, f) })
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
		err = f.checkTopics(ctx, log, cl, f.auditTopic)
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
