// Package receiver is an OTLP receiver for traces and logs: OTLP/HTTP
// (protobuf and JSON, on one port) and OTLP/gRPC, as an application's
// OpenTelemetry SDK exports to a Collector. Each export request is checked
// with package otlp (the stream's decoder, its bounds) and produced, as
// one record, to the topic the stream reads for its signal, in the
// encoding the stream reads (the Collector's Kafka exporter's layout, so
// that one reader serves both); the client is answered only once Kafka
// has acknowledged the record, like the resolve API: an export that is
// answered is durable, and one Kafka did not take is answered 503
// (HTTP, with Retry-After) or UNAVAILABLE (gRPC), which OTLP exporters
// retry. Nothing is decided here: the stream decides every call of the
// record, exactly once.
//
// The answer's partial success counts the items the stream cannot check:
// tool calls without a name, spans over the attribute bound, values over
// the size or depth bounds (each becomes a MALFORMED decision), with the
// first reason in error_message. Spans that are no tool call at all are
// accepted and not counted: they are a fleet's ordinary traffic.
package receiver

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolaudit/toolaudit/otlp"
)

// Producer is what the receiver needs of Kafka: *kgo.Client.
type Producer interface {
	ProduceSync(ctx context.Context, rs ...*kgo.Record) kgo.ProduceResults
}

// Config configures a Receiver.
type Config struct {
	// SpansTopic and LogsTopic receive the export requests of each
	// signal; an empty one refuses its signal (404 / UNIMPLEMENTED).
	SpansTopic, LogsTopic string
	// Encoding is how the records are written: the stream's
	// (stream.Config.OTLPEncoding). Default otlp.Proto.
	Encoding otlp.Encoding
	// Limits bound a request as the stream bounds a record
	// (otlp.DefaultLimits for zero fields); MaxPayload bounds the body
	// after decompression too.
	Limits otlp.Limits
	// ProduceTimeout bounds the wait for Kafka's acknowledgement. Default
	// 10s.
	ProduceTimeout time.Duration
}

// Receiver serves OTLP. Safe for concurrent use.
type Receiver struct {
	cfg  Config
	lim  otlp.Limits
	prod Producer
	log  *slog.Logger
	m    *metrics
}

// New returns a receiver producing with p; a nil log logs nothing, a nil
// reg registers its metrics nowhere.
func New(cfg Config, p Producer, log *slog.Logger, reg prometheus.Registerer) (*Receiver, error) {
	if cfg.SpansTopic == "" && cfg.LogsTopic == "" {
		return nil, errors.New("otlp receiver: no topic for traces or logs")
	}
	if cfg.Encoding == 0 {
		cfg.Encoding = otlp.Proto
	}
	if cfg.Encoding != otlp.Proto && cfg.Encoding != otlp.JSON {
		return nil, fmt.Errorf("otlp receiver: unknown encoding %d", cfg.Encoding)
	}
	if cfg.ProduceTimeout <= 0 {
		cfg.ProduceTimeout = 10 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	lim := otlp.DefaultLimits
	if cfg.Limits.MaxPayload > 0 {
		lim.MaxPayload = cfg.Limits.MaxPayload
	}
	return &Receiver{cfg: cfg, lim: lim, prod: p, log: log, m: m}, nil
}

// result is what one export request came to.
type result struct {
	rejected int64  // items the stream cannot check
	message  string // the first reason, for error_message
}

// errUnavailable wraps a failure of Kafka: the client should retry.
var errUnavailable = errors.New("otlp receiver: the export could not be stored")

// accept checks one export request written in enc with the stream's
// decoder and bounds, writes it as the stream reads it (r.cfg.Encoding)
// and produces it; it returns once Kafka has acknowledged it. An error
// wrapping errUnavailable is Kafka's; any other is the request's.
func (r *Receiver) accept(ctx context.Context, sig otlp.Signal, body []byte, enc otlp.Encoding) (result, error) {
	topic := r.cfg.SpansTopic
	if sig == otlp.Logs {
		topic = r.cfg.LogsTopic
	}
	res, err := otlp.Decode(body, sig, enc, r.cfg.Limits)
	if err != nil {
		return result{}, err
	}
	payload, err := transcode(body, sig, enc, r.cfg.Encoding)
	if err != nil {
		return result{}, err
	}
	var out result
	for _, c := range res.Calls {
		if c.Malformed != "" {
			if out.rejected++; out.message == "" {
				out.message = fmt.Sprintf("tool call %q cannot be checked: %s", c.Tool, c.Malformed)
			}
		}
	}
	if out.rejected > 0 {
		out.message = fmt.Sprintf("%d of %d tool calls cannot be checked (each is a MALFORMED decision); the first: %s", out.rejected, len(res.Calls), out.message)
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ProduceTimeout)
	defer cancel()
	// Keyed by trace, as the Collector's exporter with
	// partition_traces_by_id: a trace's exports in one partition, in
	// order, where the stream pairs a tool call's execution with the
	// model's record of it.
	var key []byte
	if len(res.Calls) > 0 && res.Calls[0].TraceID != "" {
		key = []byte(res.Calls[0].TraceID)
	}
	if err := r.prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: key, Value: payload}).FirstErr(); err != nil {
		r.log.Warn("OTLP export not stored; the client is told to retry", "topic", topic, "err", err)
		return result{}, fmt.Errorf("%w: %w", errUnavailable, err)
	}
	r.m.items[sig].Add(float64(len(res.Calls)))
	r.m.rejected.Add(float64(out.rejected))
	return out, nil
}

