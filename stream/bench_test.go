package stream

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// BenchmarkPipeline: calls per second from an in-process Kafka, through
// decoding, resolution and row building, into a sink that discards. The
// time includes start-up (reading 2331 listings, joining the group): run
// with a large -benchtime, e.g. -benchtime=300000x. consume-cpu-ns/call
// is the process's CPU time per call from the first write on (start-up
// left out), the in-process broker's share included.
func BenchmarkPipeline(b *testing.B) { benchPipeline(b, benchOpts{}) }

// BenchmarkPipelinePassthrough: the same with Passthrough on (calls decoded,
// not resolved): the difference is what resolution costs.
func BenchmarkPipelinePassthrough(b *testing.B) { benchPipeline(b, benchOpts{passthrough: true}) }

// BenchmarkPipelineColumns is BenchmarkPipeline into the ClickHouse
// sink's batches (sink.Batch: LowCardinality dictionaries, String columns
// in their wire form), discarded where they would be INSERTed: resolverd's
// work per call but the INSERT's encoding and write.
func BenchmarkPipelineColumns(b *testing.B) { benchPipeline(b, benchOpts{columns: true}) }

// columnSink is an appender.Batcher whose batches are sink.Batches that
// Write discards, counting their rows with wrote.
type columnSink struct{ wrote func(rows int) }

func (s columnSink) Write(context.Context, []schema.Row) error {
	panic("columnSink: the pipeline writes through its batches")
}

func (s columnSink) NewBatch() appender.Batch {
	return columnBatch{(&sink.ClickHouse{}).NewBatch(), s.wrote}
}

type columnBatch struct {
	*sink.Batch
	wrote func(rows int)
}

func (b columnBatch) Write(context.Context) error {
	b.wrote(b.Len())
	return nil
}

// BenchmarkPipelineCodec: the pipeline with the calls produced under each
// of Kafka's compression codecs (kgo's default, and ingest's, is
// snappy). Besides the wall time it reports the process's CPU time per
// call while the calls are produced (the producer and the in-process
// broker) and while the pipeline consumes them, from its first write on
// (the consumer, the broker's fetches, decompression, the rest of the
// pipeline; a sink that discards the rows), and the
// calls topic's bytes per call as the broker stores them.
func BenchmarkPipelineCodec(b *testing.B) {
	for _, cc := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	} {
		b.Run(cc.name, func(b *testing.B) { benchPipeline(b, benchOpts{codec: &cc.codec}) })
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// topicBytes is the size of topic's partitions as the broker stores them.
func topicBytes(b *testing.B, cl *kgo.Client, topic string) int64 {
	ctx := testContext(b, 10*time.Second)
	dirs, err := kadm.NewClient(cl).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	dirs.Each(func(d kadm.DescribedLogDir) {
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == topic {
				n += p.Size
			}
		})
	})
	return n
}

// benchOpts are the variants of benchPipeline.
type benchOpts struct {
	passthrough bool
	// codec: the calls are produced compressed with it, and the CPU times
	// and sizes BenchmarkPipelineCodec describes are reported.
	codec *kgo.CompressionCodec
	// columns: rows go into sink.Batches (columnSink).
	columns bool
}

