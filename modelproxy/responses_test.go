package modelproxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// responsesOut is what the tests read of a Responses answer.
type responsesOut struct {
	ID     string `json:"id"`
	Output []struct {
		Type    string `json:"type"`
		CallID  string `json:"call_id"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

// upstreamInput is what the upstream received of a Responses request's
// input.
type upstreamInput struct {
	Input []struct {
		Type    string `json:"type"`
		CallID  string `json:"call_id"`
		Output  string `json:"output"`
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"input"`
}

// continuing is the request that continues response id with the
// results of the calls call_p1 and call_p3 (the ones block lets through).
func continuing(id string) map[string]any {
	next := responsesRequest()
	next["previous_response_id"] = id
	next["input"] = []any{
		map[string]any{"type": "function_call_output", "call_id": "call_p1", "output": "12C"},
		map[string]any{"type": "function_call_output", "call_id": "call_p3", "output": "no docs"},
	}
	return next
}

func (r *responsesOut) callIDs() []string {
	var ids []string
	for _, it := range r.Output {
		if it.Type == "function_call" {
			ids = append(ids, it.CallID)
		}
	}
	return ids
}

// The Responses API through the official SDK: observe forwards, block
// withholds the rejected function_call items (the SDK's output_text then
// carries the note), retry repairs; a request continuing a block answer
// (previous_response_id) gets the withheld calls' outputs supplied, so
// that the API, which stored every call it returned, takes it.
func TestResponsesSDK(t *testing.T) {
	t.Run("observe", func(t *testing.T) {
		e := start(t, "observe")
		e.up.queue(t, "responses/parallel.json")
		o := e.sdk(t, "responses", "create", responsesRequest())
		var r responsesOut
		decode(t, o.Response, &r)
		if !o.OK || !slices.Equal(r.callIDs(), []string{"call_p1", "call_p2", "call_p3"}) {
			t.Fatalf("%+v", o)
		}
		recs := e.records(t, 3)
		if got := classes(recs); got != "OK,H1,OK" {
			t.Errorf("classes %s", got)
		}
		// get_weather is declared strict: false, search_docs strict.
		var c struct{ Surface string }
		decode(t, recs[2].Call, &c)
		if c.Surface != "schema_enforced" {
			t.Errorf("search_docs surface %q", c.Surface)
		}
		checkOffline(t, recs)
	})
	t.Run("block, another client continues", func(t *testing.T) {
		// The withheld outputs are the client's the block answer went to:
		// another credential continuing the response id gets none.
		e := start(t, "block")
		e.up.queue(t, "responses/parallel.json", "responses/final.json")
		o := e.sdk(t, "responses", "create", responsesRequest())
		var r responsesOut
		decode(t, o.Response, &r)
		req, _ := http.NewRequest(http.MethodPost, e.url+"/openai/v1/responses", bytes.NewReader(mustMarshal(continuing(r.ID))))
		req.Header.Set("Authorization", "Bearer sk-another")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var up upstreamInput
		decode(t, e.up.requests()[1].body, &up)
		if len(up.Input) != 2 || up.Input[0].CallID != "call_p1" {
			t.Errorf("another client's continuing request went upstream as %s, want its own input only", e.up.requests()[1].body)
		}
	})
	t.Run("block, a string input continues", func(t *testing.T) {
		e := start(t, "block")
		e.up.queue(t, "responses/parallel.json", "responses/final.json")
		o := e.sdk(t, "responses", "create", responsesRequest())
		var r responsesOut
		decode(t, o.Response, &r)
		next := responsesRequest()
		next["previous_response_id"], next["input"] = r.ID, "And tomorrow?"
		if o := e.sdk(t, "responses", "create", next); !o.OK {
			t.Fatalf("%+v", o)
		}
		var up upstreamInput
		decode(t, e.up.requests()[1].body, &up)
		if len(up.Input) != 2 || up.Input[0].CallID != "call_p2" || up.Input[1].Role != "user" || up.Input[1].Content != "And tomorrow?" {
			t.Errorf("the continuing request's input %s, want call_p2's output, then the user's text", e.up.requests()[1].body)
		}
	})
	t.Run("block", func(t *testing.T) {
		e := start(t, "block")
		e.up.queue(t, "responses/parallel.json", "responses/final.json", "responses/bad.json")
		o := e.sdk(t, "responses", "create", responsesRequest())
		var r responsesOut
		decode(t, o.Response, &r)
		if !o.OK || !slices.Equal(r.callIDs(), []string{"call_p1", "call_p3"}) || o.OutputText == nil || !strings.Contains(*o.OutputText, `"get_wether": H1`) {
			t.Fatalf("%+v", o)
		}
		// The client continues: results of the calls it got.
		next := continuing(r.ID)
		if o := e.sdk(t, "responses", "create", next); !o.OK {
			t.Fatalf("%+v", o)
		}
		var up upstreamInput
		decode(t, e.up.requests()[1].body, &up)
		var ids []string
		for _, it := range up.Input {
			ids = append(ids, it.CallID)
		}
		if !slices.Equal(ids, []string{"call_p2", "call_p1", "call_p3"}) || !strings.Contains(up.Input[0].Output, "H1") {
			t.Errorf("the continuing request's input %+v, want call_p2's output supplied first", up.Input)
		}
		bad := e.sdk(t, "responses", "create", responsesRequest())
		var b responsesOut
		decode(t, bad.Response, &b)
		if !bad.OK || len(b.callIDs()) != 0 || bad.OutputText == nil || !strings.Contains(*bad.OutputText, "H2") {
			t.Errorf("bad: %+v", bad)
		}
		e.records(t, 4)
	})
	t.Run("retry", func(t *testing.T) {
		e := start(t, "retry")
		e.up.queue(t, "responses/parallel.json", "responses/repaired.json")
		o := e.sdk(t, "responses", "create", responsesRequest())
		var r responsesOut
		decode(t, o.Response, &r)
		if !o.OK || !slices.Equal(r.callIDs(), []string{"call_p1", "call_p3", "call_r1"}) || r.Usage.TotalTokens != 130+215 {
			t.Fatalf("%+v", o)
		}
		var up struct {
			Input []json.RawMessage `json:"input"`
		}
		decode(t, e.up.requests()[1].body, &up)
		// The user's message, the three calls, their three outputs.
		if len(up.Input) != 7 || !strings.Contains(string(up.Input[5]), `rejected`) || !strings.Contains(string(up.Input[4]), `Do not call it again`) {
			t.Errorf("repair input %s", up.Input)
		}
		if got := classes(e.records(t, 4)); got != "OK,H1,OK,OK" {
			t.Errorf("classes %s", got)
		}
	})
}

// The Responses API streamed, through the official SDK's streaming helper
// (responses.stream, which accumulates the events and raises on any it
// cannot place): observe passes every event; block withholds the rejected
// function_call item, renumbers the items after it, sends the note as a
// message item of its own and the final response as sent; a request
// continuing it gets the withheld call's output supplied, as without
// streaming.
func TestResponsesStream(t *testing.T) {
	streamed := func() map[string]any {
		r := responsesRequest()
		r["stream"] = true
		return r
	}
	t.Run("observe", func(t *testing.T) {
		e := start(t, "observe")
		e.up.queue(t, "responses/parallel.sse")
		o := e.sdkStream(t, "responses", "stream", streamed(), true)
		var r responsesOut
		decode(t, o.Response, &r)
		if !o.OK || !slices.Equal(r.callIDs(), []string{"call_p1", "call_p2", "call_p3"}) || o.Events != 25 {
			t.Fatalf("%+v", o)
		}
		if got := classes(e.records(t, 3)); got != "OK,H1,OK" {
			t.Errorf("classes %s", got)
		}
	})
	t.Run("block", func(t *testing.T) {
		e := start(t, "block")
		e.up.queue(t, "responses/parallel.sse", "responses/final.json", "responses/bad.sse")
		o := e.sdkStream(t, "responses", "stream", streamed(), true)
		var r responsesOut
		decode(t, o.Response, &r)
		if !o.OK || !slices.Equal(r.callIDs(), []string{"call_p1", "call_p3"}) || o.OutputText == nil ||
			!strings.Contains(*o.OutputText, "Checking the weather.") || !strings.Contains(*o.OutputText, `"get_wether": H1`) {
			t.Fatalf("%+v", o)
		}
		if n := len(r.Output); n != 4 || r.Output[3].Type != "message" { // the text, two calls, the note
			t.Errorf("output %+v", r.Output)
		}
		checkOffline(t, e.records(t, 3))
		next := continuing(r.ID)
		if o := e.sdk(t, "responses", "create", next); !o.OK {
			t.Fatalf("%+v", o)
		}
		if body := string(e.up.requests()[1].body); !strings.Contains(body, `"call_p2"`) {
			t.Errorf("the continuing request lacks the withheld call's output: %s", body)
		}
		// The only call rejected: the stream is an answer without calls.
		bad := e.sdkStream(t, "responses", "stream", streamed(), true)
		var b responsesOut
		decode(t, bad.Response, &b)
		if !bad.OK || len(b.callIDs()) != 0 || bad.OutputText == nil || !strings.Contains(*bad.OutputText, "H2") {
			t.Errorf("bad: %+v", bad)
		}
	})
}

// A Responses stream under retry: the repair request's stream follows
// in the client's, which accumulates one response: the first attempt's
// text and the calls that resolved, the repair's text and corrected
// call, usage summed; the upstream sees the repair request streaming.
func TestResponsesStreamRetry(t *testing.T) {
	e := start(t, "retry")
	e.up.queue(t, "responses/parallel.sse", "responses/repaired.sse")
	req := responsesRequest()
	req["stream"] = true
	o := e.sdkStream(t, "responses", "stream", req, true)
	var r responsesOut
	decode(t, o.Response, &r)
	if !o.OK || !slices.Equal(r.callIDs(), []string{"call_p1", "call_p3", "call_r1"}) || o.OutputText == nil ||
		*o.OutputText != "Checking the weather.Sorry, the tool is get_weather." || r.Usage.TotalTokens != 130+215 {
		t.Fatalf("%+v\n%s", o, o.Response)
	}
	got := e.up.requests()
	if len(got) != 2 || !bytes.Contains(got[1].body, []byte(`"stream":true`)) || !bytes.Contains(got[1].body, []byte(`"call_id":"call_p2"`)) {
		t.Fatalf("upstream requests %d: %s", len(got), got[len(got)-1].body)
	}
	checkRepairAudit(t, e.records(t, 4))

	// The stream itself, as a client without the SDK reads it: one
	// response.created, items numbered 0, 1, ... as they are added, every
	// event after the one before it.
	e.up.queue(t, "responses/parallel.sse", "responses/repaired.sse")
	_, body := postStream(t, e.url+"/openai/v1/responses", req)
	items, seq := 0, -1
	for _, ev := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		_, data, _ := strings.Cut(ev, "data: ")
		var x struct {
			Type        string `json:"type"`
			Seq         int    `json:"sequence_number"`
			OutputIndex *int   `json:"output_index"`
		}
		decode(t, []byte(data), &x)
		switch {
		case x.Seq <= seq:
			t.Errorf("%s: sequence_number %d after %d", x.Type, x.Seq, seq)
		case x.Type == "response.created" && seq != -1:
			t.Errorf("a second response.created")
		case x.Type == "response.output_item.added" && *x.OutputIndex != items:
			t.Errorf("item added at %d, want %d", *x.OutputIndex, items)
		case x.OutputIndex != nil && *x.OutputIndex >= items+1:
			t.Errorf("%s at %d of %d items", x.Type, *x.OutputIndex, items)
		}
		if x.Type == "response.output_item.added" {
			items++
		}
		seq = x.Seq
	}
	if items != 5 { // the text, two calls; the repair's text, its call
		t.Errorf("%d items added, want 5:\n%s", items, body)
	}
}