// Handler serves OTLP/HTTP: POST /v1/traces and /v1/logs, bodies
// application/x-protobuf or application/json, optionally gzip, answered
// in the request's encoding.
func (r *Receiver) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/traces", func(w http.ResponseWriter, req *http.Request) { r.serveHTTP(w, req, otlp.Traces) })
	mux.HandleFunc("/v1/logs", func(w http.ResponseWriter, req *http.Request) { r.serveHTTP(w, req, otlp.Logs) })
	return mux
}

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request, sig otlp.Signal) {
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.m.request(sig, "http", codes.InvalidArgument)
		httpError(w, http.StatusMethodNotAllowed, otlp.Proto, "method %s: want POST", req.Method)
		return
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	enc := otlp.Proto
	switch ct {
	case "application/x-protobuf":
	case "application/json":
		enc = otlp.JSON
	default:
		r.m.request(sig, "http", codes.InvalidArgument)
		httpError(w, http.StatusUnsupportedMediaType, otlp.Proto, "unsupported Content-Type %q: want application/x-protobuf or application/json", ct)
		return
	}
	if sig == otlp.Traces && r.cfg.SpansTopic == "" || sig == otlp.Logs && r.cfg.LogsTopic == "" {
		r.m.request(sig, "http", codes.Unimplemented)
		httpError(w, http.StatusNotFound, enc, "this receiver takes no %s", signalName(sig))
		return
	}
	body, err := r.readBody(req)
	if err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, otlp.ErrTooLarge) {
			code = http.StatusRequestEntityTooLarge
		}
		r.m.request(sig, "http", codes.InvalidArgument)
		httpError(w, code, enc, "%v", err)
		return
	}
	res, err := r.accept(req.Context(), sig, body, enc)
	switch {
	case errors.Is(err, errUnavailable):
		r.m.request(sig, "http", codes.Unavailable)
		w.Header().Set("Retry-After", "1")
		httpError(w, http.StatusServiceUnavailable, enc, "%v", err)
		return
	case errors.Is(err, otlp.ErrTooLarge):
		r.m.request(sig, "http", codes.InvalidArgument)
		httpError(w, http.StatusRequestEntityTooLarge, enc, "%v", err)
		return
	case err != nil:
		r.m.request(sig, "http", codes.InvalidArgument)
		httpError(w, http.StatusBadRequest, enc, "%v", err)
		return
	}
	r.m.request(sig, "http", codes.OK)
	b, err := response(sig, enc, res)
	if err != nil {
		httpError(w, http.StatusInternalServerError, enc, "%v", err)
		return
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// readBody reads the request body, gunzipped when so encoded, refusing
// more than MaxPayload bytes either way (a gzip bomb is cut at the bound).
func (r *Receiver) readBody(req *http.Request) ([]byte, error) {
	max := int64(r.lim.MaxPayload)
	var src io.Reader = http.MaxBytesReader(nil, req.Body, max+1)
	switch req.Header.Get("Content-Encoding") {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, fmt.Errorf("gzip body: %w", err)
		}
		defer zr.Close()
		src = zr
	default:
		return nil, fmt.Errorf("unsupported Content-Encoding %q: want gzip or none", req.Header.Get("Content-Encoding"))
	}
	b, err := io.ReadAll(io.LimitReader(src, max+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || int64(len(b)) > max {
		return nil, fmt.Errorf("%w: body over %d bytes", otlp.ErrTooLarge, max)
	}
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return b, nil
}

// transcode turns a request body in enc, which otlp.Decode has read,
// into encoding to.
func transcode(body []byte, sig otlp.Signal, enc, to otlp.Encoding) ([]byte, error) {
	if enc == to {
		return body, nil
	}
	var err error
	if sig == otlp.Traces {
		var td ptrace.Traces
		if enc == otlp.JSON {
			td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(body)
		} else {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(body)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", otlp.ErrUnmarshal, err)
		}
		if to == otlp.JSON {
			return (&ptrace.JSONMarshaler{}).MarshalTraces(td)
		}
		return (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	}
	var ld plog.Logs
	if enc == otlp.JSON {
		ld, err = (&plog.JSONUnmarshaler{}).UnmarshalLogs(body)
	} else {
		ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(body)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", otlp.ErrUnmarshal, err)
	}
	if to == otlp.JSON {
		return (&plog.JSONMarshaler{}).MarshalLogs(ld)
	}
	return (&plog.ProtoMarshaler{}).MarshalLogs(ld)
}

func signalName(sig otlp.Signal) string {
	if sig == otlp.Logs {
		return "logs"
	}
	return "traces"
}

// response is the export's answer in enc.
func response(sig otlp.Signal, enc otlp.Encoding, res result) ([]byte, error) {
	if sig == otlp.Traces {
		resp := ptraceotlp.NewExportResponse()
		if res.rejected > 0 || res.message != "" {
			resp.PartialSuccess().SetRejectedSpans(res.rejected)
			resp.PartialSuccess().SetErrorMessage(res.message)
		}
		if enc == otlp.JSON {
			return resp.MarshalJSON()
		}
		return resp.MarshalProto()
	}
	resp := plogotlp.NewExportResponse()
	if res.rejected > 0 || res.message != "" {
		resp.PartialSuccess().SetRejectedLogRecords(res.rejected)
		resp.PartialSuccess().SetErrorMessage(res.message)
	}
	if enc == otlp.JSON {
		return resp.MarshalJSON()
	}
	return resp.MarshalProto()
}

// httpError answers with a google.rpc.Status in enc, as OTLP/HTTP says.
func httpError(w http.ResponseWriter, code int, enc otlp.Encoding, format string, args ...any) {
	st := status.New(grpcCode(code), fmt.Sprintf(format, args...)).Proto()
	var b []byte
	ct := "application/x-protobuf"
	if enc == otlp.JSON {
		b, _ = protojson.Marshal(st)
		ct = "application/json"
	} else {
		b, _ = proto.Marshal(st)
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	w.Write(b)
}

func grpcCode(httpCode int) codes.Code {
	switch httpCode {
	case http.StatusServiceUnavailable:
		return codes.Unavailable
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusRequestEntityTooLarge:
		return codes.ResourceExhausted
	case http.StatusInternalServerError:
		return codes.Internal
	}
	return codes.InvalidArgument
}

// RegisterGRPC registers the OTLP/gRPC trace and logs services on s (for
// the signals that have a topic). Give s grpc.MaxRecvMsgSize of
// Limits.MaxPayload (GRPCServerOptions).
func (r *Receiver) RegisterGRPC(s *grpc.Server) {
	if r.cfg.SpansTopic != "" {
		ptraceotlp.RegisterGRPCServer(s, &tracesServer{r: r})
	}
	if r.cfg.LogsTopic != "" {
		plogotlp.RegisterGRPCServer(s, &logsServer{r: r})
	}
}

// GRPCServerOptions are the options the receiver's gRPC server needs: a
// message bound of Limits.MaxPayload.
func (r *Receiver) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(r.lim.MaxPayload)}
}

type tracesServer struct {
	ptraceotlp.UnimplementedGRPCServer
	r *Receiver
}

func (s *tracesServer) Export(ctx context.Context, req ptraceotlp.ExportRequest) (ptraceotlp.ExportResponse, error) {
	resp := ptraceotlp.NewExportResponse()
	res, err := s.r.export(ctx, otlp.Traces, req)
	if res.rejected > 0 {
		resp.PartialSuccess().SetRejectedSpans(res.rejected)
		resp.PartialSuccess().SetErrorMessage(res.message)
	}
	return resp, err
}

type logsServer struct {
	plogotlp.UnimplementedGRPCServer
	r *Receiver
}

func (s *logsServer) Export(ctx context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	resp := plogotlp.NewExportResponse()
	res, err := s.r.export(ctx, otlp.Logs, req)
	if res.rejected > 0 {
		resp.PartialSuccess().SetRejectedLogRecords(res.rejected)
		resp.PartialSuccess().SetErrorMessage(res.message)
	}
	return resp, err
}

// export accepts a gRPC export request; the error is a gRPC status.
func (r *Receiver) export(ctx context.Context, sig otlp.Signal, req interface{ MarshalProto() ([]byte, error) }) (result, error) {
	payload, err := req.MarshalProto()
	if err != nil {
		r.m.request(sig, "grpc", codes.Internal)
		return result{}, status.Error(codes.Internal, err.Error())
	}
	res, err := r.accept(ctx, sig, payload, otlp.Proto)
	if err != nil {
		return result{}, r.grpcError(sig, err)
	}
	r.m.request(sig, "grpc", codes.OK)
	return res, nil
}

// grpcError is err as OTLP/gRPC says: UNAVAILABLE (retried by exporters)
// for Kafka's failures, INVALID_ARGUMENT (not retried) for the request's.
func (r *Receiver) grpcError(sig otlp.Signal, err error) error {
	code := codes.InvalidArgument
	if errors.Is(err, errUnavailable) {
		code = codes.Unavailable
	}
	r.m.request(sig, "grpc", code)
	return status.Error(code, err.Error())
}
