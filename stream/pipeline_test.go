package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// TestCorpus: every call of the corpus, produced to Kafka, reaches the sink
// once, decided exactly as `resolverd check` decides the same files, and
// the group's offsets end at the topic's end.
func TestCorpus(t *testing.T) {
	for _, part := range []string{"sample", "bfcl"} {
		t.Run(part, func(t *testing.T) {
			c := newCluster(t, 3)
			prod := newProducer(t, c)
			produce(t, prod, listingsTopic, readLines(t, corpus(part, "listings.jsonl")))
			calls := readLines(t, corpus(part, "calls.jsonl"))
			produce(t, prod, callsTopic, calls)
			want := expectedClasses(t, corpus(part, "listings.jsonl"), corpus(part, "calls.jsonl"))
			if len(want) != len(calls) {
				t.Fatalf("offline decided %d of %d calls", len(want), len(calls))
			}

			sink := newRecSink()
			reg := prometheus.NewPedanticRegistry()
			r := start(t, testConfig(c), nil, sink, reg)
			eventually(t, 30*time.Second, "every call decided", func() bool { return sink.unique() >= len(calls) })
			adm := admin(t, c)
			eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
			if !r.p.Ready() {
				t.Error("not ready after deciding everything")
			}
			// Client metrics (kprom) go away with the clients: read them first.
			if n := metricValue(t, reg, "toolaudit_kafka_fetch_bytes_total", map[string]string{"client_id": "resolverd-calls"}); n == 0 {
				t.Error("no kprom fetch_bytes_total for the calls client")
			}
			if err := r.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if r.p.Ready() {
				t.Error("ready after stopping")
			}

			rows, total := sink.snapshot()
			if len(rows) != len(calls) || total != len(calls) {
				t.Fatalf("%d unique rows, %d written, want %d", len(rows), total, len(calls))
			}
			for id, cls := range want {
				row, ok := rows[id]
				switch {
				case !ok:
					t.Errorf("%s: no row", id)
				case row.Class != cls:
					t.Errorf("%s: class %s, offline %s (%s)", id, row.Class, cls, row.Reason)
				case row.Verdict != schema.VerdictOf(cls):
					t.Errorf("%s: verdict %s", id, row.Verdict)
				}
			}
			for _, row := range rows {
				if row.Class == schema.Malformed {
					continue
				}
				if row.AnalysisID != "live" || row.ResolverBuild != "test" || row.PolicyVersion != "strict" ||
					row.Topic != callsTopic || row.DecidedAt.IsZero() || row.EmittedAt.IsZero() ||
					!strings.HasPrefix(row.ArgsHash, "sha256:") || row.ArgsShape == "" || row.ArgsRaw != "" {
					t.Fatalf("row not stamped as configured: %+v", row)
				}
			}
			if n := metricValue(t, reg, "toolaudit_stream_decisions_total", nil); int(n) != len(calls) {
				t.Errorf("decisions_total %v, want %d", n, len(calls))
			}
			if n := metricValue(t, reg, "toolaudit_stream_listings_applied_total", nil); int(n) != len(readLines(t, corpus(part, "listings.jsonl"))) {
				t.Errorf("listings_applied_total %v", n)
			}
		})
	}
}

type poison struct {
	Value   string `json:"value"`
	Want    string `json:"want"`     // substring of the reason
	EventID string `json:"event_id"` // "" when the record has none
}

