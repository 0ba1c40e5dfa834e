package otlp

import (
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attribute names (the package documentation says which release and
// instrumentation each comes from).
const (
	attrOperationName   = "gen_ai.operation.name"
	attrToolName        = "gen_ai.tool.name"
	attrToolCallID      = "gen_ai.tool.call.id"
	attrToolCallArgs    = "gen_ai.tool.call.arguments"
	attrOutputMessages  = "gen_ai.output.messages"
	attrToolDefinitions = "gen_ai.tool.definitions"
	attrMCPMethod       = "mcp.method.name"
	attrMCPServerName   = "mcp.server.name"
	attrServerAddress   = "server.address"
	attrServerPort      = "server.port"
	opExecuteTool       = "execute_tool"
	oiOutputMessages    = "llm.output_messages."
	oiTools             = "llm.tools."
)

// Context attributes, first present wins: the item's own, then its
// ancestors' in the same trace (spans), then the resource's.
var (
	ctxSession  = []string{"gen_ai.conversation.id", "session.id", "mcp.session.id"}
	ctxAgent    = []string{"gen_ai.agent.id", "gen_ai.agent.name", "agent.name"}
	ctxModel    = []string{"gen_ai.request.model", "gen_ai.response.model", "llm.model_name"}
	ctxProvider = []string{"gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"}
)

// spanCtx is what a span says of the context of the calls below it.
type spanCtx struct {
	parent                          pcommon.SpanID
	session, agent, model, provider string
}

type spanKey struct {
	trace pcommon.TraceID
	span  pcommon.SpanID
}

func ctxOf(m pcommon.Map) spanCtx {
	return spanCtx{
		session:  firstStr(m, ctxSession),
		agent:    firstStr(m, ctxAgent),
		model:    firstStr(m, ctxModel),
		provider: firstStr(m, ctxProvider),
	}
}

// firstStr returns the first of keys that m holds as a non-empty string.
func firstStr(m pcommon.Map, keys []string) string {
	for _, k := range keys {
		if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr && v.Str() != "" {
			return v.Str()
		}
	}
	return ""
}

func str(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
		return v.Str()
	}
	return ""
}

// maxAncestors bounds the walk up a trace (a cycle of parent ids is
// hostile input too).
const maxAncestors = 64

func (d *decoder) traces(td ptrace.Traces) {
	// First pass: what each span says of the context, for its descendants.
	index := make(map[spanKey]*spanCtx)
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				if sp.Attributes().Len() > d.lim.MaxAttributes {
					continue
				}
				c := ctxOf(sp.Attributes())
				c.parent = sp.ParentSpanID()
				index[spanKey{sp.TraceID(), sp.SpanID()}] = &c
			}
		}
	}
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := ctxOf(rs.Resource().Attributes())
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				d.span(spans.At(k), index, res)
			}
		}
	}
}

// context fills the context of the calls from the span at start, then its
// ancestors, then the resource.
func context(index map[spanKey]*spanCtx, tr pcommon.TraceID, start pcommon.SpanID, res spanCtx) spanCtx {
	var out spanCtx
	set := func(c *spanCtx) {
		firstOf(&out.session, c.session)
		firstOf(&out.agent, c.agent)
		firstOf(&out.model, c.model)
		firstOf(&out.provider, c.provider)
	}
	id := start
	for n := 0; n < maxAncestors && !id.IsEmpty(); n++ {
		c, ok := index[spanKey{tr, id}]
		if !ok {
			break
		}
		set(c)
		id = c.parent
	}
	set(&res)
	return out
}

func firstOf(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}