// benchPipeline runs the pipeline over b.N calls produced before the
// timer starts.
func benchPipeline(b *testing.B, o benchOpts) {
	codec := o.codec
	c := newCluster(b, 3)
	prod := newProducer(b, c)
	if codec != nil {
		var err error
		if prod, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(*codec)); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(prod.Close)
	}
	produce(b, prod, listingsTopic, readLines(b, corpus("bfcl", "listings.jsonl")))
	calls := readLines(b, corpus("bfcl", "calls.jsonl"))
	keys := make([][]byte, len(calls))
	for i, l := range calls {
		keys[i] = keyOf(l)
	}
	const chunk = 20000
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i += chunk {
		rs := make([]*kgo.Record, 0, chunk)
		for j := i; j < min(i+chunk, b.N); j++ {
			rs = append(rs, &kgo.Record{Topic: callsTopic, Key: keys[j%len(calls)], Value: calls[j%len(calls)]})
		}
		produceRecords(b, prod, rs)
	}

	produced := cpuTime(b) - cpu0

	var n atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	// The consumer's CPU is counted from its first write on: start-up
	// (reading the listings, joining the group) is left out.
	var first sync.Once
	var firstCPU time.Duration
	var firstRows int64
	wrote := func(rows int) {
		first.Do(func() { firstCPU, firstRows = cpuTime(b), int64(rows) })
		if n.Add(int64(rows)) >= int64(b.N) {
			once.Do(func() { close(done) })
		}
	}
	var to appender.Sink = appender.SinkFunc(func(_ context.Context, rows []schema.Row) error {
		wrote(len(rows))
		return nil
	})
	if o.columns {
		to = columnSink{wrote}
	}
	cfg := testConfig(c)
	cfg.Passthrough = o.passthrough
	b.ReportAllocs()
	b.ResetTimer()
	began := time.Now()
	r := start(b, cfg, nil, to, nil)
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatalf("%d of %d rows after 5 minutes", n.Load(), b.N)
	}
	took, consumed := time.Since(began), cpuTime(b)-firstCPU
	b.StopTimer()
	r.stop(b)
	b.ReportMetric(float64(b.N)/took.Seconds(), "calls/s")
	b.ReportMetric(float64(consumed.Nanoseconds())/float64(int64(b.N)-firstRows), "consume-cpu-ns/call")
	if codec != nil {
		b.ReportMetric(float64(produced.Nanoseconds())/float64(b.N), "produce-cpu-ns/call")
		b.ReportMetric(float64(topicBytes(b, prod, callsTopic))/float64(b.N), "stored-B/call")
	}
}

// BenchmarkBatchAppendCorpus: the writer's share of a call, sink.Batch.Append,
// over rows as the pipeline's workers make them from the corpus's calls:
// each call decoded and resolved once, into a row of its own (the columns
// that repeat a value in every call, such as model or provider, hold a copy
// per row, as decoded calls do, where BenchmarkBatchAppendFleet's share one
// string), stamped as decide stamps them, the calls split into three
// partitions by their keys as kgo's default partitioner splits them. The
// batch takes hand-offs of up to 256 rows of one partition, the partitions
// in turn, round after round over the corpus, 50,000 rows per operation.
// The rows are made once, so they are not as fresh in the cache as a
// worker's just-decided hand-off, but not cold either. Reports ns per row.
func BenchmarkBatchAppendCorpus(b *testing.B) {
	store := registry.New()
	if _, err := check.LoadListingsFile(corpus("bfcl", "listings.jsonl"), store, nil); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	rd := resolve.RowDecider{Resolver: cfg.Resolver, Suggest: suggest.New()}
	const parts = 3
	part := kgo.StickyKeyPartitioner(nil).ForTopic(callsTopic)
	byPart := make([][]schema.Row, parts)
	snap, policy := store.Snapshot(), cfg.policyVersion() // one string, as the pipeline's
	for _, line := range readLines(b, corpus("bfcl", "calls.jsonl")) {
		p := part.Partition(&kgo.Record{Key: keyOf(line)}, parts)
		rows := append(byPart[p], schema.Row{})
		r := &rows[len(rows)-1]
		r.AnalysisID, r.ResolverBuild, r.PolicyVersion = cfg.AnalysisID, "test", policy
		r.Source = schema.SourceStream
		r.Topic, r.Partition, r.Offset = callsTopic, int32(p), int64(len(rows)-1)
		rd.DecideRow(snap, line, time.Time{}, r)
		byPart[p] = rows
	}
	var handOffs [][]schema.Row
	for from, more := 0, true; more; from += handOff {
		more = false
		for _, rows := range byPart {
			if from < len(rows) {
				handOffs = append(handOffs, rows[from:min(from+handOff, len(rows))])
				more = true
			}
		}
	}
	const n = 50_000
	batch := (&sink.ClickHouse{}).NewBatch()
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset()
		for i := 0; batch.Len() < n; i++ {
			h := handOffs[i%len(handOffs)]
			batch.Append(h[:min(len(h), n-batch.Len())])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}