// TestPoisonRecords: undecodable records between good ones each become a
// MALFORMED row and a DLQ record carrying the original and where it came
// from; every other call is decided; nothing is lost.
func TestPoisonRecords(t *testing.T) {
	var poisons []poison
	for _, l := range readLines(t, "testdata/poison.jsonl") {
		var p poison
		if err := json.Unmarshal(l, &p); err != nil {
			t.Fatalf("testdata/poison.jsonl: %v", err)
		}
		poisons = append(poisons, p)
	}
	c := newCluster(t, 3)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus("sample", "listings.jsonl")))
	calls := readLines(t, corpus("sample", "calls.jsonl"))
	want := expectedClasses(t, corpus("sample", "listings.jsonl"), corpus("sample", "calls.jsonl"))

	// Each poison record goes right after a call, on that call's partition.
	var rs []*kgo.Record
	bad := map[*kgo.Record]poison{}
	for i, l := range calls {
		rs = append(rs, &kgo.Record{Topic: callsTopic, Key: keyOf(l), Value: l})
		if i%10 == 5 && i/10 < len(poisons) {
			p := poisons[i/10]
			r := &kgo.Record{Topic: callsTopic, Key: keyOf(l), Value: []byte(p.Value),
				Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-" + strconv.Itoa(i))}}}
			rs = append(rs, r)
			bad[r] = p
		}
	}
	if len(bad) != len(poisons) {
		t.Fatalf("placed %d of %d poison records", len(bad), len(poisons))
	}
	produceRecords(t, prod, rs)

	sink := newRecSink()
	reg := prometheus.NewRegistry()
	r := start(t, testConfig(c), nil, sink, reg)
	eventually(t, 30*time.Second, "every record decided", func() bool { return sink.unique() >= len(calls)+len(poisons) })
	adm := admin(t, c)
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	rows, _ := sink.snapshot()
	if len(rows) != len(calls)+len(poisons) {
		t.Fatalf("%d rows, want %d", len(rows), len(calls)+len(poisons))
	}
	for id, cls := range want {
		if rows[id].Class != cls {
			t.Errorf("%s: class %s, want %s", id, rows[id].Class, cls)
		}
	}
	malformed := len(poisons) // and those of the corpus
	for _, cls := range want {
		if cls == schema.Malformed {
			malformed++
		}
	}
	dlq := consumeAll(t, c, dlqTopic, malformed)
	for r, p := range bad {
		key := p.EventID
		if key == "" {
			key = schema.KafkaCallKey(r.Topic, r.Partition, r.Offset)
		}
		row, ok := rows[key]
		if !ok || row.Class != schema.Malformed || !strings.Contains(row.Reason, p.Want) ||
			row.Partition != r.Partition || row.Offset != r.Offset || row.ArgsHash != "" {
			t.Errorf("poison %q: row %+v (found %v), want MALFORMED %q", p.Value, row, ok, p.Want)
		}
		d, ok := dlq[fmt.Sprintf("%d/%d", r.Partition, r.Offset)]
		if !ok {
			t.Errorf("poison %q (%d/%d): no DLQ record", p.Value, r.Partition, r.Offset)
			continue
		}
		hdr := map[string]string{}
		for _, h := range d.Headers {
			hdr[h.Key] = string(h.Value)
		}
		if string(d.Value) != p.Value || string(d.Key) != string(r.Key) ||
			hdr["error"] != row.Reason || hdr["source-topic"] != callsTopic ||
			hdr["source-partition"] != strconv.Itoa(int(r.Partition)) ||
			hdr["source-offset"] != strconv.FormatInt(r.Offset, 10) || hdr["trace"] != string(r.Headers[0].Value) {
			t.Errorf("DLQ record %q headers %v", d.Value, hdr)
		}
	}
	if n := metricValue(t, reg, "toolaudit_stream_dlq_records_total", nil); int(n) != malformed {
		t.Errorf("dlq_records_total %v, want %d", n, malformed)
	}
	if n := metricValue(t, reg, "toolaudit_stream_decisions_total", map[string]string{"class": "MALFORMED"}); int(n) != malformed {
		t.Errorf("MALFORMED decisions %v, want %d", n, malformed)
	}
}

// consumeAll reads n records of topic, indexed by their source
// partition/offset headers.
func consumeAll(t *testing.T, c interface{ ListenAddrs() []string }, topic string, n int) map[string]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t, 10*time.Second)
	out := map[string]*kgo.Record{}
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of %s", len(out), n, topic)
		}
		fs.EachRecord(func(r *kgo.Record) {
			out[headerValue(r, "source-partition")+"/"+headerValue(r, "source-offset")] = r
		})
	}
	return out
}

