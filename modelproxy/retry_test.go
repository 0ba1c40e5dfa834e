package modelproxy_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/audit"
)

// repairTurn is what the tests read of a repair request: the messages
// the proxy appended to the client's.
type repairTurn struct {
	Messages []struct {
		Role       string          `json:"role"`
		ToolCallID string          `json:"tool_call_id"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools json.RawMessage `json:"tools"`
}

// Under retry the proxy answers the model the rejected call's fix text
// as that tool's error, the calls that resolve as kept, and asks again:
// the client receives the resolved calls of the first answer and the
// corrected one, once each, usage summed; the upstream sees the repair
// request in its API's own terms.
func TestRetrySDKs(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "retry")
			e.up.queue(t, api+"/parallel.json", api+"/repaired.json")
			req := requestFor(api)
			o := e.sdk(t, api, "create", req)
			if !o.OK {
				t.Fatalf("SDK failed: %+v", o)
			}
			if h := o.Headers; h["toolaudit-retries"] != "1" || h["toolaudit-calls"] != "4" || h["toolaudit-rejected"] != "1" || h["toolaudit-withheld"] != "" {
				t.Errorf("headers %v", h)
			}
			got := e.up.requests()
			if len(got) != 2 {
				t.Fatalf("upstream got %d requests, want 2", len(got))
			}
			var first, second repairTurn
			decode(t, got[0].body, &first)
			decode(t, got[1].body, &second)
			if string(first.Tools) != string(second.Tools) {
				t.Errorf("the repair request changed the tools:\n%s\n%s", first.Tools, second.Tools)
			}
			if got[1].header.Get("Authorization")+got[1].header.Get("X-Api-Key") == "" {
				t.Errorf("the repair request has no credential")
			}
			added := second.Messages[len(first.Messages):]
			switch api {
			case "openai":
				var m openAIMessage
				decode(t, o.Response, &m)
				if ids := m.callIDs(); !slices.Equal(ids, []string{"call_p1", "call_p3", "call_r1"}) || m.Choices[0].FinishReason != "tool_calls" {
					t.Errorf("calls %v finish %s", ids, m.Choices[0].FinishReason)
				}
				if m.Usage.TotalTokens != 130+215 {
					t.Errorf("usage %+v, want the sum 345", m.Usage)
				}
				// assistant (the three calls), then one tool message each.
				if len(added) != 4 || added[0].Role != "assistant" || len(added[0].ToolCalls) != 3 {
					t.Fatalf("repair request appended %+v", added)
				}
				for i, id := range []string{"call_p1", "call_p2", "call_p3"} {
					var text string
					decode(t, added[i+1].Content, &text)
					rejected := id == "call_p2"
					if added[i+1].Role != "tool" || added[i+1].ToolCallID != id || strings.Contains(text, "rejected") != rejected ||
						(rejected && !strings.Contains(text, `"get_wether": H1`)) || (!rejected && !strings.Contains(text, "Do not call it again")) {
						t.Errorf("tool result %d: %+v %q", i, added[i+1], text)
					}
				}
			case "anthropic":
				var m anthropicMessage
				decode(t, o.Response, &m)
				if ids := m.callIDs(); !slices.Equal(ids, []string{"toolu_01P1", "toolu_01P3", "toolu_01R1"}) || m.StopReason != "tool_use" {
					t.Errorf("calls %v stop %s", ids, m.StopReason)
				}
				if m.Usage.OutputTokens != 120+30 {
					t.Errorf("usage %+v, want the sum 150", m.Usage)
				}
				if len(added) != 2 || added[0].Role != "assistant" || added[1].Role != "user" {
					t.Fatalf("repair request appended %+v", added)
				}
				var results []struct {
					Type, Content string
					ID            string `json:"tool_use_id"`
					IsError       bool   `json:"is_error"`
				}
				decode(t, added[1].Content, &results)
				if len(results) != 3 {
					t.Fatalf("tool results %+v", results)
				}
				for i, id := range []string{"toolu_01P1", "toolu_01P2", "toolu_01P3"} {
					r := results[i]
					if r.Type != "tool_result" || r.ID != id || r.IsError != (id == "toolu_01P2") {
						t.Errorf("tool result %d: %+v", i, r)
					}
				}
				if !strings.Contains(results[1].Content, `"get_wether": H1`) {
					t.Errorf("the error result has no fix text: %q", results[1].Content)
				}
			}
			checkRepairAudit(t, e.records(t, 4))
		})
	}
}

// checkRepairAudit checks the audit of a repaired answer (parallel, then
// repaired): one record per call of each attempt, as resolverd check
// decides them; the attempts are one trace, each attempt its span.
func checkRepairAudit(t *testing.T, recs []audit.Record) {
	t.Helper()
	if got := classes(recs); got != "OK,H1,OK,OK" {
		t.Errorf("classes %s", got)
	}
	checkOffline(t, recs)
	var ev [4]struct {
		TraceID string `json:"trace_id"`
		SpanID  string `json:"span_id"`
	}
	for i, r := range recs {
		decode(t, r.Call, &ev[i])
	}
	if ev[0].TraceID == "" || ev[0].TraceID != ev[3].TraceID || ev[0].SpanID != ev[2].SpanID || ev[0].SpanID == ev[3].SpanID {
		t.Errorf("the attempts' trace and spans: %+v", ev)
	}
}

// A client's traceparent names the trace of its request's calls in the
// audit: the agent run's trace leads to the decisions of its model calls.
func TestCallerTrace(t *testing.T) {
	e := start(t, "observe")
	e.up.queue(t, "openai/honest.json")
	body, err := json.Marshal(requestFor("openai"))
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/openai/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, r := range e.records(t, 1) {
		var ev struct {
			TraceID string `json:"trace_id"`
		}
		decode(t, r.Call, &ev)
		if ev.TraceID != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("trace_id %q, want the caller's", ev.TraceID)
		}
	}
}

// A model that keeps calling wrongly gets the route's retries and no
// more; the client then gets the block answer.
func TestRetryBounded(t *testing.T) {
	for _, api := range []string{"openai", "anthropic"} {
		t.Run(api, func(t *testing.T) {
			e := start(t, "retry")
			e.up.queue(t, api+"/bad.json", api+"/bad.json", api+"/bad.json", api+"/final.json")
			req := requestFor(api)
			o := e.sdk(t, api, "create", req)
			if !o.OK {
				t.Fatalf("SDK failed: %+v", o)
			}
			if n := len(e.up.requests()); n != 3 {
				t.Errorf("upstream got %d requests, want 3 (the first and 2 retries)", n)
			}
			if h := o.Headers; h["toolaudit-retries"] != "2" || h["toolaudit-rejected"] != "3" || h["toolaudit-withheld"] == "" {
				t.Errorf("headers %v", h)
			}
			switch api {
			case "openai":
				var m openAIMessage
				decode(t, o.Response, &m)
				if len(m.callIDs()) != 0 || m.Choices[0].FinishReason != "stop" || m.Usage.TotalTokens != 3*104 {
					t.Errorf("not the block answer: %s", o.Response)
				}
			case "anthropic":
				var m anthropicMessage
				decode(t, o.Response, &m)
				if len(m.callIDs()) != 0 || m.StopReason != "end_turn" || m.Usage.OutputTokens != 3*40 {
					t.Errorf("not the block answer: %s", o.Response)
				}
			}
			if got := classes(e.records(t, 3)); got != "H2,H2,H2" {
				t.Errorf("classes %s", got)
			}
		})
	}
}

// The SDKs' agent loops under retry, streaming or not, execute the
// calls that resolved and the corrected one, once each, and never the
// rejected one.
func TestRetryAgentLoops(t *testing.T) {
	for _, tc := range []struct {
		api, ext string
		stream   bool
	}{{"openai", ".json", false}, {"anthropic", ".json", false}, {"openai", ".sse", true}, {"anthropic", ".sse", true}} {
		api := tc.api
		t.Run(api+tc.ext, func(t *testing.T) {
			e := start(t, "retry")
			e.up.queue(t, api+"/parallel"+tc.ext, api+"/repaired"+tc.ext, api+"/final"+tc.ext)
			req := requestFor(api)
			if api == "anthropic" {
				req["tools"] = req["tools"].([]any)[:2]
			}
			o := e.sdkStream(t, api, "agent", req, tc.stream)
			if !o.OK {
				t.Fatalf("agent loop failed: %+v", o)
			}
			var ran []string
			for _, x := range o.Executed {
				ran = append(ran, x.Name+string(x.Args))
			}
			want := []string{`get_weather{"city":"Lyon"}`, `search_docs{"query":"umbrella","limit":5}`, `get_weather{"city":"Nice"}`}
			if !slices.Equal(ran, want) {
				t.Errorf("executed %v, want %v", ran, want)
			}
			if n := len(e.up.requests()); n != 3 {
				t.Errorf("upstream got %d requests, want 3", n)
			}
		})
	}
}

// A model that repeats a call that resolved, against the repair text,
// does not make the client run it twice: the repeat is dropped.
func TestRetryDropsRepeats(t *testing.T) {
	e := start(t, "retry")
	e.up.queue(t, "openai/parallel.json", "openai/repeated.json")
	o := e.sdk(t, "openai", "create", openAIRequest())
	if !o.OK {
		t.Fatalf("SDK failed: %+v", o)
	}
	var m openAIMessage
	decode(t, o.Response, &m)
	if ids := m.callIDs(); !slices.Equal(ids, []string{"call_p1", "call_p3", "call_r1"}) {
		t.Errorf("calls %v, want call_p1, call_p3, call_r1 (call_x1 repeats call_p1)", ids)
	}
	e.records(t, 5)
}

// A repair answer that is not one model turn (no choice, or a choice
// without its message) cannot carry the calls kept from the first: the
// client gets the first answer's block answer, and the proxy does not
// fail.
func TestRetryAnswerNotOneTurn(t *testing.T) {
	for _, body := range []string{
		`{"id":"chatcmpl-2","object":"chat.completion","model":"gpt-5.1","choices":[]}`,
		`{"id":"chatcmpl-2","object":"chat.completion","model":"gpt-5.1","choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`,
	} {
		e := start(t, "retry")
		e.up.queue(t, "openai/parallel.json")
		e.up.reply("application/json", []byte(body))
		o := e.sdk(t, "openai", "create", openAIRequest())
		var m openAIMessage
		decode(t, o.Response, &m)
		if !o.OK || !slices.Equal(m.callIDs(), []string{"call_p1", "call_p3"}) || o.Headers["toolaudit-retries"] != "1" {
			t.Errorf("%s: SDK got %+v, want the first answer's block answer", body, o)
		}
	}
}

// chatAnswer is a Chat Completions answer of one choice holding calls.
func chatAnswer(id, usage string, calls ...[3]string) []byte {
	var tcs []string
	for _, c := range calls {
		tcs = append(tcs, fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}`, c[0], c[1], c[2]))
	}
	return []byte(fmt.Sprintf(`{"id":%q,"object":"chat.completion","model":"gpt-5.1","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[%s]},"finish_reason":"tool_calls"}],"usage":%s}`,
		id, strings.Join(tcs, ","), usage))
}

// Under retry a call kept runs once, whichever attempt repeats it and
// however its arguments are written (members in another order, a number
// as 5.0): the client receives the first, not its repeats; and usage
// counts past float64 stay JSON.
func TestRetryRepeats(t *testing.T) {
	const usage = `{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}`
	for _, tc := range []struct {
		name    string
		answers [][]byte
		want    []string
	}{
		{"a middle attempt repeats a kept call", [][]byte{
			chatAnswer("c1", usage, [3]string{"call_p1", "get_weather", `{"city":"Lyon"}`}, [3]string{"call_p2", "get_wether", `{"city":"Nice"}`}),
			chatAnswer("c2", usage, [3]string{"call_x1", "get_weather", `{"city":"Lyon"}`}, [3]string{"call_x2", "get_wether", `{"city":"Nice"}`}),
			chatAnswer("c3", usage, [3]string{"call_r1", "get_weather", `{"city":"Nice"}`}),
		}, []string{"call_p1", "call_r1"}},
		{"a repeat written otherwise", [][]byte{
			chatAnswer("c1", usage, [3]string{"call_p1", "search_docs", `{"query":"u","limit":5}`}, [3]string{"call_p2", "get_wether", `{"city":"Nice"}`}),
			chatAnswer("c2", usage, [3]string{"call_x1", "search_docs", `{"limit":5.0,"query":"\u0075"}`}, [3]string{"call_r1", "get_weather", `{"city":"Nice"}`}),
		}, []string{"call_p1", "call_r1"}},
		{"one turn's equal calls are the model's own", [][]byte{
			chatAnswer("c1", usage, [3]string{"call_a", "get_weather", `{"city":"Lyon"}`}, [3]string{"call_b", "get_weather", `{"city":"Lyon"}`}, [3]string{"call_p2", "get_wether", `{"city":"Nice"}`}),
			chatAnswer("c2", usage, [3]string{"call_r1", "get_weather", `{"city":"Nice"}`}),
		}, []string{"call_a", "call_b", "call_r1"}},
		{"usage past float64", [][]byte{
			chatAnswer("c1", `{"total_tokens":1e308}`, [3]string{"call_p2", "get_wether", `{"city":"Nice"}`}),
			chatAnswer("c2", `{"total_tokens":1e308}`, [3]string{"call_r1", "get_weather", `{"city":"Nice"}`}),
		}, []string{"call_r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, "retry")
			for _, a := range tc.answers {
				e.up.reply("application/json", a)
			}
			o := e.sdk(t, "openai", "create", openAIRequest())
			calls := choiceCalls(t, o.Response)
			if len(calls) != 1 {
				t.Fatalf("SDK got %+v", o)
			}
			if ids := calls[0]; !o.OK || !slices.Equal(ids, tc.want) {
				t.Errorf("SDK got ok=%v %s %v, want the calls %v", o.OK, o.Message, ids, tc.want)
			}
		})
	}
}
