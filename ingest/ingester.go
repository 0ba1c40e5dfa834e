package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/toolaudit/toolaudit/internal/lines"
)

// DefaultMaxLineBytes is the longest line an [Ingester] reads by default.
const DefaultMaxLineBytes = 16 << 20

// Ingester reads sources line by line, converts them and appends the
// events to a sink. Bad lines are reported and skipped; only a read error,
// a sink error or the context stop it. An Ingester may ingest several
// sources one after the other; it is not safe for concurrent use.
type Ingester struct {
	// Sink receives the events. Required.
	Sink Sink
	// Format forces every line to one format; FormatUnknown detects.
	Format Format
	// Defaults are the lowest-priority context of provider formats.
	Defaults Meta
	// OnError, when set, receives each bad line.
	OnError func(*LineError)
	// OnWarning, when set, receives problems that did not stop a line.
	OnWarning func(*LineError)
	// MaxLineBytes bounds a line; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
}

// Stats counts what an Ingester did.
type Stats struct {
	Lines    int // non-blank lines read
	NoEvent  int // good lines without an event: text-only messages, other JSON-RPC messages, non-final tools/list pages
	Errors   int // bad lines skipped, and paginations never finished
	Warnings int
	// Events counts events appended, by kind; Formats by the format of
	// their line; LineFormats counts lines by detected format.
	Events      map[Kind]int
	Formats     map[Format]int
	LineFormats map[Format]int
}

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Lines += o.Lines
	s.NoEvent += o.NoEvent
	s.Errors += o.Errors
	s.Warnings += o.Warnings
	s.init()
	for k, v := range o.Events {
		s.Events[k] += v
	}
	for k, v := range o.Formats {
		s.Formats[k] += v
	}
	for k, v := range o.LineFormats {
		s.LineFormats[k] += v
	}
}

// EventCount is the number of events of every kind.
func (s Stats) EventCount() int {
	n := 0
	for _, v := range s.Events {
		n += v
	}
	return n
}

func (s *Stats) init() {
	if s.Events == nil {
		s.Events = make(map[Kind]int)
	}
	if s.Formats == nil {
		s.Formats = make(map[Format]int)
	}
	if s.LineFormats == nil {
		s.LineFormats = make(map[Format]int)
	}
}

var utf8BOM = []byte("\xef\xbb\xbf")

// Ingest reads r, named source, to its end. It returns what it counted
// and, if it stopped early, why: a read error, a sink error or ctx's.
func (in *Ingester) Ingest(ctx context.Context, source string, r io.Reader) (Stats, error) {
	var st Stats
	st.init()
	if in.Sink == nil {
		return st, errors.New("ingest: no sink")
	}
	conv := NewConverter(source, in.Format, in.Defaults)
	conv.Warn = func(e *LineError) {
		st.Warnings++
		if in.OnWarning != nil {
			in.OnWarning(e)
		}
	}
	lineEvents := 0
	emit := func(ev Event) error {
		if err := in.Sink.Append(ctx, ev); err != nil {
			return fmt.Errorf("%w: append %s event: %w", ErrSink, ev.Kind, err)
		}
		st.Events[ev.Kind]++
		lineEvents++
		return nil
	}
	reportErr := func(err error) {
		for _, e := range flatten(err) {
			var le *LineError
			if !errors.As(e, &le) {
				le = &LineError{Source: source, Err: e}
			}
			st.Errors++
			if in.OnError != nil {
				in.OnError(le)
			}
		}
	}

	max := in.MaxLineBytes
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		line, tooLong, readErr := readLine(br, max, buf[:0])
		buf = line
		if readErr != nil && !errors.Is(readErr, io.EOF) {
			return st, fmt.Errorf("%w %s: %w", ErrRead, source, readErr)
		}
		if len(line) > 0 || tooLong || readErr == nil {
			n++
		}
		if n == 1 {
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		switch {
		case tooLong:
			st.Lines++
			reportErr(&LineError{Source: source, Line: n, Err: fmt.Errorf("%w: over %d bytes", ErrLineTooLong, max)})
		case len(bytes.TrimSpace(line)) > 0:
			st.Lines++
			lineEvents = 0
			f, err := conv.Convert(n, line, emit)
			if f != FormatUnknown {
				st.LineFormats[f]++
			}
			st.Formats[f] += lineEvents
			var le *LineError
			switch {
			case err == nil && lineEvents == 0:
				st.NoEvent++
			case err == nil:
			case errors.As(err, &le):
				reportErr(err)
			default:
				return st, err
			}
		}
		if readErr != nil { // io.EOF
			break
		}
	}
	if err := conv.Flush(n, emit); err != nil {
		if !isLineError(err) {
			return st, err
		}
		reportErr(err)
	}
	for f, v := range st.Formats {
		if v == 0 {
			delete(st.Formats, f)
		}
	}
	return st, nil
}

// readLine reads one line into buf without its end of line (lines.Append:
// a line longer than max, "\r\n" aside, is read to its end and dropped,
// with tooLong; err is io.EOF at the end of input, with the last line if
// it had no newline).
func readLine(br *bufio.Reader, max int, buf []byte) (line []byte, tooLong bool, err error) {
	line, tooLong, err = lines.Append(br, buf, max+2)
	return trimEOL(line), tooLong, err
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// flatten splits an errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
