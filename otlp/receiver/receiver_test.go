package receiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/otlp"
)

const (
	spans = "otlp_spans"
	logs  = "otlp_logs"
)

// served is a receiver on a real HTTP server and a real gRPC server,
// producing to a broker.
type served struct {
	http     *httptest.Server
	grpcAddr string
}

func serve(t *testing.T, cfg Config, brokers []string) *served {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0), kgo.RecordRetries(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	r, err := New(cfg, cl, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := &served{http: httptest.NewServer(r.Handler())}
	t.Cleanup(s.http.Close)
	gs := grpc.NewServer(r.GRPCServerOptions()...)
	r.RegisterGRPC(gs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	s.grpcAddr = ln.Addr().String()
	return s
}

func newKafka(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, spans, logs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// agentRun records one model answer as the Vercel AI SDK's @ai-sdk/otel
// does (the tools the model was given, the tool calls it returned) and the
// execution of one of them, with the OpenTelemetry Go SDK and exporter.
func agentRun(t *testing.T, exp sdktrace.SpanExporter) error {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer tp.Shutdown(context.Background())
	tr := tp.Tracer("ai")
	ctx, agent := tr.Start(context.Background(), "invoke_agent weather", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.conversation.id", "s-1")))
	_, chat := tr.Start(ctx, "chat gpt-4o", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.request.model", "gpt-4o"),
		attribute.String("gen_ai.tool.definitions", `[{"type":"function","name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`),
		attribute.String("gen_ai.output.messages", `[{"role":"assistant","parts":[`+
			`{"type":"tool_call","id":"call_1","name":"get_weather","arguments":{"city":"Oslo"}},`+
			`{"type":"tool_call","id":"call_2","name":"wipe_disk","arguments":{}}]}]`)))
	chat.End()
	_, ex := tr.Start(ctx, "execute_tool get_weather", trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", "get_weather"),
		attribute.String("gen_ai.tool.call.id", "call_1")))
	ex.End()
	agent.End()
	return tp.ForceFlush(context.Background())
}

// stored decodes the records of topic as the stream does.
func stored(t *testing.T, c *kfake.Cluster, topic string, sig otlp.Signal, n int) []otlp.Call {
	t.Helper()
	var calls []otlp.Call
	for _, r := range kafkatest.Consume(t, c.ListenAddrs(), topic, n, 10*time.Second) {
		res, err := otlp.Decode(r.Value, sig, otlp.Proto, otlp.Limits{})
		if err != nil {
			t.Fatalf("a stored record does not decode: %v", err)
		}
		calls = append(calls, res.Calls...)
	}
	return calls
}

func names(calls []otlp.Call) string {
	var b []string
	for _, c := range calls {
		b = append(b, c.CallID+":"+c.Tool)
	}
	return strings.Join(b, " ")
}

// TestExporters: the OpenTelemetry Go SDK's own OTLP exporters (HTTP
// protobuf, HTTP gzip, gRPC; traces and logs) export to the receiver; each
// export is answered once its record is in Kafka, where the stream's
// decoder reads the calls back (the model's tool call and its execution
// one call).
func TestExporters(t *testing.T) {
	ctx := context.Background()
	c := newKafka(t)
	s := serve(t, Config{SpansTopic: spans, LogsTopic: logs}, c.ListenAddrs())
	noRetry := otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false})
	for _, exp := range []func() (sdktrace.SpanExporter, error){
		func() (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.http.URL+"/v1/traces"), noRetry)
		},
		func() (sdktrace.SpanExporter, error) {
			return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(s.http.URL+"/v1/traces"), noRetry,
				otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
		},
		func() (sdktrace.SpanExporter, error) {
			return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(s.grpcAddr), otlptracegrpc.WithInsecure(),
				otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
		},
	} {
		e, err := exp()
		if err != nil {
			t.Fatal(err)
		}
		if err := agentRun(t, e); err != nil {
			t.Fatalf("export: %v", err)
		}
	}
	calls := stored(t, c, spans, otlp.Traces, 3)
	if got, want := names(calls), strings.Repeat("call_1:get_weather call_2:wipe_disk ", 3); got+" " != want {
		t.Errorf("calls stored: %q, want %q", got, want)
	}
	for _, cl := range calls {
		if cl.Definitions < 0 || cl.SessionID != "s-1" || cl.TraceID == "" {
			t.Errorf("call %+v: no definitions, session or trace", cl)
		}
	}

	// Logs: a gen_ai.choice event, as @opentelemetry/instrumentation-openai
	// records the tool calls of a Chat Completions answer.
	le, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(s.http.URL+"/v1/logs"),
		otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(le)))
	var rec otellog.Record
	rec.SetEventName("gen_ai.choice")
	rec.SetTimestamp(time.Now())
	rec.SetBody(attribute.MapValue(attribute.Int("index", 0), attribute.Map("message", attribute.Slice("tool_calls",
		attribute.MapValue(attribute.String("id", "call_9"), attribute.String("type", "function"),
			attribute.Map("function", attribute.String("name", "get_weather"), attribute.String("arguments", `{"city":"Rome"}`)))))))
	lp.Logger("@opentelemetry/instrumentation-openai").Emit(ctx, rec)
	if err := lp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if got := names(stored(t, c, logs, otlp.Logs, 1)); got != "call_9:get_weather" {
		t.Errorf("log calls stored: %q", got)
	}
}

