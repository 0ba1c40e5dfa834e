package schema

import (
	"strconv"
	"time"
)

// TimeLayout is how encoded events write their times (AppendTime): RFC
// 3339, UTC, milliseconds, as in the contract's examples.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// CallArgs is a call's arguments as a producer has them, as text: the
// arguments object's JSON, or, when the model's text was not JSON, that
// text (arguments_raw), or neither (the call has no arguments; decoding
// it gives MALFORMED). A decoded Call borrows its Arguments from the
// decoder; a producer has text, so the encoder takes that instead.
type CallArgs struct {
	JSON []byte  // compact JSON of the arguments object, written as it is; nil: absent
	Raw  *string // arguments_raw, when JSON is nil; nil: absent
	// Unrecorded, with neither JSON nor Raw, writes "arguments_recorded":
	// false: the producer did not record them (Call.ArgsUnrecorded).
	Unrecorded bool
}

// AppendCall appends c as a call event: one JSON object, no newline, its
// members in the contract's order. The context members (registry,
// agent_id, session_id, model, provider, surface, tool, server) are
// always written, empty when unknown; seen_digest when set, visible when
// c has a frontier (HasVisible or a non-empty Visible). c.Arguments is
// not read: args are. args.JSON must be valid JSON.
func AppendCall(b []byte, c *Call, args CallArgs) []byte {
	b = append(b, `{"type":"call","event_id":`...)
	b = AppendString(b, c.EventID)
	b = append(b, `,"emitted_at":`...)
	b = appendTime(b, c.EmittedAt)
	b = appendMember(b, "registry", c.Registry)
	b = appendMember(b, "agent_id", c.AgentID)
	b = appendMember(b, "session_id", c.SessionID)
	b = appendMember(b, "model", c.Model)
	b = appendMember(b, "provider", c.Provider)
	b = appendMember(b, "surface", c.Surface)
	b = appendMember(b, "tool", c.Tool)
	b = appendMember(b, "server", c.Server)
	switch {
	case args.JSON != nil:
		b = append(b, `,"arguments":`...)
		b = append(b, args.JSON...)
	case args.Raw != nil:
		b = appendMember(b, "arguments_raw", *args.Raw)
	case args.Unrecorded:
		b = append(b, `,"arguments_recorded":false`...)
	}
	if c.SeenDigest != "" {
		b = appendMember(b, "seen_digest", c.SeenDigest)
	}
	if c.TraceID != "" {
		b = appendMember(b, "trace_id", c.TraceID)
	}
	if c.SpanID != "" {
		b = appendMember(b, "span_id", c.SpanID)
	}
	if c.HasVisible || len(c.Visible) > 0 {
		b = append(b, `,"visible":[`...)
		for i, v := range c.Visible {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// AppendListing appends l as a listing event: one JSON object, no newline,
// its members in the contract's order, trust and tools always written.
// The tools are given as the servers sent them, each a JSON object
// (name, inputSchema and whatever else it holds: title, annotations,
// outputSchema), written as they are; l.Tools, which keeps only what the
// resolver reads, is not. Each tool must be valid JSON.
func AppendListing(b []byte, l *Listing, tools [][]byte) []byte {
	b = append(b, `{"type":"listing","event_id":`...)
	b = AppendString(b, l.EventID)
	b = append(b, `,"observed_at":`...)
	b = appendTime(b, l.ObservedAt)
	b = appendMember(b, "registry", l.Registry)
	b = appendMember(b, "server", l.Server)
	b = append(b, `,"trust":`...)
	b = strconv.AppendInt(b, int64(l.Trust), 10)
	b = appendMember(b, "op", string(l.Op))
	b = append(b, `,"tools":[`...)
	for i, t := range tools {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, t...)
	}
	return append(b, "]}"...)
}

func appendMember(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendString(b, v)
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = AppendTime(b, t)
	return append(b, '"')
}
