package sink

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"

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

// TestLowCardinality: lcStr's wire encoding decodes with ch-go's own
// LowCardinality column to the values appended, for each key width, after
// a Reset too; and it keeps no view of the caller's memory.
func TestLowCardinality(t *testing.T) {
	var c lcStr
	for _, distinct := range []int{1, 3, 256, 257, 70000} {
		c.Reset()
		var want []string
		for i := range 2 * distinct {
			v := fmt.Sprintf("v%d", (i*7)%distinct)
			if i%5 == 0 {
				v = "" // the empty string is a value like any other
			}
			buf := []byte(v)
			c.Append(unsafe.String(unsafe.SliceData(buf), len(buf)))
			clear(buf) // the caller reuses its memory
			want = append(want, v)
		}
		var b proto.Buffer
		c.EncodeState(&b)
		c.EncodeColumn(&b)
		got := proto.NewLowCardinality[string](new(proto.ColStr))
		r := proto.NewReader(bytes.NewReader(b.Buf))
		if err := got.DecodeState(r); err != nil {
			t.Fatal(err)
		}
		if err := got.DecodeColumn(r, c.Rows()); err != nil {
			t.Fatalf("%d distinct: %v", distinct, err)
		}
		if !slices.Equal(got.Values, want) {
			t.Fatalf("%d distinct: decoded %d values, first %q; want %d, first %q", distinct, len(got.Values), got.Values[:3], len(want), want[:3])
		}
		if c.Type() != "LowCardinality(String)" {
			t.Fatalf("type %s", c.Type())
		}
	}
}

// TestWireStr: wireStr's bytes, written through a Writer or encoded into a
// buffer, are what ch-go's own String column encodes for the same values
// and decode back to them (lengths on one and two varint bytes, the empty
// string, a caller that reuses its memory), across a Reset.
func TestWireStr(t *testing.T) {
	var c wireStr
	for round := range 2 {
		c.Reset()
		var want proto.ColStr
		for i := range 3000 {
			v := strings.Repeat(string(rune('a'+i%26)), (i*37+round)%300)
			buf := []byte(v)
			c.Append(unsafe.String(unsafe.SliceData(buf), len(buf)))
			clear(buf)
			want.Append(v)
		}
		var enc, ref proto.Buffer
		c.EncodeColumn(&enc)
		want.EncodeColumn(&ref)
		if !bytes.Equal(enc.Buf, ref.Buf) {
			t.Fatalf("round %d: EncodeColumn differs from ch-go's ColStr", round)
		}
		var out bytes.Buffer
		w := proto.NewWriter(&out, new(proto.Buffer))
		c.WriteColumn(w)
		if _, err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), ref.Buf) {
			t.Fatalf("round %d: WriteColumn differs from ch-go's ColStr", round)
		}
		var got proto.ColStr
		if err := got.DecodeColumn(proto.NewReader(bytes.NewReader(out.Bytes())), c.Rows()); err != nil {
			t.Fatal(err)
		}
		if c.Rows() != 3000 || got.Rows() != 3000 || got.Row(2999) != want.Row(2999) || c.Type() != "String" {
			t.Fatalf("round %d: %d rows, decoded %d", round, c.Rows(), got.Rows())
		}
	}
}

// TestBatchSize: Size is the bytes the batch holds, close to its wire
// form: what it adds is the LowCardinality keys, held in four bytes and
// sent in one here (small dictionaries), and Reset empties it.
func TestBatchSize(t *testing.T) {
	b := (&ClickHouse{}).NewBatch()
	rows := mkRows("size", 0, 5000, base)
	b.Append(rows)
	var out bytes.Buffer
	w := proto.NewWriter(&out, new(proto.Buffer))
	if err := (proto.Block{Columns: len(b.input), Rows: b.Len()}).WriteBlock(w, proto.Version, b.input); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lcKeys := 3 * len(b.lcs) * len(rows)
	if got, wire := b.Size(), out.Len(); got < wire || got > wire+lcKeys {
		t.Errorf("Size %d, wire form %d bytes: want %d..%d", got, wire, wire, wire+lcKeys)
	}
	if b.Reset(); b.Size() != 0 {
		t.Errorf("Size after Reset = %d", b.Size())
	}
}