// TestSinkFailing: while the sink fails, nothing is committed and the
// partitions pause instead of buffering without bound; once it recovers,
// every call is written, none twice, and the lag returns to zero.
func TestSinkFailing(t *testing.T) {
	c, calls := seedCorpus(t, 3, "sample")

	sink := newRecSink()
	sink.failing.Store(true)
	reg := prometheus.NewRegistry()
	cfg := testConfig(c)
	cfg.BatchRows = 20
	cfg.MaxPartitionBuffer = 4 << 10 // a few records: fetching must pause
	r := start(t, cfg, nil, sink, reg)
	eventually(t, 10*time.Second, "sink retried", func() bool { return sink.failures.Load() >= 15 })
	adm := admin(t, c)
	if committed, _ := offsets(t, adm, "resolverd"); len(committed) != 0 {
		t.Fatalf("offsets committed while the sink fails: %v", committed)
	}
	if n := metricValue(t, reg, "toolaudit_stream_partition_pauses_total", nil); n == 0 {
		t.Error("no partition paused while its worker was stalled")
	}
	if n := metricValue(t, reg, "toolaudit_stream_consumer_lag", nil); n == 0 {
		t.Error("no lag reported while stalled")
	}
	sink.failing.Store(false)
	eventually(t, 30*time.Second, "every call written", func() bool { return sink.unique() >= len(calls) })
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
	eventually(t, 5*time.Second, "lag back to zero", func() bool {
		return metricValue(t, reg, "toolaudit_stream_consumer_lag", nil) == 0
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	_, total := sink.snapshot()
	if total != len(calls) {
		t.Errorf("%d rows written for %d calls", total, len(calls))
	}
	if n := metricValue(t, reg, "toolaudit_stream_sink_retries_total", nil); n < 15 {
		t.Errorf("sink_retries_total %v", n)
	}
}

// TestPermanentSinkError: a permanent error stops the pipeline, which
// returns it without committing.
func TestPermanentSinkError(t *testing.T) {
	c := newCluster(t, 1)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus("sample", "listings.jsonl")))
	produce(t, prod, callsTopic, readLines(t, corpus("sample", "calls.jsonl")))
	sink := appender.SinkFunc(func(context.Context, []schema.Row) error {
		return appender.Permanent(fmt.Errorf("column mismatch"))
	})
	r := start(t, testConfig(c), nil, sink, nil)
	select {
	case err := <-r.done:
		close(r.done)
		if !appender.IsPermanent(err) || !strings.Contains(err.Error(), "column mismatch") {
			t.Fatalf("Run = %v, want the permanent error", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("pipeline did not stop on a permanent sink error")
	}
	if committed, _ := offsets(t, admin(t, c), "resolverd"); len(committed) != 0 {
		t.Fatalf("offsets committed: %v", committed)
	}
}

// lateCall is a call on registry "late" that only the listing produced
// after it makes resolvable.
func lateCall(i int, at time.Time) []byte {
	return fmt.Appendf(nil, `{"type":"call","event_id":"late-%d","emitted_at":%q,"registry":"late","session_id":"s-%d","tool":"lookup","arguments":{"q":"x"}}`,
		i, at.UTC().Format(time.RFC3339Nano), i)
}

func lateListing(at time.Time) []byte {
	return fmt.Appendf(nil, `{"type":"listing","event_id":"l-late","observed_at":%q,"registry":"late","server":"","op":"snapshot","tools":[{"name":"lookup","inputSchema":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}]}`,
		at.UTC().Format(time.RFC3339Nano))
}

// TestLateListing: calls produced first and their listing 300ms later are
// decided against that listing when the hold covers the delay, and not
// without a hold (the control).
func TestLateListing(t *testing.T) {
	for _, tc := range []struct {
		hold time.Duration
		want schema.Class
	}{
		{time.Second, schema.OK},
		{0, schema.H1},
	} {
		t.Run(fmt.Sprintf("hold=%v", tc.hold), func(t *testing.T) {
			c := newCluster(t, 3)
			prod := newProducer(t, c)
			produce(t, prod, listingsTopic, readLines(t, corpus("sample", "listings.jsonl")))
			cfg := testConfig(c)
			cfg.ListingHold = tc.hold
			sink := newRecSink()
			r := start(t, cfg, nil, sink, nil)
			eventually(t, 10*time.Second, "ready", r.p.Ready)

			const n = 30
			emitted := time.Now()
			var calls [][]byte
			for i := range n {
				calls = append(calls, lateCall(i, emitted))
			}
			produce(t, prod, callsTopic, calls)
			time.Sleep(300 * time.Millisecond)
			produce(t, prod, listingsTopic, [][]byte{lateListing(emitted.Add(-time.Second))})

			eventually(t, 10*time.Second, "late calls decided", func() bool { return sink.unique() >= n })
			rows, _ := sink.snapshot()
			for i := range n {
				row := rows["late-"+strconv.Itoa(i)]
				if row.Class != tc.want {
					t.Errorf("late-%d: %s (%s), want %s", i, row.Class, row.Reason, tc.want)
				}
				if tc.hold > 0 && row.DecidedAt.Sub(emitted) < tc.hold {
					t.Errorf("late-%d decided %v after production, before the hold", i, row.DecidedAt.Sub(emitted))
				}
			}
		})
	}
}

// TestBacklogHoldOnce: a backlog that arrived before the pipeline started
// waits for the hold once, not once per fetch, even when fetching pauses
// and resumes many times.
func TestBacklogHoldOnce(t *testing.T) {
	c := newCluster(t, 3)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus("bfcl", "listings.jsonl")))
	calls := readLines(t, corpus("bfcl", "calls.jsonl"))
	for i := 0; i < len(calls); i += 20 { // small record batches: small fetches
		produce(t, prod, callsTopic, calls[i:min(i+20, len(calls))])
	}

	const hold = time.Second
	cfg := testConfig(c)
	cfg.ListingHold = hold
	cfg.BatchRows = 50
	// Small fetches into a small buffer, and a sink slower than Kafka:
	// fetching pauses and resumes many times.
	cfg.MaxPartitionBuffer = 16 << 10
	cfg.KafkaOpts = append(cfg.KafkaOpts, kgo.FetchMaxPartitionBytes(4<<10))
	sink := newRecSink()
	reg := prometheus.NewRegistry()
	begin := time.Now()
	start(t, cfg, nil, appender.SinkFunc(func(ctx context.Context, rows []schema.Row) error {
		time.Sleep(30 * time.Millisecond)
		return sink.Write(ctx, rows)
	}), reg)
	eventually(t, 30*time.Second, "backlog decided", func() bool { return sink.unique() >= len(calls) })
	took := time.Since(begin)
	pauses := metricValue(t, reg, "toolaudit_stream_partition_pauses_total", nil)
	t.Logf("%d calls with hold %v in %v (%v pauses)", len(calls), hold, took, pauses)
	// Were every resumed fetch held again, this would take pauses × hold.
	if pauses < 8 {
		t.Errorf("only %v pauses: the test does not exercise resumes", pauses)
	}
	if took > hold+3*time.Second {
		t.Errorf("backlog took %v: the hold stalls resumed fetches", took)
	}
}

