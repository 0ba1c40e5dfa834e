package modelproxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// streamRequest is the tests' request with stream: true.
func streamRequest(api string) map[string]any {
	req := requestFor(api)
	if api == "openai" {
		req["stream_options"] = map[string]any{"include_usage": true}
	}
	return req
}

// Streaming, observe: the SDK's streaming helper accumulates the same
// message as from the upstream directly, every call decided and recorded
// as resolverd check decides it.
func TestStreamObserveSDKs(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "observe")
			e.up.queue(t, api+"/parallel.sse")
			o := e.sdk(t, api, "stream", streamRequest(api))
			if !o.OK || o.Events < 5 {
				t.Fatalf("SDK failed or did not stream: %+v", o)
			}
			wantIDs := map[string][]string{"openai": {"call_p1", "call_p2", "call_p3"}, "anthropic": {"toolu_01P1", "toolu_01P2", "toolu_01P3"}}[api]
			if ids := streamedCalls(t, api, o.Response); !slices.Equal(ids, wantIDs) {
				t.Errorf("calls %v, want %v", ids, wantIDs)
			}
			recs := e.records(t, 3)
			if got := classes(recs); got != "OK,H1,OK" {
				t.Errorf("classes %s", got)
			}
			checkOffline(t, recs)
		})
	}
}

// streamedCalls are the ids of the calls of an accumulated message, and
// fails the test unless their arguments are whole JSON objects.
func streamedCalls(t *testing.T, api string, b []byte) []string {
	t.Helper()
	if api == "openai" {
		var m openAIMessage
		decode(t, b, &m)
		for _, c := range m.Choices[0].Message.ToolCalls {
			if !json.Valid([]byte(c.Function.Arguments)) {
				t.Errorf("call %s: arguments %q", c.ID, c.Function.Arguments)
			}
		}
		return m.callIDs()
	}
	var m anthropicMessage
	decode(t, b, &m)
	for _, c := range m.Content {
		if c.Type == "tool_use" && (len(c.In) == 0 || c.In[0] != '{') {
			t.Errorf("call %s: input %s", c.ID, c.In)
		}
	}
	return m.callIDs()
}

// Streaming, block: the SDK's accumulated message has the calls that
// resolve and the note; a stream whose every call is rejected ends as an
// answer (stop, end_turn).
func TestStreamBlockSDKs(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "block")
			e.up.queue(t, api+"/parallel.sse", api+"/bad.sse")
			parallel := e.sdk(t, api, "stream", streamRequest(api))
			bad := e.sdk(t, api, "stream", streamRequest(api))
			if !parallel.OK || !bad.OK {
				t.Fatalf("SDK failed: %+v %+v", parallel, bad)
			}
			wantIDs := map[string][]string{"openai": {"call_p1", "call_p3"}, "anthropic": {"toolu_01P1", "toolu_01P3"}}[api]
			if ids := streamedCalls(t, api, parallel.Response); !slices.Equal(ids, wantIDs) {
				t.Errorf("calls %v, want %v", ids, wantIDs)
			}
			if ids := streamedCalls(t, api, bad.Response); len(ids) != 0 {
				t.Errorf("bad: calls %v, want none", ids)
			}
			switch api {
			case "openai":
				var p, b openAIMessage
				decode(t, parallel.Response, &p)
				decode(t, bad.Response, &b)
				if c := p.Choices[0].Message.Content; c == nil || !strings.HasPrefix(*c, "Checking three things.") || !strings.Contains(*c, `"get_wether": H1`) || p.Choices[0].FinishReason != "tool_calls" {
					t.Errorf("parallel: %s", parallel.Response)
				}
				if c := b.Choices[0].Message.Content; c == nil || !strings.Contains(*c, "H2") || b.Choices[0].FinishReason != "stop" {
					t.Errorf("bad: %s", bad.Response)
				}
			case "anthropic":
				var p, b anthropicMessage
				decode(t, parallel.Response, &p)
				decode(t, bad.Response, &b)
				if !strings.HasPrefix(p.text(), "Checking three things.") || !strings.Contains(p.text(), `"get_wether": H1`) || p.StopReason != "tool_use" {
					t.Errorf("parallel: %s", parallel.Response)
				}
				if !strings.Contains(b.text(), "H2") || b.StopReason != "end_turn" {
					t.Errorf("bad: %s", bad.Response)
				}
			}
			if got := classes(e.records(t, 4)); got != "OK,H1,OK,H2" {
				t.Errorf("classes %s", got)
			}
		})
	}
}

