package sink

import (
	"context"
	"fmt"
	"io"
	"strings"
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

// handOffs appends rows to batch 256 at a time, as the pipeline's workers
// hand them off.
func handOffs(batch *Batch, rows []schema.Row) {
	for i := 0; i < len(rows); i += 256 {
		batch.Append(rows[i:min(i+256, len(rows))])
	}
}

// BenchmarkBatchAppend: encoding rows into a reused Batch's columns, the
// part of a write that runs while the pipeline gathers a batch (no
// server). Reports ns per row.
func BenchmarkBatchAppend(b *testing.B) {
	benchAppend(b, mkRows("bench", 0, 50_000, base.Add(time.Hour)))
}

func benchAppend(b *testing.B, rows []schema.Row) {
	batch := (&ClickHouse{}).NewBatch()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		batch.Reset()
		handOffs(batch, rows)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}

// BenchmarkBatchAppendFleet is BenchmarkBatchAppend with the rows of a
// mixed fleet, as the pipeline's corpus makes them: 3,000 registries,
// tools and digests in no order, the call's strings fresh per row (as
// decoded), the registry's shared between the rows that resolve to them.
func BenchmarkBatchAppendFleet(b *testing.B) { benchAppend(b, fleetRows(50_000, 3000)) }

// fleetRows returns n rows of distinct registries, tools and digests
// drawn in no order.
func fleetRows(n, distinct int) []schema.Row {
	type version struct{ id, tool, server, digest string }
	vs := make([]version, distinct)
	for i := range vs {
		vs[i] = version{fmt.Sprintf("rv-%d-%x", i, i*7919), fmt.Sprintf("tool_%d", i), "", fmt.Sprintf("sha256:%064x", i*104729)}
	}
	rows := mkRows("bench", 0, n, base.Add(time.Hour))
	for k := range rows {
		r := &rows[k]
		i := (k * 7919) % distinct
		v := &vs[i]
		r.ResolvedTool, r.ResolvedServer, r.RegistryVersion, r.CurrentDigest = v.tool, v.server, v.id, v.digest
		r.Registry = fmt.Sprintf("bfcl-simple_python_%d", i)
		r.Tool = strings.Clone(v.tool)
		r.SeenDigest = strings.Clone(v.digest)
		r.SessionID = "s-" + r.Registry
	}
	return rows
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
		handOffs(batch, rows)
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

// BenchmarkLowCardinalityAppend: 100k values drawn from 3,000 distinct
// ones in no order (tool and registry names of a mixed fleet, the
// benchmark's BFCL share), each passed as a fresh string as decoded calls
// pass them. Reports ns per value.
func BenchmarkLowCardinalityAppend(b *testing.B) {
	const n, distinct = 100_000, 3000
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("bfcl-simple_python_%d", (i*7919)%distinct)
	}
	var c lcStr
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		for _, v := range vals {
			c.Append(v)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/value")
}

// BenchmarkBatchFirstFill: a new batch filled to 100k rows, as the
// pipeline's first two batches are at start-up, its buffers grown step by
// step or reserved (Reserve) after the first hand-off.
func BenchmarkBatchFirstFill(b *testing.B) {
	rows := mkRows("bench", 0, 100_000, base.Add(time.Hour))
	for _, reserve := range []bool{false, true} {
		b.Run(fmt.Sprintf("reserve=%v", reserve), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				batch := (&ClickHouse{}).NewBatch()
				if reserve {
					batch.Reserve(len(rows), 64<<20)
				}
				handOffs(batch, rows)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
		})
	}
}
