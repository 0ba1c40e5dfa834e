package sink

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/schema"
)

// TestBatchGolden: the block a Batch sends, byte for byte, for rows shaped
// as the pipeline's (a mixed fleet, hand-offs of 256, the batch reused),
// is what the sink sent when it was pinned (1aafffa): a faster Append must
// not move a byte of the INSERT, dictionary order and key widths included.
// The SHA-256 of each block is pinned, so a change shows as a mismatch
// here before it shows in the stored rows.
func TestBatchGolden(t *testing.T) {
	wide := mkRows("wide", 0, 70_000, base.Add(time.Hour))
	for i := range wide {
		// 70,000 distinct values: 32-bit keys; the empty string among them.
		wide[i].AgentID = fmt.Sprintf("agent-%d", i)
		if i%9 == 0 {
			wide[i].Model = ""
		}
	}
	mixed := fleetRows(20_000, 3000)
	for i := range mixed {
		r := &mixed[i]
		if i%7 == 0 {
			r.Provider = strings.Repeat("p", i%40) // lengths 0 - 39, one byte apart
		}
		if i%5 == 0 {
			r.Path = strings.Repeat("/x", i%300) // lengths of one and two varint bytes
		}
		if i%256 == 17 {
			r.AnalysisID = "other" // a constant column's run broken
		}
	}
	times := mkRows("times", 0, 1000, base)
	east := time.FixedZone("east", 5*3600+1800)
	for i := range times {
		// Every time rule: the zero time, before 1970 with sub-millisecond
		// parts, out of range on either side (clamped), within the last
		// millisecond of the range, another zone.
		at := []time.Time{
			{},
			time.Date(1950, 6, 1, 12, 0, 0, 123_456_789+i, time.UTC),
			time.Date(1800, 1, 1, 0, 0, 0, i, time.UTC),
			time.Date(2300, 1, 1, 0, 0, 0, i, time.UTC),
			schema.EndTime.Add(-time.Duration(i%1000+1) * time.Microsecond),
			schema.MinTime.Add(time.Duration(i) * time.Microsecond),
			base.Add(time.Duration(i) * 1_234_567).In(east),
		}
		times[i].EmittedAt = at[i%len(at)]
		times[i].DecidedAt = at[(i/7+1)%len(at)].Add(time.Nanosecond) // never zero: a zero is the write's time
	}
	cases := []struct {
		name string
		rows []schema.Row
		want string
	}{
		{"fleet", fleetRows(20_000, 3000), "8010f962de296e8f80dab7c4c665f31107d796e95c57b59aaf66f220e643277f"},
		{"mixed", mixed, "ca4f3e562abe25f16e9315708da7726e4ac9af4be94b838e49bc3f10b0116ab7"},
		{"wide", wide, "0e47a4b923051b108d76c324ffcdea1f0f86466a83c8ac9f71d5af168327ca26"},
		{"times", times, "2d867d7f123a4ec5fa005415aecb90cac177d1dde93b1747fff354d6a0d1e128"},
		{"small", mkRows("small", 0, 300, base), "bf704768761a7bf6d9c346ad8139da7394c4c89c07d46bd7cd4e7ad75682a61b"},
	}
	b := (&ClickHouse{}).NewBatch() // reused: each case after a Reset
	for _, tc := range cases {
		b.Reset()
		handOffs(b, tc.rows)
		var out bytes.Buffer
		w := proto.NewWriter(&out, new(proto.Buffer))
		if err := (proto.Block{Columns: len(b.input), Rows: b.Len()}).WriteBlock(w, proto.Version, b.input); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(out.Bytes())
		if got := hex.EncodeToString(sum[:]); got != tc.want {
			t.Errorf("%s: the block's %d bytes have SHA-256 %s, want %s", tc.name, out.Len(), got, tc.want)
		}
	}
}

// TestBatchSameAddress: rows whose field is the same string (one address)
// share the key of the first within an Append; the next Append reads the
// value again, though at the same address, since the caller may have
// reused its memory in between.
func TestBatchSameAddress(t *testing.T) {
	b := (&ClickHouse{}).NewBatch()
	buf := []byte("model-a")
	rows := mkRows("same", 0, 3, base)
	for i := range rows {
		rows[i].Model = unsafe.String(unsafe.SliceData(buf), len(buf))
	}
	b.Append(rows)
	copy(buf, "model-b") // the caller reuses its memory
	b.Append(rows)
	var lc *lcStr
	for _, f := range b.lcCols {
		if f.off == offsetOf(func(r *schema.Row) *string { return &r.Model }) {
			lc = f.col
		}
	}
	var got []string
	for i := range lc.Rows() {
		got = append(got, lc.Row(i))
	}
	if want := []string{"model-a", "model-a", "model-a", "model-b", "model-b", "model-b"}; !slices.Equal(got, want) {
		t.Fatalf("model column %q, want %q", got, want)
	}
}