// Text passes through as it arrives: the client reads the text of a
// stream while the upstream still holds the rest of it; a tool call is
// sent only once complete and decided.
func TestStreamTextPassesThrough(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(name, data string) {
			io.WriteString(w, "event: "+name+"\ndata: "+data+"\n\n")
			w.(http.Flusher).Flush()
		}
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":1,"output_tokens":1}}}`)
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"early text"}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`)
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":9}}`)
		ev("message_stop", `{"type":"message_stop"}`)
	}))
	defer up.Close()
	url := serveProxy(t, `{prefix: /a, api: anthropic, upstream: "`+up.URL+`", registry: fleet, policy: block}`)
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 10, "stream": true, "messages": []any{}, "tools": anthropicRequest()["tools"]})
	var seen strings.Builder
	var br *bufio.Reader
	read := func() error { // the response's headers too must come before the upstream ends
		resp, err := http.Post(url+"/a/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		br = bufio.NewReader(resp.Body)
		t.Cleanup(func() { resp.Body.Close() })
		return readUntil(br, &seen, "early text")
	}
	if !arrivesWhileHeld(t, read, &seen, release, "the text") {
		return
	}
	// The text arrived while the upstream holds the call: nothing of the
	// call may have been sent.
	close(release)
	rest, _ := io.ReadAll(br)
	if strings.Contains(seen.String(), "toolu_1") {
		t.Errorf("the call was sent before it was complete:\n%s", seen.String())
	}
	if !strings.Contains(string(rest), `"id":"toolu_1"`) || !strings.Contains(string(rest), `\"Paris\"}`) {
		t.Errorf("the call was not sent once complete:\n%s", rest)
	}
}