// TestRestart: a pipeline stopped mid-stream, then a second one in the
// same group: every call is decided, from the committed offsets on.
func TestRestart(t *testing.T) {
	c := newCluster(t, 3)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus("bfcl", "listings.jsonl")))
	calls := readLines(t, corpus("bfcl", "calls.jsonl"))
	produce(t, prod, callsTopic, calls)
	cfg := testConfig(c)
	cfg.BatchRows = 100

	first := newRecSink()
	var r1 *running
	var once atomic.Bool
	first.onWrite = func(total int) {
		if total < 1000 {
			return
		}
		if once.CompareAndSwap(false, true) {
			go r1.cancel()
		}
		// A slow sink from here on holds the workers back (two batches
		// in memory at most), so that the first pipeline stops with calls
		// left however fast the machine decides them.
		time.Sleep(20 * time.Millisecond)
	}
	r1 = start(t, cfg, nil, first, nil)
	eventually(t, 30*time.Second, "first pipeline to write 1000 rows", func() bool { return once.Load() })
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	got1, _ := first.snapshot()
	if len(got1) >= len(calls) {
		t.Fatalf("first pipeline decided all %d calls: nothing left to restart", len(got1))
	}
	adm := admin(t, c)
	committed, _ := offsets(t, adm, "resolverd")
	var sum int64
	for _, o := range committed {
		sum += o
	}
	if sum == 0 || int(sum) > len(got1) {
		t.Fatalf("first pipeline committed %d records and wrote %d rows", sum, len(got1))
	}

	second := newRecSink()
	start(t, cfg, nil, second, nil)
	eventually(t, 30*time.Second, "second pipeline to finish", func() bool {
		return second.unique() >= len(calls)-int(sum)
	})
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
	got2, total2 := second.snapshot()
	union := map[string]bool{}
	dups := 0
	for k := range got1 {
		union[k] = true
	}
	for k := range got2 {
		if union[k] {
			dups++
		}
		union[k] = true
	}
	if len(union) != len(calls) {
		t.Fatalf("%d unique calls decided, want %d", len(union), len(calls))
	}
	if total2 != len(calls)-int(sum) {
		t.Errorf("second pipeline wrote %d rows, want %d (from the committed offsets on)", total2, len(calls)-int(sum))
	}
	t.Logf("first: %d rows (%d committed), second: %d rows, decided twice: %d", len(got1), sum, len(got2), dups)
}

