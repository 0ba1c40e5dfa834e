package ingest

import (
	"errors"
	"fmt"
)

// Adapter converts one line of its format into contract events, calling
// emit once per event, in order. A line is all or nothing: an adapter
// checks the whole line before it emits. It returns a per-line error for a
// bad line (the line is then skipped), or the error of emit unchanged.
//
// line is the provider object itself: an envelope has already been opened
// by the [Converter], which puts its fields in c.Envelope.
type Adapter interface {
	Convert(line []byte, c Context, emit func(Event) error) error
}

// AdapterFunc makes a function an [Adapter].
type AdapterFunc func(line []byte, c Context, emit func(Event) error) error

// Convert calls f.
func (f AdapterFunc) Convert(line []byte, c Context, emit func(Event) error) error {
	return f(line, c, emit)
}

// Flusher is implemented by adapters that hold state across lines (MCP
// tools/list pages). Flush is called at the end of a source; c carries the
// source and defaults, with Line set to the last line. Its errors are
// [*LineError]s joined with [errors.Join], or the error of emit.
type Flusher interface {
	Flush(c Context, emit func(Event) error) error
}

var (
	_ Adapter = AdapterFunc(nil)
	_ Adapter = (*MCPAdapter)(nil)
	_ Flusher = (*MCPAdapter)(nil)
)

// NewAdapter returns a new adapter for f. Adapters of stateful formats
// must not be shared between sources.
func NewAdapter(f Format) (Adapter, error) {
	switch f {
	case FormatEvent:
		return AdapterFunc(convertEvent), nil
	case FormatOpenAI:
		return AdapterFunc(convertOpenAI), nil
	case FormatAnthropic:
		return AdapterFunc(convertAnthropic), nil
	case FormatBedrock:
		return AdapterFunc(convertBedrock), nil
	case FormatMCP:
		return NewMCPAdapter(), nil
	case FormatOTel:
		return AdapterFunc(convertOTel), nil
	default:
		return nil, fmt.Errorf("no adapter for format %q", f)
	}
}

// callAt is an extracted tool call and what its provider object says
// about its context.
type callAt struct {
	tc     toolCall
	object Meta
	// registry, when set, is the call's registry whatever the context
	// says (OTel: the registry of the tool definitions the model had).
	registry string
	// problem, when set, is why the call cannot be checked; it is kept
	// (the resolver marks it MALFORMED) and the problem is a warning.
	problem string
	// trace, when set, is the call's identity in its trace (OTel); the
	// event id is made of it instead of the call's place in the input.
	trace string
}

// emitCalls builds the events of calls, then emits them all; if any lacks
// a time, none is emitted.
func emitCalls(c Context, fallback Meta, calls []callAt, emit func(Event) error) error {
	events := make([]Event, 0, len(calls))
	var warnings []error
	for i, ca := range calls {
		meta := c.resolve(ca.object, fallback)
		if meta.Time.IsZero() {
			return ErrNoTime
		}
		if ca.registry != "" {
			meta.Registry = ca.registry
		}
		if ca.problem != "" {
			warnings = append(warnings, fmt.Errorf("call %d (%s): %s; kept, the resolver will mark it MALFORMED", i, ca.tc.name, ca.problem))
		} else {
			if ca.tc.name == "" {
				warnings = append(warnings, fmt.Errorf("call %d: %w; kept, the resolver will mark it MALFORMED", i, ErrNoToolName))
			}
			switch {
			case ca.tc.unrecorded && !ca.tc.args.valid && ca.tc.args.raw == nil:
				warnings = append(warnings, fmt.Errorf("call %d (%s): no arguments recorded; sent as such, decided on its name and never allowed", i, ca.tc.name))
			case !ca.tc.args.valid && ca.tc.args.raw == nil:
				warnings = append(warnings, fmt.Errorf("call %d (%s): no arguments recorded", i, ca.tc.name))
			}
		}
		id := callID(c, i, ca.tc.id)
		if ca.trace != "" {
			id = withProviderID(ca.tc.id, ca.trace)
		}
		events = append(events, newCall(ca.tc, meta, id))
	}
	for _, w := range warnings {
		c.warn(w)
	}
	for _, ev := range events {
		if err := emit(ev); err != nil {
			return err
		}
	}
	return nil
}

// errShape reports a line that does not have its format's shape; the
// LineError around it names the format.
func errShape(what string) error {
	return fmt.Errorf("%w: %s", ErrWrongFormat, what)
}

// isLineError reports whether err is (or joins) per-line errors only.
func isLineError(err error) bool {
	var le *LineError
	return errors.As(err, &le)
}