// Fail closed mid-stream: when the audit trail does not take a call,
// the stream ends with an error event in the API's shape, which the SDK
// raises, and the call is not sent; an over-long line ends it likewise.
func TestStreamFailsClosed(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api+"/audit down", func(t *testing.T) {
			e := start(t, "observe")
			e.up.queue(t, api+"/parallel.sse")
			e.kf.Close()
			o := e.sdk(t, api, "stream", streamRequest(api))
			if o.OK || !strings.Contains(o.Message, "audit trail") {
				t.Errorf("SDK got %+v, want the stream's error naming the audit trail", o)
			}
		})
		t.Run(api+"/line too long", func(t *testing.T) {
			e := start(t, "observe")
			sse := fixture(t, api+"/parallel.sse")
			long := bytes.Replace(sse, []byte("Checking"), bytes.Repeat([]byte("x"), 5000), 1)
			e.up.reply("text/event-stream", long)
			o := e.sdk(t, api, "stream", streamRequest(api))
			if o.OK || !strings.Contains(o.Message, "longer than the limit") {
				t.Errorf("SDK got %+v, want the stream's error naming the line", o)
			}
			e.records(t, 0)
		})
		t.Run(api+"/calls too many", func(t *testing.T) {
			e := start(t, "observe")
			// 200 calls of about 100 bytes each: each one small, all of
			// them past max_response_bytes (16384).
			var b strings.Builder
			args := `{\"city\":\"` + strings.Repeat("p", 80) + `\"}`
			if api == "openai" {
				for i := range 200 {
					fmt.Fprintf(&b, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"get_weather","arguments":"%s"}}]},"finish_reason":null}]}`+"\n\n", i, i, args)
				}
			} else {
				b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
				for i := range 200 {
					fmt.Fprintf(&b, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_%d\",\"name\":\"get_weather\",\"input\":{}}}\n\n", i, i)
					fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":%d,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"%s\"}}\n\n", i, args)
					fmt.Fprintf(&b, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}\n\n", i)
				}
			}
			e.up.reply("text/event-stream", []byte(b.String()))
			o := e.sdk(t, api, "stream", streamRequest(api))
			if o.OK || !strings.Contains(o.Message, "tool calls larger in all than the limit") {
				t.Errorf("SDK got %+v, want the stream's error naming the calls", o)
			}
		})
		t.Run(api+"/call too long", func(t *testing.T) {
			e := start(t, "observe")
			// 20 deltas of 1000 bytes: each line within the line limit,
			// the call past max_response_bytes (16384).
			var b strings.Builder
			pad := strings.Repeat("y", 1000)
			if api == "openai" {
				b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\""}}]},"finish_reason":null}]}` + "\n\n")
				for range 20 {
					b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + pad + `"}}]},"finish_reason":null}]}` + "\n\n")
				}
			} else {
				b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
				b.WriteString(`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}` + "\n\n")
				for range 20 {
					b.WriteString(`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"` + pad + `"}}` + "\n\n")
				}
			}
			e.up.reply("text/event-stream", []byte(b.String()))
			o := e.sdk(t, api, "stream", streamRequest(api))
			if o.OK || !strings.Contains(o.Message, "tool call longer than the limit") {
				t.Errorf("SDK got %+v, want the stream's error naming the call", o)
			}
		})
	}
}

// A streamed call is sent only once its decision is acknowledged: while
// the broker holds the produce request, the client has the text before
// the calls and nothing of them; once it answers, the calls the policy
// releases arrive, and every call has its record.
func TestStreamCallWaitsForAudit(t *testing.T) {
	e := start(t, "block")
	// After the calls, more than the server's write buffer holds: sent
	// unheld, it would reach the client, the calls before it with it.
	var pad strings.Builder
	for range 4 {
		pad.WriteString(`data: {"id":"chatcmpl-sparallel1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"pad":"` + strings.Repeat("p", 3000) + "\"}\n\n")
	}
	sse := bytes.Replace(fixture(t, "openai/parallel.sse"), []byte("data: [DONE]"), []byte(pad.String()+"data: [DONE]"), 1)
	e.up.reply("text/event-stream", sse)
	release, producing := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.kf.ControlKey(kmsg.Produce.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		e.kf.KeepControl()
		once.Do(func() { close(producing) })
		<-release
		return nil, nil, false // the broker answers it as always
	})
	released := sync.OnceFunc(func() { close(release) })
	defer released()
	req := streamRequest("openai")
	req["stream"] = true
	body, _ := json.Marshal(req)
	resp, err := http.Post(e.url+"/openai/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var mu sync.Mutex
	var seen strings.Builder
	done := make(chan error, 1)
	go func() {
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			mu.Lock()
			seen.WriteString(line)
			mu.Unlock()
			if err != nil {
				done <- err
				return
			}
		}
	}()
	snapshot := func() string { mu.Lock(); defer mu.Unlock(); return seen.String() }
	select {
	case <-producing:
	case <-time.After(5 * time.Second):
		t.Fatalf("no produce request reached the broker; the client has %q", snapshot())
	}
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(snapshot(), "Checking"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the text before the calls did not arrive while their audit was pending: %q", snapshot())
		}
	}
	time.Sleep(200 * time.Millisecond) // nothing of a call may come meanwhile
	if s := snapshot(); strings.Contains(s, "tool_calls") || strings.Contains(s, "[DONE]") {
		t.Fatalf("sent before the audit acknowledged:\n%s", s)
	}
	released()
	if err := <-done; err != io.EOF {
		t.Fatal(err)
	}
	if s := snapshot(); !strings.Contains(s, `"tool_calls"`) || !strings.Contains(s, "[DONE]") {
		t.Errorf("the released calls did not arrive once recorded:\n%s", s)
	}
	e.records(t, 3)
}

