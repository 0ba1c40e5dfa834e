package ingest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"
)

// Sink receives converted events. Append may buffer, and may report a
// failure of an earlier event; Flush returns once every appended event is
// delivered, or says why not. Implementations here are safe for
// concurrent use.
type Sink interface {
	Append(ctx context.Context, ev Event) error
	Flush(ctx context.Context) error
}

// SinkFunc makes a function a [Sink] whose Flush does nothing. The
// function must not keep ev's slices after it returns unless it owns them:
// the events of this package own their slices, so it may.
type SinkFunc func(ctx context.Context, ev Event) error

// Append calls f.
func (f SinkFunc) Append(ctx context.Context, ev Event) error { return f(ctx, ev) }

// Flush does nothing.
func (f SinkFunc) Flush(context.Context) error { return nil }

// JSONLSink writes each event's value as one line (the dry run). Key and
// timestamp are not written: they derive from the value.
type JSONLSink struct {
	mu sync.Mutex
	w  *bufio.Writer
}

var (
	_ Sink = (*JSONLSink)(nil)
	_ Sink = (*Producer)(nil)
	_ Sink = SinkFunc(nil)
)

// NewJSONLSink returns a sink that writes to w, buffered until Flush.
func NewJSONLSink(w io.Writer) *JSONLSink {
	return &JSONLSink{w: bufio.NewWriterSize(w, 64<<10)}
}

// Append writes ev.Value and a newline.
func (s *JSONLSink) Append(ctx context.Context, ev Event) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.w.Write(ev.Value); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	if err := s.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("write event: %w", err)
	}
	return nil
}

// Flush writes out what is buffered.
func (s *JSONLSink) Flush(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("flush events: %w", err)
	}
	return nil
}
