package otlp

import (
	"strconv"

	"go.opentelemetry.io/collector/pdata/plog"
)

// Event names of log records that carry a model's tool calls.
const (
	eventChoice           = "gen_ai.choice"
	eventInferenceDetails = "gen_ai.client.inference.operation.details"
	attrEventName         = "event.name" // the event's name before LogRecord.event_name (OTLP 1.5)
)

func (d *decoder) logs(ld plog.Logs) {
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		res := ctxOf(rl.Resource().Attributes())
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			recs := sls.At(j).LogRecords()
			for k := 0; k < recs.Len(); k++ {
				d.record(recs.At(k), res)
			}
		}
	}
}

func (d *decoder) record(lr plog.LogRecord, res spanCtx) {
	attrs := lr.Attributes()
	c := Call{
		TraceID:     traceHex(lr.TraceID()),
		SpanID:      spanHex(lr.SpanID()),
		EmittedAt:   timeOf(lr.Timestamp(), lr.ObservedTimestamp()),
		Definitions: -1,
	}
	if n := attrs.Len(); n > d.lim.MaxAttributes {
		d.bad(c, "", "log record has "+strconv.Itoa(n)+" attributes, over the limit of "+strconv.Itoa(d.lim.MaxAttributes))
		return
	}
	name := lr.EventName()
	if name == "" {
		name = str(attrs, attrEventName)
	}
	own := ctxOf(attrs)
	firstOf(&own.session, res.session)
	firstOf(&own.agent, res.agent)
	firstOf(&own.model, res.model)
	firstOf(&own.provider, res.provider)
	c.SessionID, c.AgentID, c.Model, c.Provider = own.session, own.agent, own.model, own.provider
	before := len(d.res.Calls)
	switch name {
	case eventChoice:
		d.choice(lr.Body(), c)
		return // choice counts its own skip
	case eventInferenceDetails:
		if v, ok := attrs.Get(attrToolDefinitions); ok {
			l := Listing{ObservedAt: c.EmittedAt, From: FromToolDefinitions, TraceID: c.TraceID, SpanID: c.SpanID}
			c.Definitions = d.definitions(l, v, &c)
		}
		if v, ok := attrs.Get(attrOutputMessages); ok {
			d.outputMessages(v, c, FromInferenceDetails)
		}
	}
	if len(d.res.Calls) == before {
		d.res.Skipped++
	}
}