// Streaming, retry: a stream whose call is rejected is continued by the
// stream of a repair request. The SDK accumulates one message: the first
// attempt's text and the calls that resolved, then the repair's text and
// its corrected call, finish tool_calls, usage summed; the upstream sees
// the repair request as retry sends it, streaming; the trailers say what
// was decided.
func TestStreamRetrySDKs(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "retry")
			e.up.queue(t, api+"/parallel.sse", api+"/repaired.sse")
			o := e.sdk(t, api, "stream", streamRequest(api))
			if !o.OK {
				t.Fatalf("SDK failed: %+v", o)
			}
			wantIDs := map[string][]string{"openai": {"call_p1", "call_p3", "call_r1"}, "anthropic": {"toolu_01P1", "toolu_01P3", "toolu_01R1"}}[api]
			if ids := streamedCalls(t, api, o.Response); !slices.Equal(ids, wantIDs) {
				t.Errorf("calls %v, want %v", ids, wantIDs)
			}
			const text = "Checking three things.Sorry, the tool is get_weather." // two text blocks
			switch api {
			case "openai":
				var m openAIMessage
				decode(t, o.Response, &m)
				if c := m.Choices[0].Message.Content; c == nil || *c != "Checking three things.\n\nSorry, the tool is get_weather." || m.Choices[0].FinishReason != "tool_calls" || m.Usage.TotalTokens != 130+215 {
					t.Errorf("message %s", o.Response)
				}
			case "anthropic":
				var m anthropicMessage
				decode(t, o.Response, &m)
				if m.text() != text || m.StopReason != "tool_use" || m.Usage.OutputTokens != 120+30 || m.Usage.InputTokens != 500+700 {
					t.Errorf("message %s", o.Response)
				}
			}
			got := e.up.requests()
			if len(got) != 2 {
				t.Fatalf("upstream got %d requests, want 2", len(got))
			}
			var first, second struct {
				repairTurn
				Stream bool `json:"stream"`
			}
			decode(t, got[0].body, &first)
			decode(t, got[1].body, &second)
			added := second.Messages[len(first.Messages):]
			if !second.Stream || string(first.Tools) != string(second.Tools) {
				t.Errorf("repair request: stream %v, tools %s", second.Stream, second.Tools)
			}
			switch api {
			case "openai":
				var said string
				if len(added) == 4 {
					decode(t, added[0].Content, &said)
				}
				if len(added) != 4 || added[0].Role != "assistant" || len(added[0].ToolCalls) != 3 || said != "Checking three things." ||
					added[2].ToolCallID != "call_p2" || !strings.Contains(string(added[2].Content), `\"get_wether\": H1`) {
					t.Errorf("repair request appended %s", got[1].body[len(got[0].body)-2:])
				}
			case "anthropic":
				var turn []struct{ Type, ID, Text string }
				var results []struct {
					ID      string `json:"tool_use_id"`
					IsError bool   `json:"is_error"`
				}
				if len(added) == 2 {
					decode(t, added[0].Content, &turn)
					decode(t, added[1].Content, &results)
				}
				if len(turn) != 4 || turn[0].Text != "Checking three things." || turn[2].ID != "toolu_01P2" ||
					len(results) != 3 || !results[1].IsError || results[0].IsError || results[1].ID != "toolu_01P2" {
					t.Errorf("repair request appended %+v %+v", turn, results)
				}
			}
			checkRepairAudit(t, e.records(t, 4))
		})
	}
}

