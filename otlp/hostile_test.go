package otlp

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

func oneSpan(f func(sp ptrace.Span)) ptrace.Traces {
	td := ptrace.NewTraces()
	sp := addSpan(td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), pcommon.TraceID{15: 1}, 1, 0, "execute_tool x", 0)
	sp.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	f(sp)
	return td
}

func marshal(t testing.TB, td ptrace.Traces, enc Encoding) []byte {
	t.Helper()
	var b []byte
	var err error
	if enc == JSON {
		b, err = (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	} else {
		b, err = (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nest puts a map nested n levels deep under key of m.
func nest(m pcommon.Map, key string, n int) {
	for i := 0; i < n; i++ {
		m = m.PutEmptyMap(key)
	}
	m.PutStr("leaf", "x")
}

// TestHostileBounded: a payload over the limits is refused whole, before
// or after unmarshalling, and one hostile span within a payload is a call
// that says why while the span next to it is still read.
func TestHostileBounded(t *testing.T) {
	lim := Limits{MaxPayload: 1 << 20, MaxAttributes: 64, MaxValueBytes: 4096, MaxDepth: 16, MaxItems: 100}
	for _, enc := range []Encoding{JSON, Proto} {
		name := map[Encoding]string{JSON: "json", Proto: "proto"}[enc]
		t.Run(name, func(t *testing.T) {
			big := marshal(t, oneSpan(func(sp ptrace.Span) {
				sp.Attributes().PutStr("pad", strings.Repeat("a", 2<<20))
			}), enc)
			if _, err := Decode(big, Traces, enc, lim); !errors.Is(err, ErrTooLarge) {
				t.Errorf("2 MiB payload: %v, want ErrTooLarge", err)
			}

			many := ptrace.NewTraces()
			spans := many.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			for i := 0; i < 101; i++ {
				spans.AppendEmpty().SetName("s")
			}
			if _, err := Decode(marshal(t, many, enc), Traces, enc, lim); !errors.Is(err, ErrTooMany) {
				t.Errorf("101 spans: %v, want ErrTooMany", err)
			}

			// Within a payload: each hostile span beside a good one.
			td := ptrace.NewTraces()
			ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
			add := func(id byte, f func(m pcommon.Map)) {
				// a parent cycle with the next span
				sp := addSpan(ss, pcommon.TraceID{15: 1}, id, id+1, "execute_tool t"+strconv.Itoa(int(id)), time.Duration(id)*time.Second)
				sp.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
				f(sp.Attributes())
			}
			add(1, func(m pcommon.Map) {
				for i := 0; i < 1000; i++ {
					m.PutStr("k"+strconv.Itoa(i), "v")
				}
			})
			add(2, func(m pcommon.Map) { nest(m, "gen_ai.tool.call.arguments", 18) })
			add(3, func(m pcommon.Map) { m.PutStr("gen_ai.tool.call.arguments", `{"a":"`+strings.Repeat("b", 8000)+`"}`) })
			add(4, func(m pcommon.Map) {
				m.PutStr("gen_ai.output.messages", strings.Repeat("[", 200)+strings.Repeat("]", 200))
			})
			add(5, func(m pcommon.Map) { m.PutStr("gen_ai.tool.call.arguments", `{"ok":true}`) })
			ss.At(4).SetParentSpanID(sid(4)) // and the cycle closes
			r, err := Decode(marshal(t, td, enc), Traces, enc, lim)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{
				"span \"execute_tool t1\" has 1001 attributes, over the limit of 64",
				"gen_ai.tool.call.arguments: nested deeper than the limit (16 levels, 4096 bytes)",
				"gen_ai.tool.call.arguments: 8008 bytes, over the limit of 4096",
				"gen_ai.output.messages is not JSON: ",
				"", // the call on t4 itself (execute_tool t4) is read
				"", // t5
			}
			if len(r.Calls) != len(want) {
				t.Fatalf("%d calls, want %d:\n%s", len(r.Calls), len(want), strings.Join(summary(r), "\n"))
			}
			for i, w := range want {
				got := r.Calls[i].Malformed
				if (w == "") != (got == "") || !strings.HasPrefix(got, w) {
					t.Errorf("call %d: malformed %q, want %q", i, got, w)
				}
			}
			if last := r.Calls[5]; last.Tool != "t5" || string(last.Args.JSON) != `{"ok":true}` {
				t.Errorf("the good span: %+v", last)
			}
		})
	}

	// JSON nested beyond what any attribute may need is refused before
	// pdata reads it (its reader follows the input's nesting).
	deep := []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"attributes":[{"key":"a","value":` +
		strings.Repeat(`{"arrayValue":{"values":[`, 5000) + strings.Repeat(`]}}`, 5000) + `}]}]}]}]}`)
	if _, err := Decode(deep, Traces, JSON, Limits{}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("deep JSON: %v, want ErrTooDeep", err)
	}
	// Protobuf: pdata stops at its recursion limit (100).
	pd := marshal(t, oneSpan(func(sp ptrace.Span) { nest(sp.Attributes(), "a", 200) }), Proto)
	if _, err := Decode(pd, Traces, Proto, Limits{}); !errors.Is(err, ErrUnmarshal) {
		t.Errorf("deep protobuf: %v, want ErrUnmarshal", err)
	}
	// Garbage of either encoding is an error, never a panic.
	for _, g := range [][]byte{[]byte("{"), []byte("\x0a\xff\xff\xff\xff\x0f"), bytes.Repeat([]byte{0x0a}, 100)} {
		for _, enc := range []Encoding{JSON, Proto} {
			if _, err := Decode(g, Traces, enc, Limits{}); err == nil {
				t.Errorf("%q as %d: no error", g, enc)
			}
		}
	}
}

// TestMalformedHasNoArguments: a call that cannot be checked carries no
// arguments, so that its event is MALFORMED wherever it is resolved, even
// when what it lacks is not the arguments (here: the tool's name).
func TestMalformedHasNoArguments(t *testing.T) {
	td := oneSpan(func(sp ptrace.Span) {
		sp.Attributes().PutStr("gen_ai.operation.name", "chat")
		sp.Attributes().PutStr("gen_ai.output.messages", `[{"role":"assistant","parts":[{"type":"tool_call","id":"c1","arguments":{"a":1}}]}]`)
	})
	r, err := Decode(marshal(t, td, Proto), Traces, Proto, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Calls) != 1 {
		t.Fatalf("%d calls", len(r.Calls))
	}
	if c := r.Calls[0]; c.Malformed != "tool_call part has no name" || c.ArgsRecorded || c.Args.JSON != nil || c.Args.Raw != nil {
		t.Errorf("got %+v", c)
	}
}
