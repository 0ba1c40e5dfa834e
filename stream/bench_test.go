package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// BenchmarkPipeline: calls per second from an in-process Kafka, through
// decoding, resolution and row building, into a sink that discards. The
// time includes start-up (reading 2331 listings, joining the group): run
// with a large -benchtime, e.g. -benchtime=300000x.
func BenchmarkPipeline(b *testing.B) { benchPipeline(b, false) }

// BenchmarkPipelinePassthrough: the same with Passthrough on (calls decoded,
// not resolved): the difference is what resolution costs.
func BenchmarkPipelinePassthrough(b *testing.B) { benchPipeline(b, true) }

func benchPipeline(b *testing.B, passthrough bool) {
	c := newCluster(b, 3)
	prod := newProducer(b, c)
	produce(b, prod, listingsTopic, readLines(b, corpus("bfcl", "listings.jsonl")))
	calls := readLines(b, corpus("bfcl", "calls.jsonl"))
	keys := make([][]byte, len(calls))
	for i, l := range calls {
		keys[i] = keyOf(l)
	}
	const chunk = 20000
	for i := 0; i < b.N; i += chunk {
		rs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, b.N); j++ {
			rs = append(rs, &kgo.Record{Topic: callsTopic, Key: keys[j%len(calls)], Value: calls[j%len(calls)]})
		}
		produceRecords(b, prod, rs)
	}

	var n atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	sink := appender.SinkFunc(func(_ context.Context, rows []schema.Row) error {
		if n.Add(int64(len(rows))) >= int64(b.N) {
			once.Do(func() { close(done) })
		}
		return nil
	})
	cfg := testConfig(c)
	cfg.Passthrough = passthrough
	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	r := start(b, cfg, nil, sink, nil)
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d rows after 5 minutes", n.Load(), b.N)
	}
	took := time.Since(began)
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(float64(b.N)/took.Seconds(), "calls/s")
}