// Streaming, retry: a model that keeps calling wrongly gets the route's
// retries and no more, then the block answer (no call, the note, stop /
// end_turn, usage summed); one that repeats a call already sent does
// not make the client run it twice. The trailers say what was decided.
func TestStreamRetryBounded(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "retry")
			e.up.queue(t, api+"/bad.sse", api+"/bad.sse", api+"/bad.sse", api+"/final.sse")
			resp, body := postStream(t, e.url+"/"+api+map[string]string{"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}[api], streamRequest(api))
			if n := len(e.up.requests()); n != 3 {
				t.Errorf("upstream got %d requests, want 3 (the first and 2 retries)", n)
			}
			tr := resp.Trailer
			if tr.Get("Toolaudit-Retries") != "2" || tr.Get("Toolaudit-Calls") != "3" || tr.Get("Toolaudit-Rejected") != "3" || tr.Get("Toolaudit-Withheld") == "" {
				t.Errorf("trailers %v", tr)
			}
			for _, want := range map[string][]string{
				"openai":    {`"finish_reason":"stop"`, `"total_tokens":312`, "[toolaudit] Tool calls withheld", "data: [DONE]"},
				"anthropic": {`"stop_reason":"end_turn"`, `"output_tokens":120`, "[toolaudit] Tool calls withheld", "event: message_stop"},
			}[api] {
				if bytes.Count(body, []byte(want)) != 1 {
					t.Errorf("the stream has %q %d times, want once:\n%s", want, bytes.Count(body, []byte(want)), body)
				}
			}
			if bytes.Contains(body, []byte(`"tool_calls"`)) && api == "openai" && bytes.Contains(body, []byte(`"id":"call_b1"`)) {
				t.Errorf("a rejected call was sent:\n%s", body)
			}
			if classes(e.records(t, 3)) != "H2,H2,H2" {
				t.Errorf("classes")
			}
		})
	}
	t.Run("repeat", func(t *testing.T) {
		e := start(t, "retry")
		e.up.queue(t, "openai/parallel.sse", "openai/repeated.sse")
		o := e.sdk(t, "openai", "stream", streamRequest("openai"))
		if !o.OK {
			t.Fatalf("SDK failed: %+v", o)
		}
		if ids := streamedCalls(t, "openai", o.Response); !slices.Equal(ids, []string{"call_p1", "call_p3", "call_r1"}) {
			t.Errorf("calls %v, want call_p1, call_p3, call_r1 (call_x1 repeats call_p1)", ids)
		}
		e.records(t, 5)
	})
	// A repair answered with text only: the calls sent stand, so the
	// turn still finishes with them.
	t.Run("text", func(t *testing.T) {
		for _, api := range []string{"openai", "anthropic"} {
			e := start(t, "retry")
			e.up.queue(t, api+"/parallel.sse", api+"/final.sse")
			o := e.sdk(t, api, "stream", streamRequest(api))
			if !o.OK {
				t.Fatalf("SDK failed: %+v", o)
			}
			wantIDs := map[string][]string{"openai": {"call_p1", "call_p3"}, "anthropic": {"toolu_01P1", "toolu_01P3"}}[api]
			if ids := streamedCalls(t, api, o.Response); !slices.Equal(ids, wantIDs) {
				t.Errorf("%s: calls %v, want %v", api, ids, wantIDs)
			}
			var fin struct {
				StopReason string `json:"stop_reason"`
				Choices    []struct {
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			decode(t, o.Response, &fin)
			if fin.StopReason+func() string {
				if len(fin.Choices) > 0 {
					return fin.Choices[0].FinishReason
				}
				return ""
			}() != map[string]string{"openai": "tool_calls", "anthropic": "tool_use"}[api] || bytes.Contains(o.Response, []byte("[toolaudit]")) {
				t.Errorf("%s: %s", api, o.Response)
			}
		}
	})
}

// postStream posts req and reads the whole stream, trailers included.
func postStream(t *testing.T, url string, req map[string]any) (*http.Response, []byte) {
	t.Helper()
	req["stream"] = true
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer sk-test")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d, %v:\n%s", resp.StatusCode, err, body)
	}
	return resp, body
}

