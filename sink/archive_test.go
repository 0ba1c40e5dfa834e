package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// mkEvents returns n call records of topic, emitted one second apart from
// base, eight partitions, values of every kind of byte.
func mkEvents(topic string, n int) []schema.CallEvent {
	evs := make([]schema.CallEvent, n)
	for i := range evs {
		evs[i] = schema.CallEvent{
			EmittedAt: base.Add(time.Duration(i) * time.Second),
			Topic:     topic,
			Partition: int32(i % 8),
			Offset:    int64(i / 8),
			Timestamp: base.Add(time.Duration(i)*time.Second + time.Millisecond),
			Key:       []byte(fmt.Sprintf("s-%d", i%10)),
			Value:     []byte(fmt.Sprintf(`{"event_id":"c-%d","pad":"%s","odd":"\x00\xff ✓"}`, i, strings.Repeat("x", i%300))),
		}
	}
	return evs
}

// readWindow reads a window of the archive, sorted by position.
func readWindow(t *testing.T, w *ClickHouse, win schema.Window) []schema.CallEvent {
	t.Helper()
	var got []schema.CallEvent
	if err := w.CallEvents(context.Background(), win, func(evs []schema.CallEvent) error {
		got = append(got, evs...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(a, b schema.CallEvent) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return got
}

func sameEvent(a, b schema.CallEvent) bool {
	return a.EmittedAt.Equal(b.EmittedAt) && a.Topic == b.Topic && a.Partition == b.Partition && a.Offset == b.Offset &&
		a.Timestamp.Equal(b.Timestamp) && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value)
}

// TestArchive: a batch's call records are stored with its decisions, each
// once under FINAL however often the batch is written again, and read
// back byte for byte by window: a record at From is in, one at To out.
func TestArchive(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	if err := w.CheckArchive(ctx); err != nil {
		t.Fatal(err)
	}
	evs := mkEvents("tool-calls", 1000)
	other := mkEvents("other-calls", 10) // another topic: never read with tool-calls
	b := w.NewBatch()
	b.Append(mkRows("arch", 0, 1000, base.Add(time.Hour)))
	b.AppendEvents(evs[:600])
	b.AppendEvents(evs[600:])
	b.AppendEvents(other)
	if b.Events() != 1010 || b.Len() != 1000 {
		t.Fatalf("batch holds %d records and %d rows", b.Events(), b.Len())
	}
	for range 2 { // a retry of the same batch: dropped by the server
		if err := b.Write(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Redelivered records archived again in a later batch (a new
	// archived_at): collapsed by FINAL.
	b.Reset()
	b.AppendEvents(evs[100:200])
	if b.Len() != 0 || b.Events() != 100 {
		t.Fatalf("after Reset: %d rows, %d records", b.Len(), b.Events())
	}
	if err := b.Write(ctx); err != nil {
		t.Fatal(err)
	}
	if n := count(t, w, "SELECT count() FROM {db}.call_events FINAL"); n != 1010 {
		t.Errorf("FINAL holds %d records, want 1010", n)
	}
	if n := count(t, w, "SELECT count() FROM {db}.decisions FINAL"); n != 1000 {
		t.Errorf("FINAL holds %d decisions, want 1000", n)
	}

	for _, tc := range []struct {
		name     string
		from, to int // seconds after base
		want     []schema.CallEvent
	}{
		{"all", -1, 1000, evs},
		{"a window", 250, 400, evs[250:400]},
		{"from an instant between records", 0, 1, evs[:1]},
		{"empty", 400, 400, nil},
		{"after the end", 2000, 3000, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			win := schema.Window{Topic: "tool-calls", From: base.Add(time.Duration(tc.from) * time.Second), To: base.Add(time.Duration(tc.to) * time.Second)}
			got := readWindow(t, w, win)
			if len(got) != len(tc.want) {
				t.Fatalf("read %d records, want %d", len(got), len(tc.want))
			}
			want := slices.Clone(tc.want)
			slices.SortFunc(want, func(a, b schema.CallEvent) int {
				if a.Partition != b.Partition {
					return int(a.Partition - b.Partition)
				}
				return int(a.Offset - b.Offset)
			})
			for i := range want {
				if !sameEvent(got[i], want[i]) {
					t.Fatalf("record %d: %+v, want %+v", i, got[i], want[i])
				}
			}
			n, err := w.CountCallEvents(ctx, win)
			if err != nil || n < int64(len(tc.want)) {
				t.Errorf("CountCallEvents = %d, %v; want at least %d", n, err, len(tc.want))
			}
		})
	}
}

// TestArchiveReadStops: an error from fn stops the read. On its own
// engine: the connection is closed with the rest of the answer unread,
// which the kernel sends as a reset, and a reset makes the embedded engine
// abort a few seconds later (package chengine), which would take the
// package's shared engine down under the tests that follow.
func TestArchiveReadStops(t *testing.T) {
	srv := chenginetest.Start(t, chengine.Options{})
	w := newWriterAt(t, srv.Addr(), testDB(t))
	ctx := context.Background()
	b := w.NewBatch()
	b.Append(mkRows("arch", 0, 1000, base.Add(time.Hour)))
	b.AppendEvents(mkEvents("tool-calls", 1000))
	if err := b.Write(ctx); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("enough")
	calls := 0
	err := w.CallEvents(ctx, schema.Window{Topic: "tool-calls", From: base, To: base.Add(time.Hour)}, func([]schema.CallEvent) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("CallEvents = %v after %d calls of fn, want %v after 1", err, calls, stop)
	}
}

// TestArchiveMissing: CheckArchive refuses a database without the table,
// before any write.
func TestArchiveMissing(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	if err := w.Conn().Exec(ctx, "DROP TABLE `"+w.Database()+"`.call_events"); err != nil {
		t.Fatal(err)
	}
	err := w.CheckArchive(ctx)
	if !errors.Is(err, ErrSchemaMismatch) || !appender.IsPermanent(err) {
		t.Fatalf("CheckArchive = %v, want a permanent ErrSchemaMismatch", err)
	}
}
