package modelproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// upstream is a local model API: it answers each request with the next
// of its queued responses (recorded shapes, testdata/) and keeps what it
// received.
type upstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	q   []reply
	got []received
}

type reply struct {
	status      int
	contentType string
	body        []byte
}

type received struct {
	path   string
	header http.Header
	body   []byte
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.got = append(u.got, received{path: r.URL.Path, header: r.Header.Clone(), body: b})
		var rep reply
		if len(u.q) > 0 {
			rep, u.q = u.q[0], u.q[1:]
		}
		u.mu.Unlock()
		if rep.body == nil {
			http.Error(w, "upstream: no reply queued", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", rep.contentType)
		w.Header().Set("X-Upstream", "1")
		w.WriteHeader(rep.status)
		_, _ = w.Write(rep.body)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// queue queues replies: a testdata file each ("openai/honest.json"),
// status 200, or "429:openai/error429.json".
func (u *upstream) queue(t *testing.T, files ...string) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, f := range files {
		st := 200
		if s, rest, ok := strings.Cut(f, ":"); ok {
			st = map[string]int{"429": 429, "529": 529}[s]
			f = rest
		}
		ct := "application/json"
		if strings.HasSuffix(f, ".sse") {
			ct = "text/event-stream; charset=utf-8"
		}
		u.q = append(u.q, reply{status: st, contentType: ct, body: fixture(t, f)})
	}
}

// reply queues one 200 reply of body.
func (u *upstream) reply(contentType string, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.q = append(u.q, reply{status: 200, contentType: contentType, body: body})
}

func (u *upstream) requests() []received {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]received(nil), u.got...)
}

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// env is a proxy in front of an upstream, its decisions audited to a
// topic on kfake.
type env struct {
	up      *upstream
	url     string
	brokers []string
	kf      *kfake.Cluster
	logs    logFile
}

const topic = "tool-audit"

func start(t *testing.T, policy string) *env {
	t.Helper()
	return startRoutes(t, func(up string) string {
		return `
  - {prefix: /openai, api: openai, upstream: "` + up + `", registry: fleet, policy: ` + policy + `, agent: agent-7}
  - {prefix: /anthropic, api: anthropic, upstream: "` + up + `", registry: fleet, policy: ` + policy + `, agent: agent-7}`
	})
}