// Streaming, retry: a turn longer than max_response_bytes is not kept
// whole, so it is answered as under block (the calls that resolve and
// the note), not repaired and not ended with an error: what the proxy
// keeps of a stream stays bounded.
func TestStreamRetryLongTurn(t *testing.T) {
	long := strings.Repeat("a", 3000)
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "retry")
			evs := strings.SplitAfter(string(fixture(t, api+"/parallel.sse")), "\n\n")
			chunk := map[string]string{
				"openai":    `data: {"id":"chatcmpl-sparallel1","object":"chat.completion.chunk","created":1764870100,"model":"gpt-5.1-2025-11-13","choices":[{"index":0,"delta":{"content":"` + long + `"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
				"anthropic": "event: content_block_delta\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + long + `"}}` + "\n\n",
			}[api]
			at := map[string]int{"openai": 2, "anthropic": 4}[api] // after the first text
			body := strings.Join(evs[:at], "") + strings.Repeat(chunk, 7) + strings.Join(evs[at:], "")
			e.up.reply("text/event-stream", []byte(body))
			e.up.queue(t, api+"/repaired.sse")
			o := e.sdk(t, api, "stream", streamRequest(api))
			if !o.OK {
				t.Fatalf("SDK failed: %+v", o)
			}
			wantIDs := map[string][]string{"openai": {"call_p1", "call_p3"}, "anthropic": {"toolu_01P1", "toolu_01P3"}}[api]
			if ids := streamedCalls(t, api, o.Response); !slices.Equal(ids, wantIDs) || !bytes.Contains(o.Response, []byte(`\"get_wether\": H1`)) || !bytes.Contains(o.Response, []byte(long)) {
				t.Errorf("calls %v, want %v and the note", ids, wantIDs)
			}
			if n := len(e.up.requests()); n != 1 {
				t.Errorf("upstream got %d requests, want 1 (no repair)", n)
			}
			if !strings.Contains(e.logs.String(), "not repaired") {
				t.Errorf("the log does not say the turn was not repaired:\n%s", e.logs)
			}
		})
	}
}

// A stream that carries a call where the proxy would not look (a member
// name escaped, a choice's message, an event whose name and type
// differ, a lone CR splitting lines, content in message_start, an item
// replaced at its done, a call only in a response's snapshot) never
// hands that call to the SDK undecided: it is decided (the escaped name
// is read as the SDK reads it: withheld, H1) or the stream ends with the
// error event. Each of these reached the SDK undecided before the proxy
// read events as the SDKs do.
func TestStreamSmuggledCalls(t *testing.T) {
	for _, tc := range []struct{ api, file, want string }{
		{"openai", "openai-escaped-name.sse", ""},
		{"openai", "openai-choice-message.sse", "holds a message"},
		{"openai", "openai-null-error.sse", "both an error and choices"},
		{"anthropic", "anthropic-renamed-event.sse", `holds a "content_block_start"`},
		{"anthropic", "anthropic-start-content.sse", "message_start holds content"},
		{"anthropic", "anthropic-bare-cr.sse", "carriage return"},
		{"responses", "responses-replaced-item.sse", "not added as one"},
		{"responses", "responses-completed-only.sse", "other than the one streamed"},
		{"responses", "responses-final-differs.sse", "other than the one streamed"},
		{"responses", "responses-added-differs.sse", "added as"},
		{"anthropic", "anthropic-two-starts.sse", "blocks out of order"},
		{"responses", "responses-custom-item.sse", `"custom_tool_call" item, which this proxy does not decide`},
		{"openai", "openai-bom-data.sse", "byte order mark"},
		{"openai", "openai-proto-delta.sse", `a member named "__proto__"`},
		{"anthropic", "anthropic-bom-event.sse", "byte order mark"},
		{"responses", "responses-bom-data.sse", "byte order mark"},
		{"anthropic", "anthropic-empty-event.sse", `an event named "" holds a "content_block_start"`},
		{"responses", "responses-after-done.sse", "not of an item added and not done"},
		// The proxy's error event comes first: the SDK says so its way.
		{"responses", "responses-created-output.sse", "got error"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			e := start(t, "block")
			e.up.queue(t, "smuggled/"+tc.file)
			o := e.sdk(t, tc.api, "stream", streamRequest(tc.api))
			call := []byte(`"name":"wipe_disk"`)
			if bytes.Contains(o.Response, call) || bytes.Contains(o.Final, call) {
				t.Fatalf("the SDK got the smuggled call: %s%s", o.Response, o.Final)
			}
			if tc.want == "" {
				if !o.OK {
					t.Fatalf("SDK: %s", o.Message)
				}
				if recs := e.records(t, 1); !bytes.Contains(recs[0].Call, []byte(`"tool":"wipe_disk"`)) || classes(recs) != "H1" {
					t.Errorf("audit %s %s, want wipe_disk H1", recs[0].Call, classes(recs))
				}
				return
			}
			if o.OK || !strings.Contains(o.Message, tc.want) {
				t.Errorf("SDK got ok=%v %q, want the stream's error naming %q", o.OK, o.Message, tc.want)
			}
		})
	}
}

