package gateway

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// BenchmarkCall is the cost of one tool call made with the Go SDK's
// client over Streamable HTTP, in this process: straight to the upstream
// (direct), and through the gateway (the decision, no audit trail, and
// the forwarding). The difference is what the gateway costs per call.
//
//	go test ./gateway -run '^$' -bench BenchmarkCall -count 6 | benchstat -col /path -
func BenchmarkCall(b *testing.B) {
	_, url := httpFixture(b, "up")
	gw, err := New(Options{Config: Config{Upstreams: []Upstream{{Name: "up", Trust: 1, URL: url}}}, Upstream: fastUpstreams})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- gw.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(b, 10e9, "the upstream listed", func() bool { ok, _ := gw.Ready(); return ok })
	srv := httptest.NewServer(gw.Handler())
	defer srv.Close()
	for _, tc := range []struct{ path, url, tool string }{{"direct", url, "echo"}, {"gateway", srv.URL, "up__echo"}} {
		b.Run("path="+tc.path, func(b *testing.B) {
			cl := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			cs, err := cl.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: tc.url, DisableStandaloneSSE: true}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			cs.ListTools(context.Background(), nil)
			args := json.RawMessage(`{"message":"hello"}`)
			b.ReportAllocs()
			for b.Loop() {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: args})
				if err != nil || res.IsError {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecide is the gateway's own work on a call, without the
// transports: build the call event, decide it, and (rejected) encode the
// answer.
func BenchmarkDecide(b *testing.B) {
	gw, err := New(Options{Config: Config{Upstreams: []Upstream{{Name: "up", Trust: 1, URL: "http://127.0.0.1:1"}}}})
	if err != nil {
		b.Fatal(err)
	}
	tools := []*mcp.Tool{
		{Name: "echo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}, "required": []any{"message"}}},
		{Name: "add", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "integer"}}}},
	}
	if err := gw.record(context.Background(), "up", tools); err != nil {
		b.Fatal(err)
	}
	s := &session{id: "s-1"}
	s.shown.Store(gw.cat.Load())
	// A session's catalogue name is pinned with its digest; a bare name,
	// and every call of a client without a session (s nil), is decided,
	// then given the digest the client holds.
	for _, tc := range []struct {
		name, tool, args string
		s                *session
	}{
		{"ok", "up__echo", `{"message":"hello"}`, s},
		{"H2", "up__echo", `{"message":"hello","override":true}`, s},
		{"ok/bare", "echo", `{"message":"hello"}`, s},
		{"ok/stateless", "up__echo", `{"message":"hello"}`, nil},
	} {
		b.Run("class="+tc.name, func(b *testing.B) {
			w := new(callWork)
			b.ReportAllocs()
			for b.Loop() {
				args, _ := gw.arguments(w, json.RawMessage(tc.args))
				rec := gw.decide(w, tc.s, "", tc.tool, "", args, gw.store.Snapshot())
				if rec.Decision.Verdict == schema.Reject {
					w.data = callpath.AppendAnswer(w.data[:0], rec, &suggest.Hints{})
				}
			}
		})
	}
}
