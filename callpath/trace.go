package callpath

import (
	"context"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/schema"
)

// The spans of the call path (Step.Tracer). One span per decision, a
// child of the caller's span when the request carried W3C trace context
// (ContinueHTTP, ContinueMeta), named "toolaudit.check_tool_call" and the
// tool's name as emitted, from the decision to the audit trail's
// acknowledgement. Attributes: the GenAI conventions' own where they mean
// what they say (gen_ai.tool.name: the name emitted;
// gen_ai.conversation.id: the session; gen_ai.agent.id; for the gateway
// the MCP conventions' mcp.method.name, tools/call, and mcp.session.id),
// the rest under
// the toolaudit. prefix (AttrVerdict and the others below). A rejection,
// and a decision the audit trail did not take (the call refused), set the
// span's status to Error, so a trace view shows the refusal where it
// happened.
//
// The GenAI conventions' guardrail span is a proposal, not merged
// (semantic-conventions-genai#427, "run guardrail span": gen_ai.guardrail.*,
// gen_ai.security.verdict.*, gen_ai.security.action.type); its names are
// not used here. The mapping, should it merge: this span is its
// in-process guardrail run over a tool call, AttrVerdict its verdict,
// AttrAction the caller's enforcement action, AttrClass and AttrReason the
// rule that decided. docs/commands.md, "Tracing the call path", says the
// same.
const (
	SpanName        = "toolaudit.check_tool_call"
	AttrVerdict     = "toolaudit.decision.verdict" // allow | reject
	AttrClass       = "toolaudit.decision.class"   // OK, H1 ... MALFORMED
	AttrReason      = "toolaudit.decision.reason"
	AttrPath        = "toolaudit.decision.path" // JSON pointer into the arguments
	AttrAction      = "toolaudit.decision.action"
	AttrSource      = "toolaudit.decision.source" // api | gateway | model-proxy
	AttrEventID     = "toolaudit.event_id"
	AttrRegistry    = "toolaudit.registry"
	AttrVersion     = "toolaudit.registry.version"
	AttrServer      = "toolaudit.resolved.server"
	AttrTool        = "toolaudit.resolved.tool"
	AttrPolicy      = "toolaudit.policy.version"
	AttrNotRecorded = "toolaudit.audit.unrecorded" // true: the call was refused for want of an audit record
)

var propagator = propagation.TraceContext{}

// ContinueHTTP returns ctx carrying the remote span of the W3C trace
// context in h (traceparent, tracestate), when it has a valid one.
func ContinueHTTP(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// ContinueMeta returns ctx carrying the remote span of the trace context
// an MCP request's _meta holds (the keys traceparent and tracestate, as
// the MCP semantic conventions carry it), when it has a valid one.
func ContinueMeta(ctx context.Context, meta map[string]any) context.Context {
	if meta == nil {
		return ctx
	}
	return propagator.Extract(ctx, metaCarrier(meta))
}

type metaCarrier map[string]any

func (m metaCarrier) Get(k string) string { s, _ := m[k].(string); return s }
func (m metaCarrier) Set(k, v string)     { m[k] = v }
func (m metaCarrier) Keys() []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// decoders read the call's members a span names once more from the
// record's event, with the contract's one decoder, only when tracing.
var decoders = sync.Pool{New: func() any { return new(schema.CallDecoder) }}

// spans emits the spans of recs (err: the audit trail's refusal).
func (s *Step) spans(ctx context.Context, recs []*audit.Record, err error) {
	dec := decoders.Get().(*schema.CallDecoder)
	defer decoders.Put(dec)
	var c schema.Call
	for _, rec := range recs {
		c = schema.Call{}
		_ = dec.Decode(rec.Call, &c) // a MALFORMED call has what could be read
		d := &rec.Decision
		attrs := []attribute.KeyValue{
			attribute.String(AttrVerdict, string(d.Verdict)),
			attribute.String(AttrClass, string(d.Class)),
			attribute.String(AttrSource, string(rec.Source)),
			attribute.String(AttrEventID, d.EventID),
			attribute.String(AttrPolicy, rec.PolicyVersion),
		}
		add := func(k, v string) {
			if v != "" {
				attrs = append(attrs, attribute.String(k, v))
			}
		}
		add("gen_ai.tool.name", c.Tool)
		add("gen_ai.conversation.id", c.SessionID)
		add("gen_ai.agent.id", c.AgentID)
		add(AttrReason, d.Reason)
		add(AttrPath, d.Path)
		add(AttrAction, string(rec.Action))
		add(AttrRegistry, c.Registry)
		add(AttrVersion, d.RegistryVersion)
		add(AttrServer, d.ResolvedServer)
		add(AttrTool, d.ResolvedTool)
		if rec.Source == schema.SourceGateway {
			// The MCP conventions' method of the request decided.
			attrs = append(attrs, attribute.String("mcp.method.name", "tools/call"))
			add("mcp.session.id", c.SessionID)
		}
		name := SpanName
		if c.Tool != "" {
			name += " " + c.Tool
		}
		_, sp := s.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithTimestamp(rec.DecidedAt), trace.WithAttributes(attrs...))
		switch {
		case err != nil:
			sp.SetAttributes(attribute.Bool(AttrNotRecorded, true))
			sp.SetStatus(codes.Error, "refused: the decision could not be recorded")
		case d.Verdict == schema.Reject:
			sp.SetStatus(codes.Error, string(d.Class)+": "+d.Reason)
		}
		sp.End()
	}
}
