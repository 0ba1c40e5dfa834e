package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/toolaudit/toolaudit/callpath"
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

// span waits for the span of trace id (hex) and returns it.
func (s *spanSink) span(t *testing.T, traceID string) ptrace.Span {
	t.Helper()
	var found ptrace.Span
	waitUntil(t, 15*time.Second, "the span of trace "+traceID, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, sp := range s.spans {
			if id := sp.TraceID(); strings.EqualFold(hexOf(id[:]), traceID) {
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
	if attr(sp, callpath.AttrSource) != "gateway" || attr(sp, callpath.AttrVerdict) != "reject" || attr(sp, "gen_ai.tool.name") != "echo" || attr(sp, callpath.AttrClass) != "H2" {
		t.Errorf("gateway span %q %v\n%s", sp.Name(), sp.Attributes().AsRaw(), logs.String())
	}
}
