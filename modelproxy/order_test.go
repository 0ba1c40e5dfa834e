package modelproxy_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// responsesSSE is a Responses event stream of evs, numbered in order.
func responsesSSE(evs ...map[string]any) []byte {
	var b strings.Builder
	for i, e := range evs {
		e["sequence_number"] = i
		d, _ := json.Marshal(e)
		fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", e["type"], d)
	}
	return []byte(b.String())
}

func responseObject(id string, output ...any) map[string]any {
	return map[string]any{"id": id, "object": "response", "created_at": 1, "status": "in_progress", "model": "gpt-5.1", "output": append([]any{}, output...), "usage": nil}
}

func functionCall(id, name, args string) map[string]any {
	return map[string]any{"type": "function_call", "id": "fc_" + id, "call_id": id, "name": name, "arguments": args, "status": "completed"}
}

// The SDK appends each output_item.added's item whatever its index and
// applies the other events at theirs (the proxy renumbering them past
// the items withheld): items out of order, an event of no item added or
// of one done, and an item added while a call is held (the client would
// get it first) are refused. Before, an event at an index never added was
// renumbered onto a released call, and changed its arguments in the
// SDK's final response; an interleaved message broke the SDK.
func TestResponsesStreamOrder(t *testing.T) {
	msg := map[string]any{"type": "message", "id": "msg_1", "status": "in_progress", "role": "assistant", "content": []any{}}
	for _, tc := range []struct {
		name string
		evs  []map[string]any
		want string
	}{
		{"an index never added", []map[string]any{
			{"type": "response.created", "response": responseObject("resp_1")},
			{"type": "response.output_item.added", "output_index": 0, "item": functionCall("call_k", "get_weather", "")},
			{"type": "response.output_item.done", "output_index": 0, "item": functionCall("call_k", "get_weather", `{"city":"Lyon"}`)},
			{"type": "response.output_item.added", "output_index": 5, "item": functionCall("call_w", "get_wether", "")},
			{"type": "response.output_item.done", "output_index": 5, "item": functionCall("call_w", "get_wether", `{"city":"Nice"}`)},
			{"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_call_k", "arguments": `{"city":"EVIL"}`},
		}, "items out of order"},
		{"an event of no item", []map[string]any{
			{"type": "response.created", "response": responseObject("resp_1")},
			{"type": "response.output_item.added", "output_index": 0, "item": functionCall("call_k", "get_weather", "")},
			{"type": "response.output_item.done", "output_index": 0, "item": functionCall("call_k", "get_weather", `{"city":"Lyon"}`)},
			{"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_call_k", "arguments": `{"city":"EVIL"}`},
		}, "not of an item added and not done"},
		{"the added item's arguments not the done item's", []map[string]any{
			{"type": "response.created", "response": responseObject("resp_1")},
			{"type": "response.output_item.added", "output_index": 0, "item": functionCall("call_k", "get_weather", `{"city":"EVIL"}`)},
			{"type": "response.output_item.done", "output_index": 0, "item": functionCall("call_k", "get_weather", `{"city":"Lyon"}`)},
		}, "its arguments events and its item differ"},
		{"interleaved", []map[string]any{
			{"type": "response.created", "response": responseObject("resp_1")},
			{"type": "response.output_item.added", "output_index": 0, "item": functionCall("call_k", "get_weather", "")},
			{"type": "response.output_item.added", "output_index": 1, "item": msg},
			{"type": "response.output_item.done", "output_index": 0, "item": functionCall("call_k", "get_weather", `{"city":"Lyon"}`)},
		}, "interleaved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, "block")
			e.up.reply("text/event-stream", responsesSSE(tc.evs...))
			req := responsesRequest()
			req["stream"] = true
			o := e.sdkStream(t, "responses", "stream", req, true)
			if o.OK || !strings.Contains(o.Message, tc.want) || strings.Contains(string(o.Response)+string(o.Final), "EVIL") {
				t.Errorf("SDK got ok=%v %q %s, want the stream's error naming %q", o.OK, o.Message, o.Response, tc.want)
			}
		})
	}
}

// A Responses repair request carries the turn's output items as they
// came: the reasoning item with what followed it, a server tool's call
// and the function call (the API refuses a reasoning model's call without
// its reasoning item, and that item without what followed it).
func TestResponsesRepairKeepsReasoning(t *testing.T) {
	e := start(t, "retry")
	rs := map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "ENC"}
	ws := map[string]any{"type": "web_search_call", "id": "ws_1", "status": "completed", "action": map[string]any{"type": "search", "query": "weather"}}
	first := responseObject("resp_r", rs, ws, functionCall("call_w", "get_wether", `{"city":"Nice"}`))
	first["status"] = "completed"
	b, _ := json.Marshal(first)
	e.up.reply("application/json", b)
	e.up.queue(t, "responses/repaired.json")
	if o := e.sdk(t, "responses", "create", responsesRequest()); !o.OK {
		t.Fatalf("%+v", o)
	}
	var repair struct {
		Input []struct {
			Type string `json:"type"`
		} `json:"input"`
	}
	decode(t, e.up.requests()[1].body, &repair)
	var types []string
	for _, it := range repair.Input {
		types = append(types, it.Type)
	}
	if got := strings.Join(types, ","); !strings.Contains(got, "reasoning,web_search_call,function_call,function_call_output") {
		t.Errorf("repair input %s, want the reasoning item before its call", got)
	}
}

// Under retry a call that one choice repeats of another's (n > 1) is the
// model's own, not a repeat of a call an earlier attempt sent: each choice
// keeps its calls.
func TestStreamChoicesKeepTheirCalls(t *testing.T) {
	e := start(t, "retry")
	var b strings.Builder
	env := `"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-5.1"`
	for ci := range 2 {
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":%d,\"delta\":{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"index\":0,\"id\":\"call_%d\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\"}}]},\"finish_reason\":null}]}\n\n", env, ci, ci)
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":%d,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n", env, ci)
	}
	b.WriteString("data: [DONE]\n\n")
	e.up.reply("text/event-stream", []byte(b.String()))
	req := openAIRequest()
	req["n"], req["stream"] = 2, true
	o := e.sdkStream(t, "openai", "stream", req, true)
	if calls := choiceCalls(t, o.Response); !o.OK || len(calls) != 2 || len(calls[0]) != 1 || len(calls[1]) != 1 {
		t.Errorf("SDK got %+v, want each choice with its call", o)
	}
}
