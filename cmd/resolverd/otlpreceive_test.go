package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TestOTLPReceiver: `resolverd run --otlp-http --otlp-grpc` takes the
// exports of the OpenTelemetry Go SDK's own exporters, answers once Kafka
// has them, and the same run decides every tool call in them: the model's
// call to a tool it was given (OK against the definitions its trace
// recorded, registry fleet-a:tools-…) and to one it was not (H1), once
// per call, with the OpenTelemetry topic and the call's trace and span as
// the row's.
func TestOTLPReceiver(t *testing.T) {
	p := freePorts(t, 2)
	httpAddr, grpcAddr := fmt.Sprintf("127.0.0.1:%d", p[0]), fmt.Sprintf("127.0.0.1:%d", p[1])
	d := startDaemon(t, "--otlp-http", httpAddr, "--otlp-grpc", grpcAddr, "--otlp-spans-topic", "otlp_spans",
		"--otlp-logs-topic", "otlp_logs", "--otlp-registry", "fleet-a", "--decisions-topic", "decisions-out")
	ctx := context.Background()
	he, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL("http://"+httpAddr+"/v1/traces"),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	ge, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(grpcAddr), otlptracegrpc.WithInsecure(),
		otlptracegrpc.WithRetry(otlptracegrpc.RetryConfig{Enabled: false}))
	if err != nil {
		t.Fatal(err)
	}
	for _, exp := range []sdktrace.SpanExporter{he, ge} {
		if err := modelAnswer(exp); err != nil {
			t.Fatalf("export: %v", err)
		}
	}

	out, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.ConsumeTopics("decisions-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	type row struct {
		EventID  string `json:"event_id"`
		Class    string `json:"class"`
		Source   string `json:"source"`
		Topic    string `json:"topic"`
		Registry string `json:"registry"`
		TraceID  string `json:"trace_id"`
		SpanID   string `json:"span_id"`
	}
	rows := map[string]row{}
	deadline := time.Now().Add(60 * time.Second)
	for len(rows) < 4 && time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := out.PollFetches(pctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var x row
			if err := json.Unmarshal(r.Value, &x); err != nil {
				t.Fatal(err)
			}
			rows[x.EventID] = x
		})
	}
	var got []string
	for id, r := range rows {
		tool, _, _ := strings.Cut(id, "~")
		got = append(got, tool+":"+r.Class)
		if r.Source != "stream" || r.Topic != "otlp_spans" || !strings.HasPrefix(r.Registry, "fleet-a:tools-") ||
			len(r.TraceID) != 32 || len(r.SpanID) != 16 {
			t.Errorf("%s: %+v", id, r)
		}
	}
	sort.Strings(got)
	if want := "call_1:OK call_1:OK call_2:H1 call_2:H1"; strings.Join(got, " ") != want {
		t.Errorf("decisions %q, want %q", strings.Join(got, " "), want)
	}
	if n := sum(d.metrics(t), "toolaudit_otlp_receiver_requests_total"); n != 2 {
		t.Errorf("%v OTLP requests counted, want 2", n)
	}
}

// modelAnswer records one model answer as the Vercel AI SDK's
// @ai-sdk/otel does (the tools the model was given, the tool calls it
// returned) with the OpenTelemetry Go SDK, and exports it.
func modelAnswer(exp sdktrace.SpanExporter) error {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp))
	defer tp.Shutdown(context.Background())
	_, chat := tp.Tracer("ai").Start(context.Background(), "chat gpt-4o", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.conversation.id", "s-otlp"),
		attribute.String("gen_ai.tool.definitions", `[{"type":"function","name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}]`),
		attribute.String("gen_ai.output.messages", `[{"role":"assistant","parts":[`+
			`{"type":"tool_call","id":"call_1","name":"get_weather","arguments":{"city":"Oslo"}},`+
			`{"type":"tool_call","id":"call_2","name":"wipe_disk","arguments":{}}]}]`)))
	chat.End()
	return tp.ForceFlush(context.Background())
}
