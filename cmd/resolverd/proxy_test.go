package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/schema"
)

// TestProxyCommand: resolverd proxy, started as a command, decides the
// tool calls of an upstream's response, withholds the rejected one under
// block and records it on the audit topic before answering.
func TestProxyCommand(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"fetch_url","arguments":"{\"url\":\"x\"}"}}]}}]}`)
	}))
	defer up.Close()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, audit.DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(cfg, []byte("routes:\n  - {prefix: /openai, api: openai, upstream: \""+up.URL+"\", registry: fleet, policy: block}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"proxy", "--config", cfg, "--listen", addr, "--brokers", strings.Join(kf.ListenAddrs(), ",")}, stdio{strings.NewReader(""), io.Discard, &stderr})
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("exit %d: %s", code, stderr.String())
		}
	}()
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]}`
	var resp *http.Response
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err = http.Post("http://"+addr+"/openai/v1/chat/completions", "application/json", strings.NewReader(body))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var got struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
			Message      struct {
				Content   string            `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 || len(got.Choices) != 1 {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	if c := got.Choices[0]; len(c.Message.ToolCalls) != 0 || c.FinishReason != "stop" || !strings.Contains(c.Message.Content, `"fetch_url": H1`) {
		t.Errorf("the rejected call was not withheld: %s", b)
	}
	if w := resp.Header.Get("Toolaudit-Withheld"); w != "call_1" {
		t.Errorf("Toolaudit-Withheld %q", w)
	}
	// The proxy's collector target (proxyGCPercent) and heap limit are
	// set.
	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"\ngo_gc_gogc_percent 400\n", "\ngo_gc_gomemlimit_bytes 5.36870912e+08\n"} {
		if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
			t.Log("GOGC or GOMEMLIMIT is set, and wins: the proxy's own settings are not checked")
			break
		}
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("/metrics has no %q", strings.TrimSpace(want))
		}
	}
	recs := kafkatest.Consume(t, kf.ListenAddrs(), audit.DefaultTopic, 1, 5*time.Second)
	if len(recs) != 1 {
		t.Fatalf("%d audit records", len(recs))
	}
	var rec audit.Record
	if err := audit.Decode(recs[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Source != schema.SourceModelProxy || rec.Action != schema.ActionEnforced || rec.Decision.Class != schema.H1 {
		t.Errorf("record: source %q action %q class %q", rec.Source, rec.Action, rec.Decision.Class)
	}
}

// TestProxyUsage: a missing or bad configuration is a usage error.
func TestProxyUsage(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("routes:\n  - {prefix: /o, api: gemini, upstream: \"http://x\", registry: r, policy: block}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"proxy"}, "needs --config"},
		{[]string{"proxy", "--config", bad}, `api "gemini"`},
		{[]string{"proxy", "--config", bad, "--audit-timeout", "10ms"}, "at least 1s"},
	} {
		code, _, stderr := runCmd(t, "", tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestEmbeddedProxy: a decision of resolverd proxy is stored by
// resolverd run as a decision row of its own source, "model-proxy"
// (read back from the stored-decisions topic, which run writes before it
// commits).
func TestEmbeddedProxy(t *testing.T) {
	d := startDaemon(t, "--decisions-topic", "decisions-out")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-e1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_e1","type":"function","function":{"name":"get_weather","arguments":"{\"town\":\"Paris\"}"}}]}}]}`)
	}))
	defer up.Close()
	cfg := filepath.Join(t.TempDir(), "proxy.yaml")
	if err := os.WriteFile(cfg, []byte("routes:\n  - {prefix: /openai, api: openai, upstream: \""+up.URL+"\", registry: fleet, policy: observe}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var logs bytes.Buffer
	go func() {
		done <- run(ctx, []string{"proxy", "--config", cfg, "--listen", addr, "--brokers", d.kafka}, stdio{strings.NewReader(""), io.Discard, &logs})
	}()
	defer func() { cancel(); <-done }()
	body := `{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}]}`
	waitUntil(t, 10*time.Second, "the proxy's answer", func() bool {
		resp, err := http.Post("http://"+addr+"/openai/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	out, err := kgo.NewClient(kgo.SeedBrokers(d.kafka), kgo.ConsumeTopics("decisions-out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var row struct {
		EventID string `json:"event_id"`
		Source  string `json:"source"`
		Action  string `json:"action"`
		Class   string `json:"class"`
	}
	for deadline := time.Now().Add(60 * time.Second); row.Source == "" && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(context.Background(), 2*time.Second)
		out.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			if bytes.Contains(r.Value, []byte(`"chatcmpl-e1/call_e1"`)) {
				if err := json.Unmarshal(r.Value, &row); err != nil {
					t.Fatal(err)
				}
			}
		})
		pcancel()
	}
	if row.Source != "model-proxy" || row.Action != "observed" || row.Class != "H2" {
		t.Errorf("stored row %+v, want source model-proxy, action observed, class H2\nproxy log:\n%s", row, logs.String())
	}
}
