package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/toolaudit/toolaudit/otlp"
	"github.com/toolaudit/toolaudit/otlp/receiver"
	"github.com/toolaudit/toolaudit/stream"
)

// otlpFlags are the OTLP receiver's.
type otlpFlags struct {
	http, grpc string
	maxMB      int
}

func (f *otlpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.http, "otlp-http", "", "serve OTLP/HTTP (POST /v1/traces and /v1/logs, protobuf or JSON) at `ADDR` (the convention: 127.0.0.1:4318; empty: off): each export is produced to --otlp-spans-topic or --otlp-logs-topic, which this run consumes, and answered once Kafka has it")
	fs.StringVar(&f.grpc, "otlp-grpc", "", "serve OTLP/gRPC (trace and logs services) at `ADDR` (the convention: 127.0.0.1:4317; empty: off)")
	fs.IntVar(&f.maxMB, "otlp-max-mb", 1, "largest OTLP export accepted, `MiB` after decompression (413 / RESOURCE_EXHAUSTED above): at most what the topics take (Kafka's default message.max.bytes is 1 MB)")
}

func (f *otlpFlags) on() bool { return f.http != "" || f.grpc != "" }

func (f *otlpFlags) validate(sc *stream.Config) error {
	if !f.on() {
		return nil
	}
	if sc.OTLPSpansTopic == "" && sc.OTLPLogsTopic == "" {
		return errors.New("--otlp-http and --otlp-grpc need --otlp-spans-topic or --otlp-logs-topic: the topics the exports go to")
	}
	if f.maxMB <= 0 {
		return fmt.Errorf("--otlp-max-mb %d: want > 0", f.maxMB)
	}
	return nil
}

// serveOTLP starts the OTLP receiver in g, when asked for; it returns once
// listening.
func serveOTLP(ctx context.Context, g *errgroup.Group, log *slog.Logger, reg prometheus.Registerer, f otlpFlags, sc stream.Config) error {
	if !f.on() {
		return nil
	}
	max := f.maxMB << 20
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(sc.Brokers...)}, sc.KafkaOpts...),
		kgo.ClientID(sc.ClientID+"-otlp"), kgo.ProducerBatchMaxBytes(int32(max+64<<10)), kgo.ProducerLinger(0))...)
	if err != nil {
		return fmt.Errorf("otlp receiver: %w", err)
	}
	r, err := receiver.New(receiver.Config{SpansTopic: sc.OTLPSpansTopic, LogsTopic: sc.OTLPLogsTopic,
		Encoding: sc.OTLPEncoding, Limits: otlp.Limits{MaxPayload: max}}, cl, log, reg)
	if err != nil {
		cl.Close()
		return err
	}
	var hln, gln net.Listener
	if f.http != "" {
		if hln, err = net.Listen("tcp", f.http); err != nil {
			cl.Close()
			return fmt.Errorf("--otlp-http %s: %w", f.http, err)
		}
	}
	if f.grpc != "" {
		if gln, err = net.Listen("tcp", f.grpc); err != nil {
			cl.Close()
			if hln != nil {
				hln.Close()
			}
			return fmt.Errorf("--otlp-grpc %s: %w", f.grpc, err)
		}
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
	gs := grpc.NewServer(r.GRPCServerOptions()...)
	r.RegisterGRPC(gs)
	if hln != nil {
		log.Info("OTLP/HTTP listening", "addr", hln.Addr().String(), "spans_topic", sc.OTLPSpansTopic, "logs_topic", sc.OTLPLogsTopic)
		g.Go(func() error {
			if err := srv.Serve(hln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("otlp http: %w", err)
			}
			return nil
		})
	}
	if gln != nil {
		log.Info("OTLP/gRPC listening", "addr", gln.Addr().String())
		g.Go(func() error {
			if err := gs.Serve(gln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				return fmt.Errorf("otlp grpc: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		defer cl.Close() // after the exports in flight have their acks
		stopped := make(chan struct{})
		go func() { gs.GracefulStop(); close(stopped) }()
		err := srv.Shutdown(sctx)
		select {
		case <-stopped:
		case <-sctx.Done():
			gs.Stop()
		}
		return err
	})
	return nil
}