// TestKafkaDown: an export Kafka does not take is answered 503 with
// Retry-After (HTTP) or UNAVAILABLE (gRPC), both retried by OTLP
// exporters, never 200.
func TestKafkaDown(t *testing.T) {
	c := newKafka(t)
	brokers := c.ListenAddrs()
	c.Close()
	s := serve(t, Config{SpansTopic: spans, ProduceTimeout: 500 * time.Millisecond}, brokers)
	body := exportBody(t, "execute_tool", "get_weather")
	resp, err := http.Post(s.http.URL+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || statusOf(t, resp, b).GetCode() != int32(codes.Unavailable) {
		t.Errorf("HTTP: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	exp, err := otlptracegrpc.New(context.Background(), otlptracegrpc.WithEndpoint(s.grpcAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	if err := agentRun(t, exp); status.Code(unwrapStatus(err)) != codes.Unavailable {
		t.Errorf("gRPC: %v, want UNAVAILABLE", err)
	}
}

// unwrapStatus finds the gRPC status in an exporter's wrapped error.
func unwrapStatus(err error) error {
	for e := err; e != nil; {
		if _, ok := status.FromError(e); ok {
			return e
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			break
		}
		e = u.Unwrap()
	}
	return err
}

// exportBody is an ExportTraceServiceRequest of one span.
func exportBody(t *testing.T, op, tool string) []byte {
	t.Helper()
	td := ptrace.NewTraces()
	sp := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	sp.SetTraceID([16]byte{1})
	sp.SetSpanID([8]byte{1})
	sp.SetName("execute_tool")
	sp.SetStartTimestamp(1764579600000000000)
	sp.Attributes().PutStr("gen_ai.operation.name", op)
	if tool != "" {
		sp.Attributes().PutStr("gen_ai.tool.name", tool)
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func statusOf(t *testing.T, resp *http.Response, b []byte) *spb.Status {
	t.Helper()
	var st spb.Status
	unmarshal := proto.Unmarshal
	if resp.Header.Get("Content-Type") == "application/json" {
		unmarshal = protojson.Unmarshal
	}
	if err := unmarshal(b, &st); err != nil {
		t.Fatalf("the error body is no google.rpc.Status: %v (%q)", err, b)
	}
	return &st
}

// TestRequests: what OTLP/HTTP says of each answer: partial success for
// the calls that cannot be checked, the status codes and google.rpc.Status
// bodies of bad requests, the bounds (body, decompressed body), a signal
// without a topic.
func TestRequests(t *testing.T) {
	c := newKafka(t)
	s := serve(t, Config{SpansTopic: spans, Limits: otlp.Limits{MaxPayload: 4096}}, c.ListenAddrs())
	post := func(path, ct, ce string, body []byte) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, s.http.URL+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		if ce != "" {
			req.Header.Set("Content-Encoding", ce)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}

	// An execute_tool span without a tool name: stored (it becomes a
	// MALFORMED decision) and counted as rejected, with the reason.
	resp, b := post("/v1/traces", "application/x-protobuf", "", exportBody(t, "execute_tool", ""))
	er := ptraceotlp.NewExportResponse()
	if err := er.UnmarshalProto(b); resp.StatusCode != 200 || err != nil {
		t.Fatalf("%d %v %q", resp.StatusCode, err, b)
	}
	if ps := er.PartialSuccess(); ps.RejectedSpans() != 1 || !strings.Contains(ps.ErrorMessage(), "cannot be checked") {
		t.Errorf("partial success: %d %q", ps.RejectedSpans(), ps.ErrorMessage())
	}
	// An honest one: fully accepted, answered in JSON to JSON.
	js, _ := (&ptrace.JSONMarshaler{}).MarshalTraces(func() ptrace.Traces {
		r := ptraceotlp.NewExportRequest()
		_ = r.UnmarshalProto(exportBody(t, "execute_tool", "get_weather"))
		return r.Traces()
	}())
	resp, b = post("/v1/traces", "application/json", "", js)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || strings.Contains(string(b), "rejected") {
		t.Errorf("JSON: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	if n := len(stored(t, c, spans, otlp.Traces, 2)); n != 2 {
		t.Errorf("%d calls stored, want 2", n)
	}

	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, 1<<20))
	zw.Close()
	for _, tc := range []struct {
		name, path, ct, ce string
		body               []byte
		code               int
	}{
		{"not OTLP", "/v1/traces", "application/x-protobuf", "", []byte("\x0a\xff\xff\xff\xff\x0fxx"), 400},
		{"not JSON", "/v1/traces", "application/json", "", []byte(`{"resourceSpans":[`), 400},
		{"deep JSON", "/v1/traces", "application/json", "", []byte(strings.Repeat("[", 2000)), 400},
		{"content type", "/v1/traces", "text/plain", "", exportBody(t, "execute_tool", "x"), 415},
		{"encoding", "/v1/traces", "application/x-protobuf", "br", exportBody(t, "execute_tool", "x"), 400},
		{"too large", "/v1/traces", "application/x-protobuf", "", make([]byte, 5000), 413},
		{"gzip bomb", "/v1/traces", "application/x-protobuf", "gzip", bomb.Bytes(), 413},
		{"no logs topic", "/v1/logs", "application/x-protobuf", "", []byte{}, 404},
	} {
		resp, b := post(tc.path, tc.ct, tc.ce, tc.body)
		if resp.StatusCode != tc.code || statusOf(t, resp, b).GetMessage() == "" {
			t.Errorf("%s: %d %q, want %d with a Status", tc.name, resp.StatusCode, b, tc.code)
		}
	}
	if resp, err := http.Get(s.http.URL + "/v1/traces"); err != nil || resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET: %v %v", resp, err)
	}
}
