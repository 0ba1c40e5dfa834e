package sink

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/toolaudit/toolaudit/schema"
)

// TestBatchReuse: a Batch written, Reset and filled again with other rows
// stores exactly the second rows the second time (no leftovers of the
// first, in any column, LowCardinality dictionaries included), and a failed
// write leaves the batch intact for a retry.
func TestBatchReuse(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	b := w.NewBatch()
	for round, n := range []int{300, 7, 120} {
		analysis := fmt.Sprintf("reuse%d", round)
		rows := make([]schema.Row, n)
		for i := range rows {
			rows[i] = fullRow(round*1000 + i)
			rows[i].AnalysisID = analysis
			rows[i].CallKey = fmt.Sprintf("k%04d", i)
			rows[i].Model = fmt.Sprintf("model-%d", i%3+round) // LowCardinality, shared across rounds
		}
		b.Reset()
		b.Append(rows[:n/2])
		b.Append(rows[n/2:])
		if b.Len() != n {
			t.Fatalf("round %d: Len %d, want %d", round, b.Len(), n)
		}
		if round == 1 {
			// A canceled write fails and keeps the rows for the retry.
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if err := b.Write(cctx); err == nil {
				t.Fatal("write with a canceled context succeeded")
			}
			if b.Len() != n {
				t.Fatalf("failed write changed Len to %d", b.Len())
			}
		}
		if err := b.Write(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := w.Rows(ctx, analysis, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("round %d: read %d rows, want %d", round, len(got), n)
		}
		for i := range got {
			if !reflect.DeepEqual(got[i], rows[i]) {
				t.Fatalf("round %d row %d:\n got %+v\nwant %+v", round, i, got[i], rows[i])
			}
		}
	}
}

// TestInterner: one copy per distinct value, not sharing the caller's
// memory, and a bounded map.
func TestInterner(t *testing.T) {
	in := interner{}
	buf := []byte("model-a")
	s := unsafe.String(&buf[0], len(buf)) // a view of memory the caller reuses
	v := in.intern(s)
	buf[6] = 'b'
	if v != "model-a" {
		t.Fatalf("interned value changed with the caller's buffer: %q", v)
	}
	if w := in.intern("model-a"); unsafe.StringData(w) != unsafe.StringData(v) {
		t.Error("a second intern of the same value made another copy")
	}
	for i := range 1<<16 + 10 {
		in.intern(strings.Repeat("x", i%7) + fmt.Sprint(i))
	}
	if len(in) > 1<<16 {
		t.Errorf("interner holds %d values, bound %d", len(in), 1<<16)
	}
}
