package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Converter converts the lines of one source: it detects each line's
// format (or uses a forced one), opens envelopes, and keeps one adapter
// per format so that stateful formats see the whole source. It is not safe
// for concurrent use.
type Converter struct {
	source   string
	format   Format
	defaults Meta
	adapters map[Format]Adapter
	last     time.Time // the own time of the source's latest event

	// Warn, when set, receives problems that did not stop a line.
	Warn func(*LineError)
}

// NewConverter returns a converter for the source named source (the name
// feeds hashed event ids). format forces every line to one format;
// FormatUnknown detects per line. defaults are the lowest-priority context
// (command-line flags).
func NewConverter(source string, format Format, defaults Meta) *Converter {
	return &Converter{source: source, format: format, defaults: defaults, adapters: make(map[Format]Adapter)}
}

// Convert converts line number n. It returns the line's format
// (FormatUnknown if none) and, for a bad line, a [*LineError]; any other
// error is one that emit returned, and should stop the caller. A blank
// line is neither an error nor an event.
func (c *Converter) Convert(n int, line []byte, emit func(Event) error) (Format, error) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return FormatUnknown, nil
	}
	o, err := decodeObject(line)
	if err != nil {
		return FormatUnknown, c.lineErr(n, FormatUnknown, err)
	}
	f := c.format
	if f == FormatUnknown {
		if f = detectObject(o); f == FormatUnknown {
			return FormatUnknown, c.lineErr(n, FormatUnknown, ErrUnknownFormat)
		}
	}
	ctx := c.context(n, f)
	ctx.Text = line
	if f != FormatEvent {
		env, inner, ef, ok, err := openEnvelope(line, o)
		switch {
		case err != nil:
			return f, c.lineErr(n, f, err)
		case ok && ef != f:
			return f, c.lineErr(n, f, fmt.Errorf("%w: envelope carries %s", ErrWrongFormat, ef))
		case ok:
			ctx.Envelope, line = env, bytes.TrimSpace(inner)
		}
	}
	a, err := c.adapter(f)
	if err != nil {
		return f, c.lineErr(n, f, err)
	}
	var sinkErr error
	err = a.Convert(line, ctx, func(ev Event) error {
		if !ev.borrowed && !ev.Timestamp.IsZero() {
			c.last = ev.Timestamp
		}
		if err := emit(ev); err != nil {
			sinkErr = err
			return err
		}
		return nil
	})
	switch {
	case sinkErr != nil:
		return f, sinkErr
	case err != nil:
		return f, c.lineErr(n, f, err)
	}
	return f, nil
}

// Flush ends the source: stateful adapters report what they still hold.
// lastLine is the number of the source's last line. The errors are
// [*LineError]s joined with [errors.Join], or an error of emit.
func (c *Converter) Flush(lastLine int, emit func(Event) error) error {
	var errs []error
	for _, f := range Formats() {
		fl, ok := c.adapters[f].(Flusher)
		if !ok {
			continue
		}
		var sinkErr error
		err := fl.Flush(c.context(lastLine, f), func(ev Event) error {
			if err := emit(ev); err != nil {
				sinkErr = err
				return err
			}
			return nil
		})
		if sinkErr != nil {
			return sinkErr
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Converter) context(n int, f Format) Context {
	return Context{
		Source:   c.source,
		Line:     n,
		Last:     c.last,
		Defaults: c.defaults,
		Warn: func(err error) {
			if c.Warn != nil {
				c.Warn(&LineError{Source: c.source, Line: n, Format: f, Err: err})
			}
		},
	}
}

func (c *Converter) adapter(f Format) (Adapter, error) {
	if a, ok := c.adapters[f]; ok {
		return a, nil
	}
	a, err := NewAdapter(f)
	if err != nil {
		return nil, err
	}
	c.adapters[f] = a
	return a, nil
}

// lineErr wraps err as the LineError of line n, unless it already is one.
func (c *Converter) lineErr(n int, f Format, err error) error {
	var le *LineError
	if errors.As(err, &le) {
		return err
	}
	return &LineError{Source: c.source, Line: n, Format: f, Err: err}
}
