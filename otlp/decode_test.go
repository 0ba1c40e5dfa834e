package otlp

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/schema"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// summary is one line per call or listing, what the table tests compare.
func summary(r *Result) []string {
	var out []string
	for _, c := range r.Calls {
		args := "-"
		switch {
		case c.Args.JSON != nil:
			args = string(c.Args.JSON)
		case c.Args.Raw != nil:
			args = "raw:" + *c.Args.Raw
		}
		from := make([]string, len(c.From))
		for i, f := range c.From {
			from[i] = string(f)
		}
		line := fmt.Sprintf("call %s tool=%s id=%s at=%s session=%s agent=%s model=%s provider=%s args=%s from=%s defs=%d",
			c.TraceID[len(c.TraceID)-4:]+"/"+c.SpanID[len(c.SpanID)-2:], c.Tool, c.CallID, c.EmittedAt.Format("15:04:05.000"),
			c.SessionID, c.AgentID, c.Model, c.Provider, args, strings.Join(from, "+"), c.Definitions)
		if c.Server != "" || c.Surface != "" {
			line += " server=" + c.Server + " surface=" + c.Surface
		}
		if c.ArgsRecorded != (c.Args.JSON != nil || c.Args.Raw != nil) {
			line += " RECORDED-MISMATCH"
		}
		if c.Malformed != "" {
			line += " malformed=" + c.Malformed
		}
		out = append(out, line)
	}
	for _, l := range r.Listings {
		line := fmt.Sprintf("listing at=%s server=%s from=%s tools=%s", l.ObservedAt.Format("15:04:05.000"), l.Server, l.From, bytes.Join(l.Tools, []byte(" ")))
		if l.Dropped > 0 {
			line += fmt.Sprintf(" dropped=%d (%s)", l.Dropped, l.Problem)
		}
		out = append(out, line)
	}
	return append(out, "skipped "+strconv.Itoa(r.Skipped))
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// toProto re-encodes an OTLP/JSON fixture as protobuf with pdata: the
// Collector's otlp_proto encoding of the same batch.
func toProto(t testing.TB, sig Signal, b []byte) []byte {
	t.Helper()
	var out []byte
	var err error
	if sig == Traces {
		td, uerr := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		if uerr != nil {
			t.Fatal(uerr)
		}
		out, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	} else {
		ld, uerr := (&plog.JSONUnmarshaler{}).UnmarshalLogs(b)
		if uerr != nil {
			t.Fatal(uerr)
		}
		out, err = (&plog.ProtoMarshaler{}).MarshalLogs(ld)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDecodeInstrumentations: each instrumentation's shape, read from
// OTLP/JSON and from the same batch as OTLP protobuf, gives the same calls
// and listings.
func TestDecodeInstrumentations(t *testing.T) {
	tests := []struct {
		file string
		sig  Signal
		want []string
	}{
		{
			// The model's call and its execute_tool span are one call, with
			// the model's arguments (the SDK strips the undeclared "units"
			// before it records execute_tool), timed when the chat span
			// ended, in the context of its ancestor invoke_agent span and
			// resolved against the definitions of its chat span. A name
			// the SDK rejects has no execute_tool span, and is still a call.
			file: "vercel.traces.json", sig: Traces,
			want: []string{
				`call c60c/02 tool=get_weather id=call_w1 at=09:00:00.400 session=conv-v1 agent=weather model=gpt-4o provider=openai args={"city":"London","units":"metric"} from=gen_ai.output.messages+execute_tool defs=0`,
				`call c60c/02 tool=get_wether id=call_x1 at=09:00:00.400 session=conv-v1 agent=weather model=gpt-4o provider=openai args={"city":"Paris"} from=gen_ai.output.messages defs=0`,
				`listing at=09:00:00.010 server= from=gen_ai.tool.definitions tools={"name":"get_weather","description":"Weather of a city","inputSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}} {"name":"book","inputSchema":{"type":"object","properties":{"hotel":{"type":"string"}}}}`,
				"skipped 2", // invoke_agent; the second chat span (no tool call, the same tool set)
			},
		},
		{
			// gen_ai.choice events: arguments a JSON string, absent without
			// content capture, text that is not JSON kept raw; the event's
			// name in event_name or, older, the event.name attribute.
			file: "openai-chat.logs.json", sig: Logs,
			want: []string{
				`call c60c/10 tool=get_weather id=call_c1 at=09:00:00.600 session= agent=a-oai model= provider=openai args={"city":"Oslo"} from=gen_ai.choice defs=-1`,
				`call c60c/10 tool=book id=call_c2 at=09:00:00.600 session= agent=a-oai model= provider=openai args=- from=gen_ai.choice defs=-1`,
				`call c60c/11 tool=lookup id=call_c3 at=09:00:00.700 session= agent=a-oai model= provider=openai args=raw:{not json from=gen_ai.choice defs=-1`,
				"skipped 1", // gen_ai.user.message
			},
		},
		{
			// Responses: the inference-details event's structured output
			// messages; structured arguments rendered as JSON.
			file: "openai-responses.logs.json", sig: Logs,
			want: []string{
				`call c60c/20 tool=book id=fc_1 at=09:00:00.800 session=conv-r1 agent= model=gpt-4.1-2025-04-14 provider=openai args={"hotel":"Ritz","nights":3,"rate":199.5,"vip":true} from=gen_ai.client.inference.operation.details defs=-1`,
				"skipped 0",
			},
		},
		{
			// OpenInference's flattened attributes, in index order whatever
			// the attributes' order; a json_schema that is the bare
			// parameters schema takes tool.name.
			file: "openinference.traces.json", sig: Traces,
			want: []string{
				`call c60c/30 tool=get_weather id=call_o1 at=09:00:00.300 session=sess-oi agent= model=gpt-4o-mini provider=openai args={"city":"Rome"} from=llm.output_messages defs=0`,
				`call c60c/30 tool=search id=call_o2 at=09:00:00.300 session=sess-oi agent= model=gpt-4o-mini provider=openai args={"q":"hotels"} from=llm.output_messages defs=0`,
				`listing at=09:00:00.000 server= from=llm.tools tools={"name":"get_weather","description":"Weather","inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}} {"name":"search","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}}}`,
				"skipped 1", // the HTTP span
			},
		},
		{
			// MCP client spans: tools/call with its server, tools/list with
			// the server's tools; the server side of the same call is not a
			// second call; an execute_tool span without a name says why.
			file: "mcp.traces.json", sig: Traces,
			want: []string{
				`call c60c/41 tool=create_issue id= at=09:00:00.050 session=mcp-s1 agent=a-mcp model= provider= args=- from=mcp.tools/call defs=-1 server=github.example:443 surface=mcp`,
				`call c60c/43 tool= id= at=09:00:00.060 session= agent=a-mcp model= provider= args=- from=execute_tool defs=-1 malformed=tool call has no name (gen_ai.tool.name and the span name are empty)`,
				`listing at=09:00:00.000 server=github.example:443 from=mcp.tools/list tools={"name":"create_issue","description":"Open an issue","inputSchema":{"type":"object","properties":{"title":{"type":"string"}}}} dropped=1 (definition 1: no name)`,
				"skipped 1", // the server span
			},
		},
	}
	for _, tt := range tests {
		b := readFixture(t, tt.file)
		for _, enc := range []Encoding{JSON, Proto} {
			payload := b
			if enc == Proto {
				payload = toProto(t, tt.sig, b)
			}
			t.Run(fmt.Sprintf("%s/%d", tt.file, enc), func(t *testing.T) {
				r, err := Decode(payload, tt.sig, enc, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				got := summary(r)
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
				}
				checkEncodable(t, r)
			})
		}
	}
}

// checkEncodable: every call and listing encodes as a contract event that
// package schema reads back (a listing whole; a call, unless it is
// Malformed or its arguments are not an object, with its arguments).
func checkEncodable(t testing.TB, r *Result) {
	t.Helper()
	for i, c := range r.Calls {
		if len(c.From) == 0 {
			t.Errorf("call %d: no source", i)
		}
		if c.Definitions >= len(r.Listings) {
			t.Errorf("call %d: definitions %d of %d listings", i, c.Definitions, len(r.Listings))
		}
		if c.Malformed != "" || !c.ArgsRecorded || c.Args.JSON == nil || c.Args.JSON[0] != '{' || c.EmittedAt.IsZero() {
			continue
		}
		sc := schema.Call{EventID: "e", EmittedAt: c.EmittedAt, Tool: c.Tool, Server: c.Server}
		var d schema.CallDecoder
		var back schema.Call
		ev := schema.AppendCall(nil, &sc, c.Args)
		if err := d.Decode(ev, &back); err != nil && schema.InTimeRange(c.EmittedAt) {
			t.Errorf("call %d: %s does not decode: %v", i, ev, err)
		}
	}
	for i, l := range r.Listings {
		if l.ObservedAt.IsZero() || !schema.InTimeRange(l.ObservedAt) {
			continue
		}
		sl := schema.Listing{EventID: "l", ObservedAt: l.ObservedAt, Server: l.Server, Op: schema.OpSnapshot}
		if _, err := schema.DecodeListing(schema.AppendListing(nil, &sl, l.Tools)); err != nil {
			t.Errorf("listing %d does not decode: %v", i, err)
		}
	}
}

var t0 = time.Date(2025, 12, 1, 9, 0, 0, 0, time.UTC)

func sid(n byte) pcommon.SpanID { return pcommon.SpanID{7: n} }

func ts(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(t0.Add(d)) }

// addSpan appends a span of trace tr, id and parent (0: none) set.
func addSpan(spans ptrace.SpanSlice, tr pcommon.TraceID, id, parent byte, name string, start time.Duration) ptrace.Span {
	sp := spans.AppendEmpty()
	sp.SetTraceID(tr)
	sp.SetSpanID(sid(id))
	if parent != 0 {
		sp.SetParentSpanID(sid(parent))
	}
	sp.SetName(name)
	sp.SetStartTimestamp(ts(start))
	return sp
}

// TestDecodeProtoBuilt: a batch built with pdata and sent as protobuf, as
// the OTel SDKs' OTLP exporters send it: structured execute_tool arguments,
// context from an ancestor in another resource of the batch, a chat span
// exported after the execute_tool span of its call.
func TestDecodeProtoBuilt(t *testing.T) {
	td := ptrace.NewTraces()
	tr := pcommon.TraceID{15: 9}
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("gen_ai.agent.id", "a-res")
	spans := rs.ScopeSpans().AppendEmpty().Spans()

	exec := addSpan(spans, tr, 3, 1, "execute_tool book", 2*time.Second)
	exec.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	exec.Attributes().PutStr("gen_ai.tool.name", "book")
	exec.Attributes().PutStr("gen_ai.tool.call.id", "call_b")
	args := exec.Attributes().PutEmptyMap("gen_ai.tool.call.arguments")
	args.PutStr("hotel", "Ritz")
	args.PutInt("nights", 3)
	args.PutEmptySlice("tags").AppendEmpty().SetStr("sea")

	solo := addSpan(spans, tr, 4, 1, "execute_tool lookup", 3*time.Second)
	solo.Attributes().PutStr("gen_ai.tool.call.id", "call_l")
	solo.Attributes().PutDouble("gen_ai.tool.call.arguments", 1.5) // not an object: the resolver says so

	rs2 := td.ResourceSpans().AppendEmpty()
	spans2 := rs2.ScopeSpans().AppendEmpty().Spans()
	root := addSpan(spans2, tr, 1, 0, "invoke_agent", 0)
	root.Attributes().PutStr("gen_ai.conversation.id", "conv-p")
	chat := addSpan(spans2, tr, 2, 1, "chat", 0)
	chat.SetEndTimestamp(ts(time.Second))
	chat.Attributes().PutStr("gen_ai.request.model", "claude-x")
	msgs := chat.Attributes().PutEmptySlice("gen_ai.output.messages").AppendEmpty().SetEmptyMap()
	part := msgs.PutEmptySlice("parts").AppendEmpty().SetEmptyMap()
	part.PutStr("type", "tool_call")
	part.PutStr("id", "call_b")
	part.PutStr("name", "book")
	// no arguments: recorded on the execute_tool span only

	payload, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Decode(payload, Traces, Proto, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	// Calls in the payload's order; the merged call is where the model's
	// record is, with its span id and time, the execute_tool span's
	// arguments (the model's were not recorded) and agent.
	want := []string{
		`call 0009/04 tool=lookup id=call_l at=09:00:03.000 session=conv-p agent=a-res model= provider= args=1.5 from=execute_tool defs=-1`,
		`call 0009/02 tool=book id=call_b at=09:00:01.000 session=conv-p agent=a-res model=claude-x provider= args={"hotel":"Ritz","nights":3,"tags":["sea"]} from=gen_ai.output.messages+execute_tool defs=-1`,
		"skipped 1",
	}
	if got := summary(r); !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDefinitionsRegistry(t *testing.T) {
	d := "150ec0e94e5daecf0123456789abcdef"
	if got := DefinitionsRegistry("fleet-a", d); got != "fleet-a:tools-150ec0e94e5daecf" {
		t.Errorf("%q", got)
	}
	if got := DefinitionsRegistry("", d); got != "tools-150ec0e94e5daecf" {
		t.Errorf("%q", got)
	}
}
