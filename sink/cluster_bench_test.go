package sink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-faster/city"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
)

// BenchmarkClusterWrite compares the two ways of writing decisions to a
// two-shard cluster (two engines, no replicas), 100k rows per iteration
// in one INSERT as the pipeline's writer does, each iteration its own
// analysis: "distributed" inserts into the Distributed table of one
// server (distributed_foreground_insert: that server splits the block by
// cityHash64(call_key) and inserts each part into its shard before it
// acknowledges), "direct" splits the rows in Go by the same hash and
// inserts each part into its shard's local table itself, concurrently.
// The engines and the client share the machine's cores. -count would run
// one way's rounds after the other's on the same engines (the later pays
// for the earlier's merges): compare them one way per process, on fresh
// engines, alternating (scripts/bench-cluster.sh).
func BenchmarkClusterWrite(b *testing.B) {
	srvs := chenginetest.StartCluster(b, "two", 2)
	ctx := context.Background()
	const n = 100_000
	rows := mkRows("", 0, n, base.Add(time.Hour))
	cl := Cluster{Name: "two"}
	var dist *ClickHouse
	for i, s := range srvs {
		w := newWriterAt(b, s.Addr(), "bench_dist", WithCluster(cl))
		if i == 0 {
			dist = w
		}
	}
	direct := []*ClickHouse{newWriterAt(b, srvs[0].Addr(), "bench_direct"), newWriterAt(b, srvs[1].Addr(), "bench_direct")}
	// The shard of a row as the Distributed table computes it: the
	// sharding key modulo the total weight (1 per shard).
	var parts [2][]schema.Row
	for _, r := range rows {
		s := city.CH64([]byte(r.CallKey)) % 2
		parts[s] = append(parts[s], r)
	}
	stamp := func(rs []schema.Row, analysis string) {
		for i := range rs {
			rs[i].AnalysisID = analysis
		}
	}
	b.Run("distributed", func(b *testing.B) {
		for it := 0; it < b.N; it++ {
			stamp(rows, fmt.Sprintf("dist-%d-%d", b.N, it))
			if err := dist.Write(ctx, rows); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("direct", func(b *testing.B) {
		for it := 0; it < b.N; it++ {
			var g errgroup.Group
			for s := range parts {
				stamp(parts[s], fmt.Sprintf("direct-%d-%d", b.N, it))
				g.Go(func() error { return direct[s].Write(ctx, parts[s]) })
			}
			if err := g.Wait(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// The Go hash is ClickHouse's: every row the direct writes put on a
	// shard is one the Distributed table would have put there.
	for s, w := range direct {
		if bad := count(b, w, fmt.Sprintf("SELECT countIf(cityHash64(call_key) %% 2 != %d) FROM {db}.decisions", s)); bad != 0 {
			b.Fatalf("shard %d holds %d rows of the other shard", s, bad)
		}
	}
}
