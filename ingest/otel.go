package ingest

import (
	"encoding/json"
	"fmt"

	"github.com/toolaudit/toolaudit/otlp"
)

var otelFallback = Meta{Surface: "raw_json"}

// convertOTel converts one OTLP/JSON export (traces or logs) with package
// otlp, the decoder of the stream too: its calls and listings become
// events. A listing of the tool definitions a model was given goes to a
// registry of its own (otlp.DefinitionsRegistry), and the calls of that model
// answer go to the same registry, so that they resolve against the tools
// the model had; an MCP tools/list listing, and calls without recorded
// definitions, go to the configured registry.
func convertOTel(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	var sig otlp.Signal
	switch {
	case o.kindOf("resourceSpans") == '[':
		sig = otlp.Traces
	case o.kindOf("resourceLogs") == '[':
		sig = otlp.Logs
	default:
		return errShape("no resourceSpans or resourceLogs")
	}
	r, err := otlp.Decode(line, sig, otlp.JSON, otlp.Limits{})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrWrongFormat, err)
	}
	return OTelEvents(r, c, emit)
}

// OTelEvents emits the events of one decoded OTLP payload under c: one
// listing event per r.Listings, in their order, then the calls; all or
// nothing (ErrNoTime when an item has no time and c
// gives none): `ingest --format otel` for a line of a file, the stream for
// a record of the Collector's topics. A call's event id is its identity in
// the trace (otlp.Call.ID) when it has one, so that the same call read
// from a file and from a topic, or delivered twice, is one call; else a
// hash of its place in c.
func OTelEvents(r *otlp.Result, c Context, emit func(Event) error) error {
	events := make([]Event, 0, len(r.Listings))
	defsRegistry := make([]string, len(r.Listings))
	for i, l := range r.Listings {
		meta := c.resolve(Meta{Time: l.ObservedAt}, otelFallback)
		if meta.Time.IsZero() {
			return ErrNoTime
		}
		if l.From == otlp.FromMCPList {
			meta.Server = l.Server
		} else {
			meta.Registry, meta.Server = otlp.DefinitionsRegistry(meta.Registry, l.Digest), ""
			defsRegistry[i] = meta.Registry
		}
		if l.Dropped > 0 {
			c.warn(fmt.Errorf("listing %d (%s): %d definitions dropped: %s", i, l.From, l.Dropped, l.Problem))
		}
		tools := make([]json.RawMessage, len(l.Tools))
		for j, t := range l.Tools {
			tools[j] = t
		}
		events = append(events, newListing(meta, hashID("l-", c.Source, c.Line, i), tools))
	}
	calls := make([]callAt, 0, len(r.Calls))
	for _, oc := range r.Calls {
		ca := callAt{
			tc: toolCall{id: oc.CallID, name: oc.Tool, unrecorded: !oc.ArgsRecorded && oc.Malformed == "",
				trace: oc.TraceID, span: oc.SpanID},
			object: Meta{
				Time: oc.EmittedAt, SessionID: oc.SessionID, AgentID: oc.AgentID, Model: oc.Model,
				Provider: oc.Provider, Surface: oc.Surface, Server: oc.Server,
			},
			problem: oc.Malformed,
			trace:   oc.ID(),
		}
		switch {
		case oc.Args.JSON != nil:
			ca.tc.args = argValue{json: oc.Args.JSON, valid: true}
		case oc.Args.Raw != nil:
			ca.tc.args = argValue{raw: oc.Args.Raw}
		}
		if oc.Definitions >= 0 {
			ca.registry = defsRegistry[oc.Definitions]
		}
		calls = append(calls, ca)
	}
	// All or nothing: no listing goes out for a line whose calls cannot.
	for _, ca := range calls {
		if c.resolve(ca.object, otelFallback).Time.IsZero() {
			return ErrNoTime
		}
	}
	for _, ev := range events {
		if err := emit(ev); err != nil {
			return err
		}
	}
	if len(calls) == 0 {
		return nil
	}
	return emitCalls(c, otelFallback, calls, emit)
}