func (d *decoder) span(sp ptrace.Span, index map[spanKey]*spanCtx, res spanCtx) {
	attrs := sp.Attributes()
	base := Call{TraceID: traceHex(sp.TraceID()), SpanID: spanHex(sp.SpanID()), Definitions: -1}
	if n := attrs.Len(); n > d.lim.MaxAttributes {
		// Too big to look into: it may have carried calls, so it is not
		// skipped silently.
		base.Malformed = "span " + strconv.Quote(sp.Name()) + " has " + strconv.Itoa(n) + " attributes, over the limit of " + strconv.Itoa(d.lim.MaxAttributes)
		base.EmittedAt = timeOf(sp.StartTimestamp(), sp.EndTimestamp())
		base.From = []Source{""}
		d.res.Calls = append(d.res.Calls, base)
		return
	}
	ctx := context(index, sp.TraceID(), sp.SpanID(), res)
	base.SessionID, base.AgentID, base.Model, base.Provider = ctx.session, ctx.agent, ctx.model, ctx.provider

	before := len(d.res.Calls) + len(d.res.Listings)
	op := str(attrs, attrOperationName)
	method := str(attrs, attrMCPMethod)
	returned := timeOf(sp.EndTimestamp(), sp.StartTimestamp()) // when the model's answer was complete
	started := timeOf(sp.StartTimestamp(), sp.EndTimestamp())

	// The tool definitions the model was given (or an MCP tools/list
	// result carrying them).
	defs := -1
	if v, ok := attrs.Get(attrToolDefinitions); ok {
		l := Listing{ObservedAt: started, From: FromToolDefinitions, TraceID: base.TraceID, SpanID: base.SpanID}
		if method == "tools/list" {
			l.From, l.Server = FromMCPList, mcpServer(attrs)
		}
		defs = d.definitions(l, v, &base)
	}
	if oi := d.openInferenceTools(attrs, base, started); defs < 0 {
		defs = oi
	}
	base.Definitions = defs
	d.openInferenceCalls(attrs, base, returned)
	if v, ok := attrs.Get(attrOutputMessages); ok {
		c := base
		c.EmittedAt = returned
		d.outputMessages(v, c, FromOutputMessages)
	}
	base.Definitions = -1 // an execute_tool span's call gets its definitions by merging

	isMCPCall := method == "tools/call" && sp.Kind() != ptrace.SpanKindServer
	isExec := op == opExecuteTool || (op == "" && method == "" && strings.HasPrefix(sp.Name(), opExecuteTool+" "))
	if (isExec && sp.Kind() != ptrace.SpanKindServer) || isMCPCall {
		c := base
		c.EmittedAt = started
		c.From = []Source{FromExecuteTool}
		c.Tool = str(attrs, attrToolName)
		if c.Tool == "" {
			if isMCPCall {
				c.Tool = strings.TrimSpace(strings.TrimPrefix(sp.Name(), "tools/call"))
			} else {
				c.Tool = strings.TrimSpace(strings.TrimPrefix(sp.Name(), opExecuteTool))
			}
		}
		if isMCPCall {
			c.From = []Source{FromMCP}
			c.Surface = "mcp"
			c.Server = mcpServer(attrs)
		}
		c.CallID = str(attrs, attrToolCallID)
		if v, ok := attrs.Get(attrToolCallArgs); ok {
			d.setArgs(&c, v, attrToolCallArgs)
		}
		if c.Tool == "" && c.Malformed == "" {
			c.Malformed = "tool call has no name (" + attrToolName + " and the span name are empty)"
		}
		d.res.Calls = append(d.res.Calls, c)
	}
	if len(d.res.Calls)+len(d.res.Listings) == before {
		d.res.Skipped++
	}
}

// mcpServer names an MCP span's server: mcp.server.name when an
// instrumentation sets it, else server.address[:server.port] (the GenAI
// conventions' MCP client span records the peer, not a name).
func mcpServer(attrs pcommon.Map) string {
	if s := str(attrs, attrMCPServerName); s != "" {
		return s
	}
	addr := str(attrs, attrServerAddress)
	if addr == "" {
		return ""
	}
	if v, ok := attrs.Get(attrServerPort); ok && v.Type() == pcommon.ValueTypeInt {
		return addr + ":" + strconv.FormatInt(v.Int(), 10)
	}
	return addr
}

// setArgs reads a recorded arguments value into c: a string is the text
// the model wrote, a structured value is rendered as JSON.
func (d *decoder) setArgs(c *Call, v pcommon.Value, name string) {
	raw, isText, reason := d.valueJSON(v, name)
	if reason != "" {
		c.Malformed = reason
		return
	}
	if !isText && string(raw) == "null" {
		return // recorded as absent
	}
	// Structured arguments are JSON by construction but for a repeated
	// key, which makes them raw text: not JSON by the contract's rule.
	c.Args, c.ArgsRecorded = d.argsText(raw), true
}

// valueJSON returns v as JSON text (a string value: its text, isText) or
// a reason when it is over the limits.
func (d *decoder) valueJSON(v pcommon.Value, name string) (raw []byte, isText bool, reason string) {
	if v.Type() == pcommon.ValueTypeStr {
		s := v.Str()
		if len(s) > d.lim.MaxValueBytes {
			return nil, true, name + ": " + strconv.Itoa(len(s)) + " bytes, over the limit of " + strconv.Itoa(d.lim.MaxValueBytes)
		}
		return []byte(s), true, ""
	}
	b, err := appendJSON(nil, v, d.lim.MaxDepth, d.lim.MaxValueBytes)
	if err != nil {
		return nil, false, name + ": " + err.Error() + " (" + strconv.Itoa(d.lim.MaxDepth) + " levels, " + strconv.Itoa(d.lim.MaxValueBytes) + " bytes)"
	}
	return b, false, ""
}
