package reanalyze

import (
	"context"
	"testing"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// discard is a Batch that keeps the count and size of its rows, as the
// stream's benchmark sink does: what is measured is reading, deciding and
// handing rows over, not the store.
type discard struct{ rows, bytes int }

func (d *discard) Append(rows []schema.Row) {
	d.rows += len(rows)
	for i := range rows {
		d.bytes += int(unsafe.Sizeof(rows[i])) + len(rows[i].ArgsShape) + len(rows[i].Reason)
	}
}
func (d *discard) AppendEvents([]schema.CallEvent) {}
func (d *discard) Archives() bool                  { return false }
func (d *discard) Reserve(int, int)                {}
func (d *discard) Len() int                        { return d.rows }
func (d *discard) Size() int                       { return d.bytes }
func (d *discard) Write(context.Context) error     { return nil }
func (d *discard) Reset()                          { d.rows, d.bytes = 0, 0 }

// BenchmarkRunKafka: calls per second of a re-analysis from an in-process
// Kafka (three partitions of BFCL calls, the records' timestamps their
// emitted_at), through decoding, resolution and row building, into a
// batch that discards: the counterpart of stream's BenchmarkPipeline. The
// time includes planning the window, not loading the listings. Run with
// a large -benchtime, e.g. -benchtime=300000x.
func BenchmarkRunKafka(b *testing.B) {
	c := newCluster(b, 3)
	var ls []*kgo.Record
	for _, l := range readLines(b, corpus("bfcl", "listings.jsonl")) {
		ls = append(ls, &kgo.Record{Topic: listingsTopic, Value: l})
	}
	produce(b, c, ls)
	calls := callRecords(readLines(b, corpus("bfcl", "calls.jsonl")), sampleStart)
	const chunk = 20000
	for i := 0; i < b.N; i += chunk {
		rs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, b.N); j++ {
			r := *calls[j%len(calls)]
			rs = append(rs, &r)
		}
		produce(b, c, rs)
	}
	vs := history(b, c)
	cfg := testConfig("bench", day)
	cfg.Window.From = time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.ResetTimer()
	r, err := New(cfg, vs, kafkaSource(c, cfg.Window, 0), func() appender.Batch { return &discard{} }, nil)
	if err != nil {
		b.Fatal(err)
	}
	sum, err := r.Run(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	if sum.Decided != int64(b.N) {
		b.Fatalf("decided %d of %d", sum.Decided, b.N)
	}
	b.ReportMetric(float64(b.N)/sum.Took.Seconds(), "calls/s")
}