// startRoutes is start with the routes routes(the upstream's URL) gives.
func startRoutes(t *testing.T, routes func(upstream string) string) *env {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "proxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	e := &env{up: newUpstream(t), logs: logFile{f}}
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	e.kf, e.brokers = kf, kf.ListenAddrs()
	k, err := audit.NewKafka(audit.KafkaConfig{Brokers: e.brokers, Topic: topic, Timeout: time.Second}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	cfg, err := modelproxy.ParseConfig([]byte(`
routes:` + routes(e.up.srv.URL) + `
limits: {max_request_bytes: 65536, max_response_bytes: 16384, max_tools: 8, max_sse_line_bytes: 4096}
`))
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p, err := modelproxy.New(modelproxy.Options{Config: cfg, Audit: k, Hints: suggest.New(), ResolverBuild: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// logFile is the proxy's log: a file, which takes concurrent writes.
type logFile struct{ *os.File }

func (l logFile) String() string {
	b, _ := os.ReadFile(l.Name())
	return string(b)
}

// records are the audit records produced so far (at least n).
func (e *env) records(t *testing.T, n int) []audit.Record {
	t.Helper()
	rs := kafkatest.Consume(t, e.brokers, topic, n, 5*time.Second)
	if n >= 0 && len(rs) != n {
		// A moment more: nothing else may come.
		rs = kafkatest.Consume(t, e.brokers, topic, n+1, 300*time.Millisecond)
	}
	out := make([]audit.Record, len(rs))
	for i, r := range rs {
		if err := audit.Decode(r.Value, &out[i]); err != nil {
			t.Fatalf("audit record %s: %v", r.Value, err)
		}
	}
	if len(out) != n {
		t.Fatalf("%d audit records, want %d", len(out), n)
	}
	return out
}

// The declared tools of the tests' requests, as each API declares them.
const (
	weatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}`
	searchSchema  = `{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query","limit"],"additionalProperties":false}`
)

func openAIRequest() map[string]any {
	return map[string]any{
		"model":    "gpt-5.1",
		"messages": []any{map[string]any{"role": "user", "content": "Weather in Paris?"}},
		"tools": []any{
			map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Current weather of a city", "parameters": json.RawMessage(weatherSchema)}},
			map[string]any{"type": "function", "function": map[string]any{"name": "search_docs", "description": "Search the docs", "parameters": json.RawMessage(searchSchema), "strict": true}},
		},
	}
}

func anthropicRequest() map[string]any {
	return map[string]any{
		"model":      "claude-sonnet-4-5",
		"max_tokens": 1024,
		"messages":   []any{map[string]any{"role": "user", "content": "Weather in Paris?"}},
		"tools": []any{
			map[string]any{"name": "get_weather", "description": "Current weather of a city", "input_schema": json.RawMessage(weatherSchema)},
			map[string]any{"name": "search_docs", "description": "Search the docs", "input_schema": json.RawMessage(searchSchema), "strict": true},
			map[string]any{"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
		},
	}
}

// requestFor is the tests' request in api's terms.
func requestFor(api string) map[string]any {
	switch api {
	case "anthropic":
		return anthropicRequest()
	case "responses":
		return responsesRequest()
	}
	return openAIRequest()
}

func responsesRequest() map[string]any {
	return map[string]any{
		"model": "gpt-5.1",
		"input": "Weather in Paris?",
		"tools": []any{
			map[string]any{"type": "function", "name": "get_weather", "description": "Current weather of a city", "parameters": json.RawMessage(weatherSchema), "strict": false},
			map[string]any{"type": "function", "name": "search_docs", "description": "Search the docs", "parameters": json.RawMessage(searchSchema), "strict": true},
			map[string]any{"type": "web_search"},
		},
	}
}

// declaredListing is the listing event `resolverd check` is given for
// the tests' declared tools: written here from the tools as declared,
// not taken from the proxy.
func declaredListing() string {
	return `{"type":"listing","event_id":"l-1","observed_at":"2026-01-01T00:00:00.000Z","registry":"fleet","server":"","trust":0,"op":"snapshot","tools":[` +
		`{"name":"get_weather","description":"Current weather of a city","inputSchema":` + weatherSchema + `},` +
		`{"name":"search_docs","description":"Search the docs","inputSchema":` + searchSchema + `}]}`
}

// checkOffline decides the records' calls as resolverd check does
// (package offline) against declaredListing, and fails the test unless
// every decision is the record's.
func checkOffline(t *testing.T, recs []audit.Record) {
	t.Helper()
	st := registry.New()
	if _, err := check.LoadListings(strings.NewReader(declaredListing()+"\n"), st, nil); err != nil {
		t.Fatal(err)
	}
	var calls bytes.Buffer
	for _, r := range recs {
		calls.Write(r.Call)
		calls.WriteByte('\n')
	}
	var out bytes.Buffer
	if _, err := check.Check(context.Background(), check.Config{Workers: 1}, st.Snapshot(), &calls, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(recs) {
		t.Fatalf("resolverd check: %d decisions for %d calls", len(lines), len(recs))
	}
	for i, r := range recs {
		want := string(r.Decision.AppendJSON(nil))
		if lines[i] != want {
			t.Errorf("call %d: resolverd check decided\n%s\nthe proxy recorded\n%s", i, lines[i], want)
		}
	}
}

// classes are the records' classes.
func classes(recs []audit.Record) string {
	var s []string
	for _, r := range recs {
		s = append(s, string(r.Decision.Class))
	}
	return strings.Join(s, ",")
}

// nodeOut is testdata/modelapi/client.mjs's output.
type nodeOut struct {
	OK       bool              `json:"ok"`
	Response json.RawMessage   `json:"response"`
	Headers  map[string]string `json:"headers"`
	Status   int               `json:"status"`
	Error    json.RawMessage   `json:"error"`
	Name     string            `json:"name"`
	Message  string            `json:"message"`
	Executed []struct {
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"executed"`
	Final      json.RawMessage `json:"final"`
	Events     int             `json:"events"`
	OutputText *string         `json:"output_text"`
}

// sdk runs the official SDK (testdata/modelapi/client.mjs) on one
// scenario against the proxy.
func (e *env) sdk(t *testing.T, api, op string, req map[string]any) nodeOut {
	t.Helper()
	return e.sdkStream(t, api, op, req, false)
}

// sdkStream is sdk, the agent loop streaming when stream is true.
func (e *env) sdkStream(t *testing.T, api, op string, req map[string]any, stream bool) nodeOut {
	t.Helper()
	dir := filepath.Join("..", "testdata", "modelapi")
	const hint = "run `npm ci --prefix testdata/modelapi` (needs node >= 20 and npm)"
	node := need.Tool(t, "node", hint)
	for _, p := range []string{"openai", "@anthropic-ai/sdk"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			need.Missing(t, p+" is not installed in testdata/modelapi", hint)
		}
	}
	base := e.url + "/anthropic"
	endpoint := ""
	if api == "responses" {
		api, endpoint = "openai", "responses"
	}
	if api == "openai" {
		base = e.url + "/openai/v1"
	}
	in, err := json.Marshal(map[string]any{"api": api, "op": op, "baseURL": base, "apiKey": "sk-secret-" + api, "request": req, "stream": stream, "endpoint": endpoint})
	if err != nil {
		t.Fatal(err)
	}
	b, stderr, err := clients.run(node, dir, in, time.Minute)
	if err != nil {
		t.Fatalf("node client.mjs: %v\n%s\n%s", err, b, stderr)
	}
	var o nodeOut
	if err := json.Unmarshal(b, &o); err != nil {
		t.Fatalf("node client.mjs output %q: %v\n%s", b, err, stderr)
	}
	return o
}

// clients is the one node process running client.mjs for the package's
// tests (they run one at a time), started at the first scenario and
// started again after one that failed or hung.
var clients nodeClients

type nodeClients struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan []byte
	stderr *lockedbuf.Buffer
}

// run sends one scenario and returns its answer line, and what node wrote
// on stderr meanwhile.
func (c *nodeClients) run(node, dir string, scenario []byte, within time.Duration) ([]byte, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		cmd := exec.Command(node, "client.mjs")
		cmd.Dir = dir
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, "", err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, "", err
		}
		c.stderr = &lockedbuf.Buffer{}
		cmd.Stderr = c.stderr
		if err := cmd.Start(); err != nil {
			return nil, "", err
		}
		lines := make(chan []byte)
		go func() {
			sc := bufio.NewScanner(stdout)
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				lines <- bytes.Clone(sc.Bytes())
			}
			close(lines)
		}()
		c.cmd, c.stdin, c.lines = cmd, stdin, lines
	}
	mark := c.stderr.Len()
	if _, err := c.stdin.Write(append(scenario, '\n')); err != nil {
		c.stop()
		return nil, "", err
	}
	select {
	case b, ok := <-c.lines:
		if !ok {
			stderr := c.stderr.From(mark)
			c.stop()
			return nil, stderr, errors.New("node exited")
		}
		return b, c.stderr.From(mark), nil
	case <-time.After(within):
		stderr := c.stderr.From(mark)
		c.stop()
		return nil, stderr, fmt.Errorf("no answer within %v", within)
	}
}

func (c *nodeClients) stop() {
	c.stdin.Close()
	c.cmd.Process.Kill()
	c.cmd.Wait()
	c.cmd = nil
}

// From is what was written from offset n on.

var _ = schema.OK

// choiceCalls are the ids of each choice's tool calls in a Chat
// Completions answer (usage read as nothing: its counts may be any JSON
// number).
func choiceCalls(t *testing.T, b []byte) [][]string {
	t.Helper()
	var m struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct{ ID string } `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	decode(t, b, &m)
	out := make([][]string, len(m.Choices))
	for i, c := range m.Choices {
		for _, tc := range c.Message.ToolCalls {
			out[i] = append(out[i], tc.ID)
		}
	}
	return out
}
