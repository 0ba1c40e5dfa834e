package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/httpapi"
)

// httpFlags are run's flags of the HTTP API, its security and its bounds,
// and of the audit and decisions topics.
type httpFlags struct {
	addr       string
	pprof      bool
	tlsCert    string
	tlsKey     string
	tokensFile string
	authProbes bool
	server     httpapi.ServerConfig
	maxBodyKB  int64
	maxBatch   int
	inflight   int
	inflightMB int64

	auditTopic     string
	auditTimeout   time.Duration
	decisionsTopic string
}

func (h *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&h.addr, "http", "127.0.0.1:8080", "HTTP listen `address` (empty: no HTTP)")
	fs.BoolVar(&h.pprof, "pprof", false, "serve runtime profiles under /debug/pprof/ on --http")
	fs.StringVar(&h.tlsCert, "http-tls-cert", "", "PEM certificate `FILE` of the HTTP API: with --http-tls-key, HTTPS only (reloaded on SIGHUP)")
	fs.StringVar(&h.tlsKey, "http-tls-key", "", "PEM private key `FILE` of --http-tls-cert")
	fs.StringVar(&h.tokensFile, "http-tokens-file", "", "bearer tokens `FILE` (one per line, optional name: prefix, # comments): /v1/* then needs Authorization: Bearer; reloaded on SIGHUP and when it changes")
	fs.BoolVar(&h.authProbes, "http-auth-probes", false, "with --http-tokens-file, require a token on /metrics, /healthz and /readyz too")
	fs.DurationVar(&h.server.ReadTimeout, "http-read-timeout", httpapi.DefaultReadTimeout, "longest time to receive a request, body included (a slower body is answered 408)")
	fs.DurationVar(&h.server.WriteTimeout, "http-write-timeout", httpapi.DefaultWriteTimeout, "longest time to answer a request, the audit trail's acknowledgement included")
	fs.DurationVar(&h.server.IdleTimeout, "http-idle-timeout", httpapi.DefaultIdleTimeout, "how long an idle keep-alive connection stays open")
	fs.IntVar(&h.server.MaxConns, "http-max-conns", httpapi.DefaultMaxConns, "most HTTP connections open at once (more are answered 503 and closed)")
	fs.Int64Var(&h.maxBodyKB, "http-max-body-kb", httpapi.DefaultMaxBody>>10, "largest request body, `KiB` (413 beyond); the audit topic must take records this large plus 64 KiB")
	fs.IntVar(&h.maxBatch, "http-max-batch", httpapi.DefaultMaxBatch, "most call events in one POST /v1/resolve (413 beyond)")
	fs.IntVar(&h.inflight, "http-max-inflight", httpapi.DefaultMaxInFlight, "most resolve requests answered at once (503 beyond)")
	fs.Int64Var(&h.inflightMB, "http-max-inflight-mb", httpapi.DefaultMaxInFlightBytes>>20, "most request body `MiB` held at once (503 beyond): bounds the API's memory whatever clients send")
	fs.StringVar(&h.auditTopic, "audit-topic", audit.DefaultTopic, "audit `topic`: POST /v1/resolve produces each decision there and answers only after the ack (503 otherwise), and run stores them from it (empty: no audit trail)")
	fs.DurationVar(&h.auditTimeout, "audit-timeout", 5*time.Second, "longest wait for the audit topic's acknowledgement before answering 503 (at least 1s)")
	fs.StringVar(&h.decisionsTopic, "decisions-topic", "", "`TOPIC` that receives every stored decision as JSON keyed by session, before offsets are committed (empty: none)")
}

func (h *httpFlags) validate() error {
	switch {
	case (h.tlsCert == "") != (h.tlsKey == ""):
		return usageError{fmt.Errorf("--http-tls-cert and --http-tls-key go together")}
	case h.authProbes && h.tokensFile == "":
		return usageError{fmt.Errorf("--http-auth-probes needs --http-tokens-file")}
	case h.maxBodyKB <= 0 || h.maxBatch <= 0 || h.inflight <= 0 || h.inflightMB <= 0 || h.server.MaxConns <= 0:
		return usageError{fmt.Errorf("the --http-max-* flags must be positive")}
	case h.inflightMB<<20 < h.maxBodyKB<<10:
		return usageError{fmt.Errorf("--http-max-inflight-mb %d is less than one body of --http-max-body-kb %d", h.inflightMB, h.maxBodyKB)}
	case h.server.ReadTimeout < 0 || h.server.WriteTimeout < 0:
		return usageError{fmt.Errorf("--http-read-timeout and --http-write-timeout must not be negative")}
	case h.auditTimeout < time.Second:
		return usageError{fmt.Errorf("--audit-timeout %v: at least 1s", h.auditTimeout)}
	}
	h.server.TLSCert, h.server.TLSKey = h.tlsCert, h.tlsKey
	return nil
}
