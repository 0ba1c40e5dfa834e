package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/schema"
)

// The peer is the floor under the proxy on the same machine: what any
// proxy that audits a response before answering must do at least, and
// nothing else. It forwards the request to the upstream, reads the whole
// answer, produces one audit record per tool call with the proxy's
// producer (audit.Kafka: acks=all, idempotent, no linger) and waits for
// the broker's acknowledgement, then writes the answer in one piece. It
// parses nothing and decides nothing, and a stream's text does not go
// ahead of its audit as the proxy's does (so its first byte is its last).
// It runs in its own process as the proxy does (this binary started
// with -serve-peer), with the proxy's collector setting.

// serveAsPeer serves the peer on addr until SIGINT or SIGTERM.
func serveAsPeer(addr, upstream, brokers string) error {
	debug.SetGCPercent(400) // resolverd proxy's default --gc-percent
	var prod audit.Producer = audit.ProducerFunc(func(context.Context, ...*audit.Record) error { return nil })
	if brokers != "" {
		k, err := audit.NewKafka(audit.KafkaConfig{Brokers: strings.Split(brokers, ","), ClientID: "benchproxy-peer"}, nil, nil)
		if err != nil {
			return err
		}
		defer k.Close()
		prod = k
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = modelproxy.DefaultIdleConns, modelproxy.DefaultIdleConns
	client := &http.Client{Transport: t}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: peerHandler(client, upstream, prod), ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func peerHandler(client *http.Client, upstream string, prod audit.Producer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		path := strings.TrimPrefix(r.URL.Path, "/openai")
		req, err := http.NewRequestWithContext(r.Context(), r.Method, upstream+path+"?"+r.URL.RawQuery, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		req.Header = r.Header.Clone()
		up, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		answer, err := io.ReadAll(up.Body)
		up.Body.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		// One record per tool call, each about a third of the answer: the
		// proxy's records hold the call event and its decision, a few
		// hundred bytes each.
		recs := make([]*audit.Record, callsPerResponse)
		for i := range recs {
			n := len(answer) / callsPerResponse
			recs[i] = &audit.Record{Source: schema.SourceModelProxy, Call: answer[i*n : (i+1)*n], DecidedAt: time.Now()}
		}
		if err := prod.Produce(r.Context(), recs...); err != nil {
			http.Error(w, fmt.Sprintf("audit: %v", err), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", up.Header.Get("Content-Type"))
		w.WriteHeader(up.StatusCode)
		_, _ = w.Write(answer)
	})
}