// A streamed tool_use is decided on the input the SDK reads: the
// input_json_delta deltas' partial_json, and only theirs, or the start
// block's input when there is none. Before, the proxy decided {} for a
// block without deltas (rejecting a call the SDK would run with its
// input) and added any delta's partial_json (deciding limit 50 where the
// SDK ran {"query":"umbrella"}, its lenient reading of the incomplete
// input).
func TestStreamReadAsSDK(t *testing.T) {
	for _, tc := range []struct {
		file, args string // args: the call decided and sent; "": withheld
	}{
		{"anthropic-start-input.sse", `{"city":"Paris"}`},
		{"anthropic-delta-type.sse", ""},
	} {
		t.Run(tc.file, func(t *testing.T) {
			e := start(t, "block")
			e.up.queue(t, "smuggled/"+tc.file)
			o := e.sdk(t, "anthropic", "stream", streamRequest("anthropic"))
			if !o.OK {
				t.Fatalf("SDK: %s", o.Message)
			}
			var m anthropicMessage
			decode(t, o.Response, &m)
			var inputs []string
			for _, c := range m.Content {
				if c.Type == "tool_use" {
					inputs = append(inputs, string(c.In))
				}
			}
			recs := e.records(t, 1)
			switch {
			case tc.args == "" && len(inputs) != 0:
				t.Errorf("the SDK got %v, want the call withheld", inputs)
			case tc.args != "" && (len(inputs) != 1 || inputs[0] != tc.args):
				t.Errorf("the SDK got %v, want %s", inputs, tc.args)
			case tc.args != "" && !bytes.Contains(recs[0].Call, []byte(`"arguments":`+tc.args)):
				t.Errorf("decided %s, want the arguments %s", recs[0].Call, tc.args)
			}
		})
	}
}

// A call decided in a stream that then fails is not sent, and its
// decision is in the audit trail all the same: a hostile upstream cannot
// hide a rejected call by breaking the stream after it.
func TestStreamFailureKeepsDecisions(t *testing.T) {
	for _, policy := range []string{"block", "retry"} {
		t.Run(policy, func(t *testing.T) {
			e := start(t, policy)
			e.up.reply("text/event-stream", []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"+
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_bad\",\"name\":\"delete_everything\",\"input\":{}}}\n\n"+
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"+
				"event: content_block_delta\ndata: {not json}\n\n"))
			o := e.sdk(t, "anthropic", "stream", streamRequest("anthropic"))
			if o.OK || bytes.Contains(o.Response, []byte("delete_everything")) {
				t.Fatalf("SDK got %+v, want the stream's error", o)
			}
			if recs := e.records(t, 1); classes(recs) != "H1" || !bytes.Contains(recs[0].Call, []byte(`"tool":"delete_everything"`)) {
				t.Errorf("audit %s %s, want delete_everything H1", classes(recs), recs[0].Call)
			}
		})
	}
}