// TestTwoPipelines: two instances in one group split six partitions and
// decide every call between them, whether the second joins before the
// calls arrive or in the middle of them (its partitions are revoked from
// the first, which commits what it decided before letting go).
func TestTwoPipelines(t *testing.T) {
	for _, midStream := range []bool{false, true} {
		name := "split-first"
		if midStream {
			name = "join-mid-stream"
		}
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, 6)
			prod := newProducer(t, c)
			produce(t, prod, listingsTopic, readLines(t, corpus("bfcl", "listings.jsonl")))
			calls := readLines(t, corpus("bfcl", "calls.jsonl"))
			cfg := testConfig(c)
			cfg.BatchRows = 20
			sinks := []*recSink{newRecSink(), newRecSink()}
			// joining is set while the second pipeline joins mid-stream:
			// the first then writes ten times slower, so that it cannot
			// finish every partition before the rebalance hands some over
			// (a bounded sleep, never a wait on the rebalance, which
			// itself waits for the first pipeline's writes to drain).
			var joining atomic.Bool
			slow := func(s *recSink) appender.Sink { // about 1000 rows/s per partition
				return appender.SinkFunc(func(ctx context.Context, rows []schema.Row) error {
					d := 20 * time.Millisecond
					if joining.Load() {
						d = 200 * time.Millisecond
					}
					time.Sleep(d)
					return s.Write(ctx, rows)
				})
			}
			var rs []*running
			if midStream {
				produce(t, prod, callsTopic, calls)
				rs = append(rs, start(t, cfg, nil, slow(sinks[0]), nil))
				eventually(t, 10*time.Second, "first pipeline under way", func() bool { return sinks[0].unique() >= 200 })
				joining.Store(true)
				rs = append(rs, start(t, cfg, nil, slow(sinks[1]), nil))
			} else {
				rs = append(rs, start(t, cfg, nil, slow(sinks[0]), nil), start(t, cfg, nil, slow(sinks[1]), nil))
			}
			eventually(t, 20*time.Second, "six partitions split between two ready pipelines", func() bool {
				a, b := rs[0].p.assignedPartitions(), rs[1].p.assignedPartitions()
				return rs[0].p.Ready() && rs[1].p.Ready() && len(a) > 0 && len(b) > 0 && len(a)+len(b) == 6
			})
			joining.Store(false)
			if !midStream {
				produce(t, prod, callsTopic, calls)
			}
			eventually(t, 30*time.Second, "every call decided", func() bool {
				n := map[string]bool{}
				for _, s := range sinks {
					rows, _ := s.snapshot()
					for k := range rows {
						n[k] = true
					}
				}
				return len(n) >= len(calls)
			})
			adm := admin(t, c)
			eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
			union := map[string]bool{}
			written := 0
			for i, s := range sinks {
				rows, total := s.snapshot()
				if len(rows) == 0 {
					t.Errorf("pipeline %d decided nothing", i)
				}
				written += total
				for k := range rows {
					union[k] = true
				}
			}
			if len(union) != len(calls) {
				t.Fatalf("%d unique calls, want %d", len(union), len(calls))
			}
			if written != len(calls) {
				t.Errorf("%d rows written for %d calls: a revoked partition was not committed before it moved", written, len(calls))
			}
			t.Logf("partitions: %v / %v; rows %d / %d", rs[0].p.assignedPartitions(), rs[1].p.assignedPartitions(),
				sinks[0].unique(), sinks[1].unique())
		})
	}
}

