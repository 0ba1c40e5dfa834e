package ingest

import (
	"errors"
	"strconv"
)

// Per-line errors. A line that fails with one of these is skipped and
// counted; none of them stops ingestion.
var (
	// ErrNotJSON: the line is not a JSON object.
	ErrNotJSON = errors.New("not a JSON object")
	// ErrUnknownFormat: the line is JSON but no known format.
	ErrUnknownFormat = errors.New("unknown format")
	// ErrWrongFormat: the line does not have the shape of the format it was
	// forced to, or that its envelope names.
	ErrWrongFormat = errors.New("not of the expected format")
	// ErrBadEnvelope: the envelope's fields are not of the documented types.
	ErrBadEnvelope = errors.New("bad envelope")
	// ErrBadEvent: a contract event that cannot be routed (type or event_id).
	ErrBadEvent = errors.New("bad contract event")
	// ErrNoTime: a provider object with no time from the object, its
	// envelope or the defaults.
	ErrNoTime = errors.New("no time: give emitted_at in an envelope or a default time")
	// ErrNoToolName: a tool call without a name.
	ErrNoToolName = errors.New("tool call has no name")
	// ErrUnsupported: a recognised shape this package does not convert.
	ErrUnsupported = errors.New("unsupported")
	// ErrIncompletePagination: a tools/list result announced a nextCursor
	// whose page never came.
	ErrIncompletePagination = errors.New("incomplete tools/list pagination")
	// ErrLineTooLong: the line is longer than the reader's limit.
	ErrLineTooLong = errors.New("line too long")
)

// Errors that stop [Ingester.Ingest]; they wrap the cause.
var (
	// ErrRead: the input could not be read.
	ErrRead = errors.New("read")
	// ErrSink: the sink refused an event (for Kafka: a delivery failed
	// after the client's retries).
	ErrSink = errors.New("sink")
)

// LineError is a problem with one input line.
type LineError struct {
	Source string
	Line   int
	Format Format // FormatUnknown when the line could not be told
	Err    error
}

func (e *LineError) Error() string {
	s := e.Source + ":" + strconv.Itoa(e.Line) + ": "
	if e.Format != FormatUnknown {
		s += string(e.Format) + ": "
	}
	return s + e.Err.Error()
}

func (e *LineError) Unwrap() error { return e.Err }