// TestCompressions: every wire compression writes and reads back the same
// rows (auto is none to this loopback server).
func TestCompressions(t *testing.T) {
	srv := chenginetest.Server(t)
	db := testDB(t)
	ctx := context.Background()
	for _, comp := range []string{"lz4", "zstd", "none", "auto"} {
		w, err := NewClickHouse(ctx, Config{Addr: []string{srv.Addr()}, Database: db, Compression: comp}, WithMigrate())
		if err != nil {
			t.Fatalf("%s: %v", comp, err)
		}
		rows := mkRows("comp-"+comp, 0, 3000, base.Add(time.Hour))
		if err := w.Write(ctx, rows); err != nil {
			t.Fatalf("%s: %v", comp, err)
		}
		got, err := w.Rows(ctx, "comp-"+comp, 0)
		if err != nil || len(got) != len(rows) || !reflect.DeepEqual(got[len(got)-1], rows[len(rows)-1]) {
			t.Fatalf("%s: read %d rows, %v", comp, len(got), err)
		}
		w.Close()
	}
}

// TestBatchReserve: a reserved batch sizes its String columns and
// LowCardinality keys once its first rows are in, so that filling it to
// the reserved rows grows none of them; the bytes bound caps the rows.
func TestBatchReserve(t *testing.T) {
	rows := mkRows("reserve", 0, 20_000, base)
	for _, tc := range []struct {
		name            string
		reserve, budget int
		fill            int
	}{
		{"rows", 20_000, 1 << 30, 20_000},
		{"bytes", 1 << 30, 0, 10_000}, // budget set below: half of the rows' Size
	} {
		t.Run(tc.name, func(t *testing.T) {
			full := (&ClickHouse{}).NewBatch()
			full.Append(rows)
			budget := tc.budget
			if budget == 0 {
				budget = full.Size() / 2
			}
			b := (&ClickHouse{}).NewBatch()
			b.Reserve(tc.reserve, budget)
			b.Append(rows[:256])
			caps := make([]int, len(b.strs))
			for i, s := range b.strs {
				caps[i] = cap(s.buf)
			}
			keys := cap(b.lcs[0].keys)
			for i := 256; i < tc.fill; i += 256 {
				b.Append(rows[i:min(i+256, tc.fill)])
			}
			for i, s := range b.strs {
				if cap(s.buf) != caps[i] {
					t.Errorf("column %d grew after the reservation: cap %d, then %d", i, caps[i], cap(s.buf))
				}
			}
			if cap(b.lcs[0].keys) != keys || keys < tc.fill {
				t.Errorf("keys: cap %d after the reservation, %d at the end; want >= %d, unchanged", keys, cap(b.lcs[0].keys), tc.fill)
			}
			if tc.name == "bytes" && keys > 2*tc.fill {
				t.Errorf("bytes bound ignored: keys reserved for %d rows", keys)
			}
		})
	}
	// A reservation the first hand-off exceeds already (few rows, or a
	// byte budget smaller than the hand-off) is dropped, not a panic.
	for _, r := range [][2]int{{100, 64 << 20}, {100_000, 1000}} {
		b := (&ClickHouse{}).NewBatch()
		b.Reserve(r[0], r[1])
		b.Append(rows[:256])
		b.Append(rows[256:512])
		if b.Len() != 512 {
			t.Errorf("Reserve%v: %d rows", r, b.Len())
		}
	}
}

// TestBatchToken: the deduplication token follows the rows: the same rows
// give the same token, in a new batch too; a change in any column, or a
// value moved across a column boundary, gives another.
func TestBatchToken(t *testing.T) {
	rows := mkRows("token", 0, 1000, base)
	tok := func(rs []schema.Row) string {
		b := (&ClickHouse{}).NewBatch()
		b.Append(rs)
		return b.tokenOf(b.input)
	}
	first := tok(rows)
	if again := tok(rows); again != first {
		t.Fatalf("same rows: %s, then %s", first, again)
	}
	seen := map[string]string{first: "original"}
	for name, change := range map[string]func(r *schema.Row){
		"reason":      func(r *schema.Row) { r.Reason += "!" },
		"offset":      func(r *schema.Row) { r.Offset++ },
		"decided_at":  func(r *schema.Row) { r.DecidedAt = r.DecidedAt.Add(time.Millisecond) },
		"model (LC)":  func(r *schema.Row) { r.Model = "other" },
		"drift":       func(r *schema.Row) { r.Drift = !r.Drift },
		"across cols": func(r *schema.Row) { r.Reason, r.Path = r.Reason[:len(r.Reason)-1], r.Reason[len(r.Reason)-1:]+r.Path },
	} {
		changed := slices.Clone(rows)
		change(&changed[500])
		got := tok(changed)
		if prev, ok := seen[got]; ok {
			t.Errorf("%s: same token as %s", name, prev)
		}
		seen[got] = name
	}
}