// TestKeepRawArgsAndPassthrough checks the two row-shaping switches.
func TestKeepRawArgsAndPassthrough(t *testing.T) {
	c := newCluster(t, 1)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus("sample", "listings.jsonl")))
	calls := readLines(t, corpus("sample", "calls.jsonl"))[:20]
	produce(t, prod, callsTopic, calls)

	cfg := testConfig(c)
	cfg.KeepRawArgs = true
	cfg.Group = "raw"
	sink := newRecSink()
	r := start(t, cfg, registry.New(), sink, nil)
	eventually(t, 10*time.Second, "calls decided", func() bool { return sink.unique() >= len(calls) })
	r.stop(t)
	rows, _ := sink.snapshot()
	for _, row := range rows {
		if row.Class != schema.Malformed && !strings.HasPrefix(row.ArgsRaw, "{") {
			t.Fatalf("KeepRawArgs: ArgsRaw %q", row.ArgsRaw)
		}
	}

	cfg.KeepRawArgs, cfg.Passthrough, cfg.Group = false, true, "pass"
	sink = newRecSink()
	r = start(t, cfg, nil, sink, nil)
	eventually(t, 10*time.Second, "calls passed through", func() bool { return sink.unique() >= len(calls) })
	r.stop(t)
	rows, _ = sink.snapshot()
	// Passthrough: every call stored, decoded but undecided; only
	// undecodable ones are classified (MALFORMED).
	want := expectedClasses(t, corpus("sample", "listings.jsonl"), corpus("sample", "calls.jsonl"))
	for k, row := range rows {
		switch {
		case want[k] == schema.Malformed && row.Class == schema.Malformed:
		case want[k] != schema.Malformed && row.Class == "" && row.EventID == k && row.Tool != "" &&
			row.ArgsHash != "" && row.ResolvedTool == "" && row.RegistryVersion == "":
		default:
			t.Fatalf("passthrough row %q (offline class %q): %+v", k, want[k], row)
		}
	}
}

