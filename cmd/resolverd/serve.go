package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/embedded"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/registry"
)

// serveHTTP starts the HTTP API in g: the audit producer, the bearer
// tokens (watched, and reloaded on SIGHUP with the TLS certificate), the
// handler and the bounded server. It returns once listening.
func serveHTTP(ctx context.Context, g *errgroup.Group, log *slog.Logger, reg *prometheus.Registry, a daemonArgs, store *registry.Store, ready, decides func() error) error {
	hf := a.http
	cfg := httpapi.Config{
		Store: store, Resolver: a.stream.Resolver, Suggester: a.stream.Suggester, ResolverBuild: a.stream.ResolverBuild,
		MaxBody: hf.maxBodyKB << 10, MaxBatch: hf.maxBatch, MaxInFlight: hf.inflight, MaxInFlightBytes: hf.inflightMB << 20,
		Ready: ready, Decides: decides, Gatherer: reg, Registerer: reg, Logger: log, Pprof: hf.pprof,
		AuthProbes: hf.authProbes,
	}
	tracer, stopTracing, err := a.trace.tracer(ctx, log)
	if err != nil {
		return err
	}
	cfg.Tracer = tracer
	closeAudit := stopTracing
	if hf.auditTopic != "" {
		k, err := audit.NewKafka(audit.KafkaConfig{Brokers: a.stream.Brokers, Topic: hf.auditTopic, Timeout: hf.auditTimeout,
			MaxRecordBytes: int32(cfg.MaxBody + 64<<10), Opts: a.stream.KafkaOpts}, log, reg)
		if err != nil {
			return err
		}
		closeAudit = func() { k.Close(); stopTracing() }
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := k.Check(cctx); err != nil {
			log.Error("the audit topic is not usable: POST /v1/resolve answers 503 until it is", "err", err)
		}
		cancel()
		cfg.Audit = k
	} else {
		log.Warn("no --audit-topic: POST /v1/resolve answers decisions that leave no audit trail")
	}
	var tokens *bearer.Tokens
	if hf.tokensFile != "" {
		var err error
		if tokens, err = bearer.Load(hf.tokensFile, log); err != nil {
			return usageError{err}
		}
		cfg.Tokens = tokens
		g.Go(func() error { tokens.Watch(ctx, 2*time.Second); return nil })
		log.Info("bearer tokens required on /v1/*", "file", hf.tokensFile, "tokens", tokens.Len(), "probes", hf.authProbes)
	}
	h, err := httpapi.New(cfg)
	if err != nil {
		return err
	}
	if h, err = a.approvals.mount(ctx, g, h, tokens, append([]kgo.Opt{kgo.SeedBrokers(a.stream.Brokers...), kgo.ClientID(a.stream.ClientID + "-approvals-api")}, a.kafkaOpts...), log, reg); err != nil {
		return err
	}
	srv, err := httpapi.NewServer(h, hf.server, log, reg)
	if err != nil {
		return usageError{err}
	}
	ln, err := net.Listen("tcp", hf.addr)
	if err != nil {
		return fmt.Errorf("--http %s: %w (choose another address, or --http \"\" for no HTTP)", hf.addr, err)
	}
	log.Info("http listening", "addr", ln.Addr().String(), "tls", srv.TLS())
	runServer(ctx, g, log, srv, ln, tokens, closeAudit)
	return nil
}

// runServer serves srv on ln in g until ctx is done, then shuts it down
// and calls after (once the requests in flight are answered); SIGHUP
// reloads the bearer tokens (nil: none) and the TLS certificate.
func runServer(ctx context.Context, g *errgroup.Group, log *slog.Logger, srv *httpapi.Server, ln net.Listener, tokens *bearer.Tokens, after func()) {
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		defer after() // after the requests in flight have their acks
		return srv.Shutdown(sctx)
	})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	g.Go(func() error {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-hup:
			}
			log.Info("SIGHUP: reloading the bearer tokens and the TLS certificate")
			if tokens != nil {
				if err := tokens.Reload(); err != nil {
					log.Error("bearer tokens not reloaded; the tokens in force stay", "err", err)
				}
			}
			if err := srv.Reload(); err != nil {
				log.Error("TLS certificate not reloaded; the one in use stays", "err", err)
			}
		}
	})
}

// ensureTopics creates the audit and decisions topics on the embedded
// broker when its data predates them (embedded.Topics are created only
// with a new data directory).
func ensureTopics(ctx context.Context, brokers []string, topics ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, t := range topics {
		if t == "" {
			continue
		}
		resp, err := adm.CreateTopic(ctx, embedded.DefaultCallPartitions, 1, nil, t)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("embedded: create topic %s: %w", t, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("embedded: create topic %s: %w", t, resp.Err)
		}
	}
	return nil
}