// Streaming, retry: what an attempt passed on reaches the client before
// the repair request is answered: its last call (call_p3, complete at
// the finish_reason the upstream sends last) is not held until the
// upstream's next turn comes.
func TestStreamRetrySendsBeforeRepair(t *testing.T) {
	release := make(chan struct{})
	var n atomic.Int32
	first, repaired := fixture(t, "openai/parallel.sse"), fixture(t, "openai/repaired.sse")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		body := first
		if n.Add(1) > 1 {
			select {
			case <-release:
			case <-time.After(20 * time.Second):
			}
			body = repaired
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(body)
	}))
	defer up.Close()
	url := serveProxy(t, `{prefix: /o, api: openai, upstream: "`+up.URL+`", registry: fleet, policy: retry, retries: 1}`)
	req := streamRequest("openai")
	req["stream"] = true
	body, _ := json.Marshal(req)
	resp, err := http.Post(url+"/o/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	var seen strings.Builder
	if !arrivesWhileHeld(t, func() error { return readUntil(br, &seen, "call_p3") }, &seen, release, "the attempt's last call") {
		return
	}
	close(release)
	if rest, _ := io.ReadAll(br); !strings.Contains(string(rest), "call_r1") || n.Load() != 2 {
		t.Errorf("after the repair (%d requests): %s", n.Load(), rest)
	}
}

// serveProxy serves a proxy of one route (YAML) for the test; its URL.
func serveProxy(t *testing.T, route string) string {
	t.Helper()
	cfg, err := modelproxy.ParseConfig([]byte("routes: [" + route + "]"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := modelproxy.New(modelproxy.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL
}

// arrivesWhileHeld runs read (reading into seen until what is there)
// while the upstream holds the rest of its answer until release is
// closed: false, the test failed and the upstream released, when it did
// not within 5 s.
func arrivesWhileHeld(t *testing.T, read func() error, seen *strings.Builder, release chan struct{}, what string) bool {
	t.Helper()
	got := make(chan error, 1)
	go func() { got <- read() }()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%v after %q", err, seen.String())
		}
		return true
	case <-time.After(5 * time.Second):
		t.Errorf("%s did not reach the client while the upstream held the rest", what)
		close(release)
		<-got
		return false
	}
}

// readUntil reads br's lines into seen until they hold want.
func readUntil(br *bufio.Reader, seen *strings.Builder, want string) error {
	for !strings.Contains(seen.String(), want) {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		seen.WriteString(line)
	}
	return nil
}

// Every Chat Completions chunk the client reads, those the proxy builds
// (a call released whole, the note) as those it passes on, carries the
// upstream's envelope as it was (id, model, created, fingerprint...).
func TestStreamChunksKeepEnvelope(t *testing.T) {
	e := start(t, "block")
	e.up.queue(t, "openai/parallel.sse")
	_, body := postStream(t, e.url+"/openai/v1/chat/completions", streamRequest("openai"))
	envelope := func(data string) string {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		delete(m, "choices")
		delete(m, "usage")
		b, _ := json.Marshal(m)
		return string(b)
	}
	up := fixture(t, "openai/parallel.sse")
	first, _, _ := strings.Cut(strings.TrimPrefix(string(up), "data: "), "\n")
	want := envelope(first)
	var built, n int
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		n++
		if !strings.Contains(string(up), data) {
			built++
		}
		if got := envelope(data); got != want {
			t.Errorf("chunk %s: envelope %s, want %s", data, got, want)
		}
	}
	if built < 2 || n < 4 {
		t.Errorf("%d chunks, %d built by the proxy: want the calls released and the note among them:\n%s", n, built, body)
	}
}