// TestNoDecisionBeforeCatchUp: without a readable listings topic nothing
// is decided and the pipeline is not ready; once the listings can be read,
// the waiting calls are decided against them. (The hold keeps the calls
// from being decided against the new topic while it is still empty.)
func TestNoDecisionBeforeCatchUp(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, callsTopic, dlqTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod := newProducer(t, c)
	calls := readLines(t, corpus("sample", "calls.jsonl"))
	produce(t, prod, callsTopic, calls)
	sink := newRecSink()
	cfg := testConfig(c)
	cfg.ListingHold = 2 * time.Second
	cfg.KafkaOpts = append(cfg.KafkaOpts, kgo.MetadataMinAge(50*time.Millisecond), kgo.MetadataMaxAge(200*time.Millisecond))
	r := start(t, cfg, nil, sink, nil)
	eventually(t, 10*time.Second, "group joined", r.p.joined.Load)
	time.Sleep(300 * time.Millisecond)
	if n := sink.unique(); n != 0 || r.p.Ready() {
		t.Fatalf("%d calls decided (ready %v) with no listings topic", n, r.p.Ready())
	}
	ctx := testContext(t, 10*time.Second)
	if _, err := admin(t, c).CreateTopic(ctx, 3, 1, nil, listingsTopic); err != nil {
		t.Fatal(err)
	}
	produce(t, prod, listingsTopic, readLines(t, corpus("sample", "listings.jsonl")))
	eventually(t, 20*time.Second, "every call decided", func() bool { return sink.unique() >= len(calls) })
	if !r.p.Ready() {
		t.Error("not ready")
	}
	want := expectedClasses(t, corpus("sample", "listings.jsonl"), corpus("sample", "calls.jsonl"))
	rows, _ := sink.snapshot()
	for id, cls := range want {
		if rows[id].Class != cls {
			t.Errorf("%s: %s, want %s", id, rows[id].Class, cls)
		}
	}
}

// changeLog is a registry store that reports its changes, and what it
// reported.
type changeLog struct {
	store *registry.Store
	mu    sync.Mutex
	rows  map[registry.ChangeKey]registry.Change // the last report of each key
}

func newChangeLog() *changeLog {
	cl := &changeLog{rows: map[registry.ChangeKey]registry.Change{}}
	cl.store = registry.New(registry.WithChanges(func(cs []registry.Change) {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		for _, c := range cs {
			cl.rows[c.Key()] = c
		}
	}))
	return cl
}

// history is what the reports hold, deleted changes dropped.
func (cl *changeLog) history() map[registry.ChangeKey]string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	out := map[registry.ChangeKey]string{}
	for k, c := range cl.rows {
		if !c.Deleted {
			out[k] = c.EventID + " " + c.DigestBefore + " " + c.DigestAfter
		}
	}
	return out
}

// TestStoreReportingChanges: a store made WithChanges (the registry
// history) is given every decodable listing, and an instance with one
// loads no checkpoint: it reports the whole history again, from the
// topic's start.
func TestStoreReportingChanges(t *testing.T) {
	c := newCluster(t, 3)
	prod := newProducer(t, c)
	lines := readLines(t, corpus("sample", "listings.jsonl"))
	produce(t, prod, listingsTopic, append(lines, []byte(`{"type":"listing"}`))) // and one bad
	cl := newChangeLog()
	cfg := testConfig(c)
	r := start(t, cfg, cl.store, newRecSink(), nil)
	eventually(t, 10*time.Second, "ready", r.p.Ready)
	eventually(t, 10*time.Second, "every listing applied", func() bool { return cl.store.Stats().Listings == int64(len(lines)) })
	want := cl.history()
	if len(want) == 0 {
		t.Fatal("no change reported")
	}

	// The first instance leaves a checkpoint at shutdown; the next one,
	// whose store reports changes, does not load it.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(r.p.m.checkpointsWritten); n != 1 {
		t.Fatalf("%v checkpoints written at shutdown, want 1", n)
	}
	cl2 := newChangeLog()
	cfg.Group, cfg.AnalysisID = "resolverd-2", "2"
	r2 := start(t, cfg, cl2.store, newRecSink(), prometheus.NewRegistry())
	eventually(t, 10*time.Second, "ready", r2.p.Ready)
	eventually(t, 10*time.Second, "every listing applied again", func() bool { return cl2.store.Stats().Listings == int64(len(lines)) })
	if testutil.ToFloat64(r2.p.m.checkpointLoaded) != 0 {
		t.Error("an instance whose store reports changes loaded a checkpoint")
	}
	if got := cl2.history(); !reflect.DeepEqual(got, want) {
		t.Errorf("second instance: %d changes, want %d", len(got), len(want))
	}
}
