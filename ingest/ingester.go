package ingest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"strconv"

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
	// MaxTrackedIDs bounds how many event ids are remembered to find
	// repeats (about 40 bytes each); 0 means DefaultMaxTrackedIDs. The
	// ids past it are counted in Stats.Untracked and not checked.
	MaxTrackedIDs int

	ids     ids
	sources []string // by seenID.source
}

// DefaultMaxTrackedIDs is the default of Ingester.MaxTrackedIDs: about 160
// MiB of memory at most.
const DefaultMaxTrackedIDs = 4 << 20

// ErrIDConflict: an event repeats the event_id of an earlier event of the
// run with other content. The store keeps one decision per event_id, so
// one of the two would be lost: the event is still sent (which one is
// right is not ingest's to know), and the repeat reported.
var ErrIDConflict = errors.New("event_id repeated with other content")

// ids remembers the event ids of a run (by kind, hashed) and where each
// was first seen, to find repeats in bounded memory.
type ids struct {
	seed maphash.Seed
	m    map[uint64]seenID
}

// seenID is where an id was first seen and a hash of its event.
type seenID struct {
	content uint64
	source  uint32
	line    uint32
}

// Stats counts what an Ingester did.
type Stats struct {
	Lines    int // non-blank lines read
	NoEvent  int // good lines without an event: text-only messages, other JSON-RPC messages, non-final tools/list pages
	Errors   int // bad lines skipped, and paginations never finished
	Warnings int
	// Repeats counts events whose kind and event_id an earlier event of
	// the run had, with the same content (the same file given twice, a
	// log that holds an event twice): the store keeps one of them, which
	// loses nothing. Conflicts counts those with other content, each
	// reported through OnError (ErrIDConflict): one of the two will be
	// lost downstream. Untracked counts the events not checked, past
	// MaxTrackedIDs.
	Repeats, Conflicts, Untracked int
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
	s.Repeats += o.Repeats
	s.Conflicts += o.Conflicts
	s.Untracked += o.Untracked
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
	n := 0 // the line being converted
	src := uint32(len(in.sources))
	in.sources = append(in.sources, source)
	emit := func(ev Event) error {
		in.track(&st, ev, src, n)
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

// track remembers ev's id, and counts and reports a repeat of an earlier
// one, at line n of the source numbered src.
func (in *Ingester) track(st *Stats, ev Event, src uint32, n int) {
	if ev.ID == "" {
		return
	}
	if in.ids.m == nil {
		in.ids.seed = maphash.MakeSeed()
		in.ids.m = make(map[uint64]seenID)
	}
	var h maphash.Hash
	h.SetSeed(in.ids.seed)
	h.WriteByte(byte(ev.Kind))
	h.WriteString(ev.ID)
	key := h.Sum64()
	content := maphash.Bytes(in.ids.seed, ev.Value)
	prev, ok := in.ids.m[key]
	switch {
	case !ok:
		max := in.MaxTrackedIDs
		if max <= 0 {
			max = DefaultMaxTrackedIDs
		}
		if len(in.ids.m) >= max {
			st.Untracked++
			return
		}
		in.ids.m[key] = seenID{content: content, source: src, line: uint32(min(n, math.MaxUint32))}
	case prev.content == content:
		st.Repeats++
	default:
		st.Conflicts++
		if in.OnError != nil {
			in.OnError(&LineError{Source: in.sources[src], Line: n, Err: fmt.Errorf("%w: %s %s was first seen at %s:%d; the store keeps one decision per event_id, so one of them will be lost (sent anyway)",
				ErrIDConflict, ev.Kind, strconv.Quote(ev.ID), in.sources[prev.source], prev.line)})
		}
	}
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
