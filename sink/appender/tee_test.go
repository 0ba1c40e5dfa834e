package appender_test

import (
	"context"
	"errors"
	"testing"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// store is a Batcher whose batches record every part of a write they
// are given, and archive when archives is set.
type store struct {
	archives bool
	batches  []*recBatch
}

func (s *store) Write(ctx context.Context, rows []schema.Row) error {
	b := s.NewBatch()
	b.Append(rows)
	return b.Write(ctx)
}

func (s *store) NewBatch() appender.Batch {
	b := &recBatch{archives: s.archives}
	s.batches = append(s.batches, b)
	return b
}

type recBatch struct {
	archives           bool
	rows, events       int
	reserved           [2]int
	writes             int
	fail               error
	appendedUnarchived bool
}

func (b *recBatch) Append(rows []schema.Row) { b.rows += len(rows) }
func (b *recBatch) AppendEvents(evs []schema.CallEvent) {
	b.events += len(evs)
	b.appendedUnarchived = b.appendedUnarchived || !b.archives
}
func (b *recBatch) Archives() bool          { return b.archives }
func (b *recBatch) Reserve(rows, bytes int) { b.reserved = [2]int{rows, bytes} }
func (b *recBatch) Len() int                { return b.rows }
func (b *recBatch) Size() int               { return b.rows }
func (b *recBatch) Write(context.Context) error {
	b.writes++
	if b.appendedUnarchived {
		return appender.ErrNoArchive
	}
	return b.fail
}
func (b *recBatch) Reset() { *b = recBatch{archives: b.archives, fail: b.fail} }

// TestTee: every part of a write reaches the batches that take it: rows
// and sizes both, call records those that archive (ClickHouse before the
// decisions topic, or after it), and with neither archiving a Write
// fails for good instead of dropping them. A retry after the second
// failed does not write the first again.
func TestTee(t *testing.T) {
	for _, tt := range []struct {
		name          string
		first, second bool // archives
		wantArchives  bool
		wantEvents    [2]int
		wantErr       error
	}{
		{"store then topic", true, false, true, [2]int{2, 0}, nil},
		{"topic then store", false, true, true, [2]int{0, 2}, nil},
		{"both archive", true, true, true, [2]int{2, 2}, nil},
		{"neither archives", false, false, false, [2]int{2, 0}, appender.ErrNoArchive},
	} {
		t.Run(tt.name, func(t *testing.T) {
			first, second := &store{archives: tt.first}, &store{archives: tt.second}
			b := appender.Tee(first, second).NewBatch()
			if b.Archives() != tt.wantArchives {
				t.Fatalf("Archives = %v, want %v", b.Archives(), tt.wantArchives)
			}
			b.Reserve(100, 1<<20)
			b.Append(make([]schema.Row, 3))
			b.AppendEvents(make([]schema.CallEvent, 2))
			err := b.Write(context.Background())
			if !errors.Is(err, tt.wantErr) || (tt.wantErr != nil && !appender.IsPermanent(err)) {
				t.Fatalf("Write: %v, want %v", err, tt.wantErr)
			}
			f, s := first.batches[0], second.batches[0]
			if f.rows != 3 || s.rows != 3 {
				t.Errorf("rows %d and %d, want 3 in both", f.rows, s.rows)
			}
			if got := [2]int{f.events, s.events}; got != tt.wantEvents {
				t.Errorf("call records %v, want %v", got, tt.wantEvents)
			}
			if want := [2]int{100, 1 << 20}; f.reserved != want || s.reserved != want {
				t.Errorf("reserved %v and %v, want %v in both", f.reserved, s.reserved, want)
			}
		})
	}
	t.Run("retry", func(t *testing.T) {
		first, second := &store{archives: true}, &store{}
		b := appender.Tee(first, second).NewBatch()
		b.Append(make([]schema.Row, 1))
		second.batches[0].fail = errors.New("broker down")
		if err := b.Write(context.Background()); err == nil {
			t.Fatal("Write succeeded with the second failing")
		}
		second.batches[0].fail = nil
		if err := b.Write(context.Background()); err != nil {
			t.Fatal(err)
		}
		if f, s := first.batches[0].writes, second.batches[0].writes; f != 1 || s != 2 {
			t.Fatalf("first written %d times, second %d; want 1 and 2", f, s)
		}
	})
}

// TestRowsBatchNoArchive: the batch of a plain Sink keeps no archive: a
// Write after call records fails for good, writing nothing, until Reset.
func TestRowsBatchNoArchive(t *testing.T) {
	writes := 0
	b := appender.NewBatch(appender.SinkFunc(func(context.Context, []schema.Row) error { writes++; return nil }))
	if b.Archives() {
		t.Fatal("a plain Sink's batch archives")
	}
	b.Append(make([]schema.Row, 1))
	b.AppendEvents(make([]schema.CallEvent, 1))
	if err := b.Write(context.Background()); !errors.Is(err, appender.ErrNoArchive) || !appender.IsPermanent(err) || writes != 0 {
		t.Fatalf("Write: %v after %d writes, want ErrNoArchive and none", err, writes)
	}
	b.Reset()
	b.Append(make([]schema.Row, 1))
	if err := b.Write(context.Background()); err != nil || writes != 1 {
		t.Fatalf("after Reset: %v, %d writes", err, writes)
	}
}
