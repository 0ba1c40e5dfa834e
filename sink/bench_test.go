package sink

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ClickHouse/ch-go/proto"

	"github.com/toolaudit/toolaudit/schema"
)

// BenchmarkWrite writes 100k rows in batches of 10k per iteration (each
// iteration its own analysis, so nothing deduplicates) and reports rows/s,
// end to end: encoding, the wire, and the server's insert (table, rollup
// MV, codecs, indexes). Client and engine share the machine's cores.
func BenchmarkWrite(b *testing.B) {
	w := newWriter(b)
	const n, batch = 100_000, 10_000
	batches := make([][]schema.Row, 0, n/batch)
	for i := 0; i < n; i += batch {
		batches = append(batches, mkRows("", i, batch, base.Add(time.Hour)))
	}
	ctx := context.Background()
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		analysis := fmt.Sprintf("bench-%d", it)
		for _, rows := range batches {
			for i := range rows {
				rows[i].AnalysisID = analysis
			}
			if err := w.Write(ctx, rows); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkBatchAppend: encoding rows into a reused Batch's columns, the
// part of a write that runs while the pipeline gathers a batch (no
// server). Reports ns per row.
func BenchmarkBatchAppend(b *testing.B) {
	c := &ClickHouse{}
	batch := c.NewBatch()
	rows := mkRows("bench", 0, 50_000, base.Add(time.Hour))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		batch.Reset()
		for i := 0; i < len(rows); i += 256 {
			batch.Append(rows[i:min(i+256, len(rows))])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// BenchmarkBatchEncode: a 50k-row batch appended and written out in the
// native protocol's block form (to io.Discard, no server): the client's
// whole share of an INSERT. Reports ns per row.
func BenchmarkBatchEncode(b *testing.B) {
	c := &ClickHouse{}
	batch := c.NewBatch()
	rows := mkRows("bench", 0, 50_000, base.Add(time.Hour))
	w := proto.NewWriter(io.Discard, new(proto.Buffer))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		batch.Reset()
		for i := 0; i < len(rows); i += 256 {
			batch.Append(rows[i:min(i+256, len(rows))])
		}
		blk := proto.Block{Columns: len(batch.input), Rows: batch.Len()}
		if err := blk.WriteBlock(w, proto.Version, batch.input); err != nil {
			b.Fatal(err)
		}
		if _, err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
