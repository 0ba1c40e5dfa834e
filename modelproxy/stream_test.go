package modelproxy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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
	cfg, err := modelproxy.ParseConfig([]byte(`routes: [{prefix: /a, api: anthropic, upstream: "` + up.URL + `", registry: fleet, policy: block}]`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := modelproxy.New(modelproxy.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	body, _ := json.Marshal(map[string]any{"model": "m", "max_tokens": 10, "stream": true, "messages": []any{}, "tools": anthropicRequest()["tools"]})
	var seen strings.Builder
	var br *bufio.Reader
	got := make(chan error, 1)
	go func() { // the response's headers too must come before the upstream ends
		resp, err := http.Post(srv.URL+"/a/v1/messages", "application/json", bytes.NewReader(body))
		if err != nil {
			got <- err
			return
		}
		br = bufio.NewReader(resp.Body)
		t.Cleanup(func() { resp.Body.Close() })
		for !strings.Contains(seen.String(), "early text") {
			line, err := br.ReadString('\n')
			if err != nil {
				got <- err
				return
			}
			seen.WriteString(line)
		}
		got <- nil
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%v after %q", err, seen.String())
		}
	case <-time.After(5 * time.Second):
		t.Error("the text did not reach the client while the upstream held the rest of the stream")
		close(release)
		<-got
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
			e.up.mu.Lock()
			e.up.q = append(e.up.q, reply{status: 200, contentType: "text/event-stream", body: long})
			e.up.mu.Unlock()
			o := e.sdk(t, api, "stream", streamRequest(api))
			if o.OK || !strings.Contains(o.Message, "longer than the limit") {
				t.Errorf("SDK got %+v, want the stream's error naming the line", o)
			}
			e.records(t, 0)
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
			e.up.mu.Lock()
			e.up.q = append(e.up.q, reply{status: 200, contentType: "text/event-stream", body: []byte(b.String())})
			e.up.mu.Unlock()
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
	e.up.mu.Lock()
	e.up.q = append(e.up.q, reply{status: 200, contentType: "text/event-stream", body: sse})
	e.up.mu.Unlock()
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
