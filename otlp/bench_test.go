package otlp

import (
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/toolaudit/toolaudit/schema"
)

// benchBatch is one Collector batch of agent runs shaped as the Vercel AI
// SDK records them: per run an invoke_agent span, a chat span with the
// tool definitions and two tool calls in its output messages, the two
// execute_tool spans, and an HTTP span that is no call (5 spans, 2 calls).
func benchBatch(runs int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	spans := rs.ScopeSpans().AppendEmpty().Spans()
	defs := `[{"type":"function","name":"get_weather","description":"Weather of a city","inputSchema":{"type":"object","properties":{"city":{"type":"string"},"units":{"enum":["metric","imperial"]}},"required":["city"]}},` +
		`{"type":"function","name":"book","inputSchema":{"type":"object","properties":{"hotel":{"type":"string"},"nights":{"type":"integer"}}}}]`
	for r := 0; r < runs; r++ {
		tr := pcommon.TraceID{0: byte(r), 1: byte(r >> 8), 15: 1}
		root := addSpan(spans, tr, 1, 0, "invoke_agent", 0)
		root.Attributes().PutStr("gen_ai.conversation.id", "conv-"+strconv.Itoa(r))
		root.Attributes().PutStr("gen_ai.agent.name", "weather")
		chat := addSpan(spans, tr, 2, 1, "chat gpt-4o", 10*time.Millisecond)
		chat.SetEndTimestamp(ts(400 * time.Millisecond))
		a := chat.Attributes()
		a.PutStr("gen_ai.operation.name", "chat")
		a.PutStr("gen_ai.request.model", "gpt-4o")
		a.PutStr("gen_ai.provider.name", "openai")
		a.PutStr("gen_ai.tool.definitions", defs)
		a.PutStr("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"tool_call","id":"call_a`+strconv.Itoa(r)+
			`","name":"get_weather","arguments":{"city":"London","units":"metric"}},{"type":"tool_call","id":"call_b`+strconv.Itoa(r)+
			`","name":"book","arguments":{"hotel":"Ritz","nights":3}}],"finish_reason":"tool_call"}]`)
		for i, c := range []struct{ id, name, args string }{
			{"call_a", "get_weather", `{"city":"London","units":"metric"}`}, {"call_b", "book", `{"hotel":"Ritz","nights":3}`},
		} {
			ex := addSpan(spans, tr, byte(3+i), 1, "execute_tool "+c.name, 410*time.Millisecond)
			ex.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
			ex.Attributes().PutStr("gen_ai.tool.name", c.name)
			ex.Attributes().PutStr("gen_ai.tool.call.id", c.id+strconv.Itoa(r))
			ex.Attributes().PutStr("gen_ai.tool.call.arguments", c.args)
		}
		h := addSpan(spans, tr, 5, 2, "POST", 20*time.Millisecond)
		h.Attributes().PutStr("http.request.method", "POST")
	}
	return td
}

const benchRuns = 200 // 1,000 spans, 400 calls a batch

// BenchmarkDecode: one batch decoded from each encoding; spans/s and ns
// per call are the figures of docs/performance.md.
func BenchmarkDecode(b *testing.B) {
	td := benchBatch(benchRuns)
	for _, enc := range []Encoding{Proto, JSON} {
		payload := marshal(b, td, enc)
		name := map[Encoding]string{Proto: "proto", JSON: "json"}[enc]
		b.Run(name, func(b *testing.B) {
			r, err := Decode(payload, Traces, enc, Limits{})
			if err != nil || len(r.Calls) != 2*benchRuns {
				b.Fatalf("%v, %d calls", err, len(r.Calls))
			}
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(payload, Traces, enc, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(td.SpanCount())/(per/1e9), "spans/s")
			b.ReportMetric(per/float64(2*benchRuns), "ns/call")
		})
	}
	// The baseline: the same calls as the contract's own call events, as
	// schema decodes them from the calls topic.
	b.Run("contract-events", func(b *testing.B) {
		r, err := Decode(marshal(b, td, Proto), Traces, Proto, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		events := make([][]byte, len(r.Calls))
		n := 0
		for i, c := range r.Calls {
			sc := schema.Call{EventID: c.CallID + "~0123456789abcdef", EmittedAt: c.EmittedAt, Registry: "fleet-a:tools-0123456789abcdef",
				AgentID: c.AgentID, SessionID: c.SessionID, Model: c.Model, Provider: c.Provider, Surface: "raw_json", Tool: c.Tool}
			events[i] = schema.AppendCall(nil, &sc, c.Args)
			n += len(events[i])
		}
		var d schema.CallDecoder
		var call schema.Call
		b.SetBytes(int64(n))
		b.ReportAllocs()
		for b.Loop() {
			for _, ev := range events {
				if err := d.Decode(ev, &call); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(events)), "ns/call")
	})
}
