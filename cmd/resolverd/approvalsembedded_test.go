package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	approverToken = "alice-approver-token-0123456789"
	agentToken    = "agent-resolve-token-0123456789"
	// stamp is the policy stamp of run --approvals block --formats assert
	// and of a gateway with the same policy and formats: assert.
	stamp = "strict+formats+approvals(block+tofu)"
)

// postJSON posts body to url with a bearer token and returns the status
// and the answer.
func postJSON(t *testing.T, url, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %d %s: %v", url, resp.StatusCode, b, err)
	}
	return resp.StatusCode, m
}

// TestEmbeddedApprovals: the documented single-process flow. A fresh
// `resolverd run --embedded --approvals block --http-approvers-file`
// starts (its own broker has no approvals topic yet: created, the
// baseline empty), serves an approval that the next call is decided
// under; a token valid for /v1/resolve but not an approver's is 403. The
// stream's rows, the API's and a gateway's under the same policy carry
// one policy stamp.
func TestEmbeddedApprovals(t *testing.T) {
	dir := t.TempDir()
	approvers, tokens := filepath.Join(dir, "approvers"), filepath.Join(dir, "tokens")
	os.WriteFile(approvers, []byte("alice:"+approverToken+"\n"), 0o600)
	os.WriteFile(tokens, []byte("agent:"+agentToken+"\n"), 0o600)
	d := startDaemon(t, "--approvals", "block", "--formats", "assert", "--http-approvers-file", approvers,
		"--http-tokens-file", tokens, "--decisions-topic", "decisions-out")
	if !strings.Contains(d.log.String(), "approvals topic created on the embedded broker") {
		t.Errorf("the creation of the approvals topic is not logged:\n%s", d.log)
	}
	d.produceListings(t)
	calls, err := os.ReadFile(corpus("sample", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var call string // c-362ad8: OK in the sample
	for _, l := range strings.Split(string(calls), "\n") {
		if strings.Contains(l, `"c-362ad8"`) {
			call = l
		}
	}
	resolve := "http://" + d.http + "/v1/resolve"
	status, first := postJSON(t, resolve, agentToken, call)
	if status != 200 || first["class"] != "OK" || first["approval"] != "new" || first["baseline_version"] != "0" || first["policy_version"] != stamp {
		t.Fatalf("before any approval: %d %v", status, first)
	}
	approval := fmt.Sprintf(`{"registry":"bfcl-simple_python_207","server":%q,"tool":%q,"digest":%q,"verb":"approve","reason":"reviewed"}`,
		first["resolved_server"], first["resolved_tool"], first["current_digest"])
	approvals := "http://" + d.http + "/v1/approvals"
	if status, ans := postJSON(t, approvals, agentToken, approval); status != http.StatusForbidden || ans["error"] != "not_approver" ||
		!strings.HasPrefix(fmt.Sprint(ans["message"]), "not an approver") {
		t.Fatalf("an agent's token on /v1/approvals: %d %v", status, ans)
	}
	if status, ans := postJSON(t, approvals, "nobody-token-0123456789", approval); status != http.StatusUnauthorized || !strings.Contains(fmt.Sprint(ans["message"]), "invalid bearer token") {
		t.Fatalf("an unknown token on /v1/approvals: %d %v", status, ans)
	}
	if status, ans := postJSON(t, approvals, approverToken, approval); status != 200 || ans["by"] != "alice" || ans["baseline_version"] != 1.0 {
		t.Fatalf("approval: %d %v", status, ans)
	}
	waitUntil(t, 10*time.Second, "the call decided under the approval", func() bool {
		_, d := postJSON(t, resolve, agentToken, strings.Replace(call, `"c-362ad8"`, `"c-362ad8-approved"`, 1))
		return d["approval"] == "approved" && d["baseline_version"] == "1"
	})

	// The same call through the stream, and a call through a gateway
	// deciding under the same policy.
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	streamed := strings.Replace(call, `"c-362ad8"`, `"c-362ad8-stream"`, 1)
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "tool-calls", Key: []byte("s-a72991b9"), Value: []byte(streamed)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	gatewayCall(t, d)

	rows := map[string]string{} // source -> policy_version
	out, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.ConsumeTopics("decisions-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	deadline := time.Now().Add(60 * time.Second)
	for len(rows) < 3 && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		fs := out.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			var row struct {
				EventID string `json:"event_id"`
				Source  string `json:"source"`
				Policy  string `json:"policy_version"`
			}
			if err := json.Unmarshal(r.Value, &row); err != nil {
				t.Fatal(err)
			}
			if row.EventID == "c-362ad8-stream" || row.EventID == "c-362ad8" || row.Source == "gateway" {
				rows[row.Source] = row.Policy
			}
		})
	}
	for _, source := range []string{"stream", "api", "gateway"} {
		if got, ok := rows[source]; !ok || got != stamp {
			t.Errorf("the %s row's policy_version: %q (stored: %t), want %q", source, got, ok, stamp)
		}
	}
	t.Logf("policy stamps by source: %v", rows)
}

// gatewayCall runs `resolverd gateway --approvals block` (formats:
// assert) on d's broker and calls a tool through it.
func gatewayCall(t *testing.T, d *daemon) {
	t.Helper()
	cs, logs := startGateway(t, gatewayConfig(t, "formats: assert"), "--brokers", d.kafka, "--approvals", "block")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "fx__echo", Arguments: json.RawMessage(`{"message":"hello"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res); res.IsError || !bytes.Contains(b, []byte("hello")) {
		t.Fatalf("gateway call: %s\n%s", b, logs.String())
	}
}

// startGateway is serveGateway with an MCP client (the Go SDK's)
// connected to the gateway.
func startGateway(t *testing.T, cfg string, args ...string) (*mcp.ClientSession, *lockedbuf.Buffer) {
	t.Helper()
	addr, logs := serveGateway(t, cfg, args...)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).
		Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, logs
}

// serveGateway runs `resolverd gateway --config cfg` with args until the
// test ends and returns its address once it is ready, and its logs.
func serveGateway(t *testing.T, cfg string, args ...string) (string, *lockedbuf.Buffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs := &lockedbuf.Buffer{}
	go func() {
		done <- run(ctx, append([]string{"gateway", "--config", cfg, "--listen", addr}, args...), stdio{strings.NewReader(""), logs, logs})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("gateway exited %d:\n%s", code, logs.String())
		}
	})
	waitUntil(t, 30*time.Second, "the gateway ready", func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return addr, logs
}
