package reanalyze

import (
	"context"

	"github.com/toolaudit/toolaudit/schema"
)

// Archive is the archive of the calls topic as the re-analysis reads it
// (table call_events, written by `resolverd run --archive-calls`);
// *sink.ClickHouse is one.
type Archive interface {
	// CountCallEvents returns about how many records the window holds
	// (an upper bound).
	CountCallEvents(ctx context.Context, w schema.Window) (int64, error)
	// CallEvents calls fn with the window's records, each once, a block
	// at a time; the records are fn's to keep.
	CallEvents(ctx context.Context, w schema.Window, fn func([]schema.CallEvent) error) error
}

// ArchiveSource reads a window from the archive: the records whose window
// time (stored in milliseconds) is in it, exactly, whatever Kafka still
// holds.
type ArchiveSource struct {
	Archive Archive
	Window  schema.Window
}

var _ Source = (*ArchiveSource)(nil)

// Plan counts the window's records.
func (s *ArchiveSource) Plan(ctx context.Context) (int64, error) {
	return s.Archive.CountCallEvents(ctx, s.Window)
}

// Read emits the window's records, a block at a time.
func (s *ArchiveSource) Read(ctx context.Context, emit func(Chunk) error) error {
	return s.Archive.CallEvents(ctx, s.Window, func(evs []schema.CallEvent) error { return emit(Chunk{Events: evs}) })
}
