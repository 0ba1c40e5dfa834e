package reanalyze

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

var day = schema.Window{Topic: callsTopic, From: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}

// TestSample: the sample's calls, read from Kafka by timestamp and
// decided in each mode, are decided as `resolverd check` decides them in
// that mode; a second run of the same analysis (other batches, other
// workers) adds no row under FINAL.
func TestSample(t *testing.T) {
	c, recs := seedSample(t, 3)
	vs := history(t, c)
	ch := newStore(t)
	var lines [][]byte
	for _, r := range recs {
		lines = append(lines, r.Value)
	}
	for _, mode := range []resolve.Mode{resolve.Strict, resolve.PinAssisted} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig("re-"+mode.String(), day)
			cfg.Resolver.Mode = mode
			sum := reanalyze(t, cfg, vs, kafkaSource(c, day, time.Minute), ch)
			if sum.Read != int64(len(recs)) || sum.Decided != int64(len(recs)) || sum.Outside != 0 {
				t.Fatalf("summary %+v, want all %d calls read and decided", sum, len(recs))
			}
			want := checked(t, mode, lines)
			got := stored(t, ch, cfg.AnalysisID)
			if len(got) != len(recs) {
				t.Fatalf("%d decisions stored, want %d", len(got), len(recs))
			}
			for _, r := range got {
				if w, ok := want[r.EventID]; !ok || r.Class != w {
					t.Errorf("%s: class %s, resolverd check --mode %s says %s", r.CallKey, r.Class, mode, w)
				}
				if r.Source != schema.SourceReanalysis || r.PolicyVersion != mode.String() || r.ResolverBuild != "test" || r.Topic != callsTopic {
					t.Errorf("%s: stamps %q %q %q %q", r.CallKey, r.Source, r.PolicyVersion, r.ResolverBuild, r.Topic)
				}
			}
			var byClass [schema.NumClasses]int64
			for _, r := range got {
				byClass[r.Class.Index()]++
			}
			if byClass != sum.ByClass {
				t.Errorf("summary by class %v, stored %v", sum.ByClass, byClass)
			}

			// Again, in batches of 37 rows on three workers.
			cfg.BatchRows, cfg.Workers = 37, 3
			again := reanalyze(t, cfg, vs, kafkaSource(c, day, time.Minute), ch)
			if again.Batches < len(recs)/(2*37) {
				t.Errorf("%d batches of 37 to 73 rows for %d calls", again.Batches, len(recs))
			}
			after := stored(t, ch, cfg.AnalysisID)
			if len(after) != len(got) {
				t.Fatalf("the second run left %d decisions under FINAL, the first %d", len(after), len(got))
			}
			for k, r := range got {
				a := after[k]
				r.DecidedAt, a.DecidedAt = time.Time{}, time.Time{}
				if r != a {
					t.Errorf("%s differs after the second run:\n%+v\n%+v", k, r, a)
				}
			}
		})
	}
}

// TestWindowBoundaries: a call is in the window when its emitted_at (or,
// without one, its record's timestamp) is in [From, To): at From in, at To
// out, to the sub-millisecond. With a horizon that covers the producers'
// clocks every such call is read; with none, a call stamped before its
// emitted_at and placed before the window's first record is missed
// unseen (the documented limit), and with Confirm calls in a row past
// the window, a call after them is.
func TestWindowBoundaries(t *testing.T) {
	t1 := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	tmpl := readLines(t, corpus("sample", "calls.jsonl"))[0]
	call := func(id string, emitted, ts time.Time) *kgo.Record {
		v := bytes.Replace(tmpl, []byte(`"c-a5840a"`), []byte(`"`+id+`"`), 1)
		v = bytes.Replace(v, []byte(`"2026-12-01T00:14:00.379Z"`), []byte(`"`+emitted.Format(time.RFC3339Nano)+`"`), 1)
		return &kgo.Record{Topic: callsTopic, Value: v, Timestamp: ts}
	}
	at := func(id string, emitted time.Time) *kgo.Record { return call(id, emitted, emitted) }
	bad := func(id string, ts time.Time) *kgo.Record {
		return &kgo.Record{Topic: callsTopic, Value: []byte(`{"type":"call","event_id":"` + id + `"}`), Timestamp: ts}
	}
	ms, half := time.Millisecond, 500*time.Microsecond
	// One partition, in this order (offsets 0 to 14): the producers'
	// clocks are those of ingest (timestamp = emitted_at) but for s1 and
	// s2.
	c := newCluster(t, 1)
	produce(t, c, []*kgo.Record{
		at("e0", t1.Add(-time.Hour)),
		call("s2", t1.Add(10*ms), t1.Add(-3*time.Second)), // its producer's clock 3s behind
		at("e1", t1.Add(-ms)),
		at("e2", t1.Add(-half)),
		at("e3", t1),
		bad("m1", t1), // no emitted_at: the record's timestamp counts
		at("e4", t1.Add(half)),
		at("e5", t1.Add(30*time.Minute)),
		at("e6", t2.Add(-half)),
		at("e7", t2.Add(-ms)),
		at("e8", t2),
		bad("m2", t2),
		at("e9", t2.Add(ms)),
		call("s1", t2.Add(-10*ms), t2.Add(3*time.Second)), // 3s ahead
		at("e10", t2.Add(time.Hour)),
	})
	produce(t, c, []*kgo.Record{{Topic: listingsTopic, Value: readLines(t, corpus("sample", "listings.jsonl"))[0]}})
	vs := history(t, c)
	ch := newStore(t)
	w := schema.Window{Topic: callsTopic, From: t1, To: t2}
	for _, tc := range []struct {
		horizon    time.Duration
		confirm    int
		decided    []string
		start, end int64
		past       bool
		disorder   time.Duration // s1 after e9; e7 after e6
		early      time.Duration // s2
	}{
		{5 * time.Second, 0, []string{"e3", "e4", "e5", "e6", "e7", "m1", "s1", "s2"}, 1, 15, false, 11 * ms, 3*time.Second + 10*ms},
		// s2's record is before the first one stamped at From: missed,
		// and not seen to be stamped early.
		{0, 0, []string{"e3", "e4", "e5", "e6", "e7", "m1", "s1"}, 4, 15, false, 11 * ms, 0},
		// e8 and e9, two calls in a row at or after To: s1 after them is
		// missed.
		{0, 2, []string{"e3", "e4", "e5", "e6", "e7", "m1"}, 4, 13, true, half, 0},
	} {
		t.Run(fmt.Sprint("horizon ", tc.horizon, " confirm ", tc.confirm), func(t *testing.T) {
			id := fmt.Sprint("h-", tc.horizon, "-", tc.confirm)
			src := kafkaSource(c, w, tc.horizon)
			src.Confirm = tc.confirm
			sum := reanalyze(t, testConfig(id, w), vs, src, ch)
			var got []string
			for _, r := range stored(t, ch, id) {
				got = append(got, r.EventID)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.decided) {
				t.Errorf("decided %v, want %v", got, tc.decided)
			}
			read := tc.end - tc.start
			if sum.Decided != int64(len(tc.decided)) || sum.Read != read || sum.Outside != read-sum.Decided {
				t.Errorf("summary %+v; want %d decided of %d read", sum, len(tc.decided), read)
			}
			rep := src.Report()
			want := PartitionReport{Partition: 0, Start: tc.start, End: tc.end, LogStart: 0, HighWatermark: 15, Read: read,
				InWindow: int64(len(tc.decided)), Outside: read - int64(len(tc.decided)), PastWindow: tc.past, Disorder: tc.disorder, EarlyStamp: tc.early}
			if len(rep) != 1 || fmt.Sprintf("%+v", rep[0]) != fmt.Sprintf("%+v", want) {
				t.Errorf("report %+v\nwant   %+v", rep, want)
			}
		})
	}
}

// TestUnproven: a record stamped before its call's emitted_at by more than
// the horizon (here, one with no timestamp: -1) is decided, and its
// partition reported as unproven, naming it: a record stamped so before
// the read's start would not be read. A partition whose records before
// the read's start were deleted is unproven too.
func TestUnproven(t *testing.T) {
	t1 := time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC)
	tmpl := readLines(t, corpus("sample", "calls.jsonl"))[0]
	call := func(id string, emitted, ts time.Time) *kgo.Record {
		v := bytes.Replace(tmpl, []byte(`"c-a5840a"`), []byte(`"`+id+`"`), 1)
		v = bytes.Replace(v, []byte(`"2026-12-01T00:14:00.379Z"`), []byte(`"`+emitted.Format(time.RFC3339Nano)+`"`), 1)
		return &kgo.Record{Topic: callsTopic, Value: v, Timestamp: ts}
	}
	c := newCluster(t, 1)
	produce(t, c, []*kgo.Record{
		call("a", t1.Add(-time.Hour), t1.Add(-time.Hour)),
		call("b", t1.Add(time.Minute), t1.Add(time.Minute)),
		call("n", t1.Add(2*time.Minute), time.UnixMilli(-1)), // no timestamp
		call("d", t1.Add(3*time.Minute), t1.Add(3*time.Minute)),
	})
	w := schema.Window{Topic: callsTopic, From: t1, To: t1.Add(time.Hour)}
	ctx := testContext(t, 30*time.Second)
	read := func(src *KafkaSource) (ids []string) {
		t.Helper()
		if _, err := src.Plan(ctx); err != nil {
			t.Fatal(err)
		}
		if err := src.Read(ctx, func(ch Chunk) error {
			for _, ev := range ch.Events {
				ids = append(ids, member(ev.Value, "event_id"))
			}
			ch.Done()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	src := kafkaSource(c, w, time.Minute)
	if ids := read(src); !slices.Equal(ids, []string{"b", "n", "d"}) {
		t.Errorf("read %v", ids)
	}
	rep := src.Report()
	if len(rep[0].Unproven) != 1 || rep[0].NoTimestamp != 1 || rep[0].EarlyStamp != 0 || !strings.Contains(rep[0].Unproven[0], "1 records stamped more than the horizon (1m0s) before their call's emitted_at (1 with no timestamp), the first at offset 2") {
		t.Errorf("report %+v", rep)
	}

	var os kadm.Offsets
	os.AddOffset(callsTopic, 0, 1, -1)
	if rs, err := admin(t, c).DeleteRecords(ctx, os); err != nil || rs.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, rs.Error())
	}
	src = kafkaSource(c, w, time.Minute) // the first record held, b, is the first stamped after From - 1m
	read(src)
	if rep := src.Report(); len(rep[0].Unproven) != 2 || !strings.Contains(rep[0].Unproven[0], "the records before offset 1 were deleted") {
		t.Errorf("report after DeleteRecords %+v", rep)
	}
}

// TestArchiveAfterTruncation: the live pipeline archives the calls; once
// Kafka has dropped them, the Kafka source refuses the window, and the
// archive gives the decisions the Kafka source gave before, call for call.
func TestArchiveAfterTruncation(t *testing.T) {
	c, recs := seedSample(t, 3)
	ch := newStore(t)
	live(t, c, ch, "live", true)
	vs := history(t, c)

	fromKafka := reanalyze(t, testConfig("kafka", day), vs, kafkaSource(c, day, time.Minute), ch)
	adm := admin(t, c)
	ctx := testContext(t, 30*time.Second)
	ends, err := adm.ListEndOffsets(ctx, callsTopic)
	if err != nil {
		t.Fatal(err)
	}
	var os kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { os.AddOffset(callsTopic, o.Partition, o.Offset, -1) })
	if rs, err := adm.DeleteRecords(ctx, os); err != nil || rs.Error() != nil {
		t.Fatalf("DeleteRecords: %v %v", err, rs.Error())
	}
	src := kafkaSource(c, day, time.Minute)
	if _, err := src.Plan(ctx); err != nil {
		t.Fatal(err)
	}
	for _, r := range src.Report() {
		if len(r.Unproven) == 0 {
			t.Errorf("partition %d of a truncated topic: %+v, want unproven", r.Partition, r)
		}
	}

	fromArchive := reanalyze(t, testConfig("archive", day), vs, &ArchiveSource{Archive: ch, Window: day}, ch)
	if fromArchive.Decided != int64(len(recs)) || fromArchive.ByClass != fromKafka.ByClass {
		t.Errorf("from the archive %+v, from Kafka %+v", fromArchive, fromKafka)
	}
	k, a := stored(t, ch, "kafka"), stored(t, ch, "archive")
	if len(a) != len(recs) || !slices.Equal(slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(k))) {
		t.Fatalf("%d calls from the archive, %d from Kafka", len(a), len(k))
	}
	for key, kr := range k {
		ar := a[key]
		kr.AnalysisID, kr.DecidedAt, ar.AnalysisID, ar.DecidedAt = "", time.Time{}, "", time.Time{}
		if kr != ar {
			t.Errorf("%s:\nfrom Kafka   %+v\nfrom archive %+v", key, kr, ar)
		}
	}
}

// flaky fails its first writes, retryably or for good.
type flaky struct {
	appender.Batch
	fails     *int
	permanent bool
}

var (
	errDown = errors.New("store down (test)")
	errBad  = errors.New("rows refused (test)")
)

func (f flaky) Write(ctx context.Context) error {
	if *f.fails > 0 {
		*f.fails--
		if f.permanent {
			return appender.Permanent(errBad)
		}
		return errDown
	}
	return f.Batch.Write(ctx)
}

// TestWriteFailures: a write that fails is retried until it is stored; one
// refused for good, or still failing after RetryFor, fails the run and
// every goroutine ends.
func TestWriteFailures(t *testing.T) {
	c, recs := seedSample(t, 3)
	vs := history(t, c)
	ch := newStore(t)
	for _, tc := range []struct {
		name      string
		fails     int
		permanent bool
		retryFor  time.Duration
		want      error
	}{
		{"retried", 5, false, 10 * time.Second, nil},
		{"refused", 1, true, 10 * time.Second, errBad},
		{"still down", 1 << 30, false, 100 * time.Millisecond, errDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(strings.ReplaceAll(tc.name, " ", "-"), day)
			cfg.RetryFor = tc.retryFor
			fails := tc.fails
			r, err := New(cfg, vs, kafkaSource(c, day, 0), func() appender.Batch { return flaky{ch.NewBatch(), &fails, tc.permanent} }, nil)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := r.Run(testContext(t, time.Minute))
			if !errors.Is(err, tc.want) || tc.want == nil && err != nil {
				t.Fatalf("Run = %v, want %v", err, tc.want)
			}
			if n := len(stored(t, ch, cfg.AnalysisID)); tc.want == nil && (n != len(recs) || sum.Decided != int64(n)) {
				t.Errorf("%d stored, %d decided, want %d", n, sum.Decided, len(recs))
			} else if tc.want != nil && n != 0 {
				t.Errorf("%d stored after a failed write of the only batch", n)
			}
		})
	}
}

// TestConfigValidate: unusable settings are refused, all at once.
func TestConfigValidate(t *testing.T) {
	ok := testConfig("a", day)
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"no analysis", func(c *Config) { c.AnalysisID = "" }, "analysis"},
		{"no topic", func(c *Config) { c.Window.Topic = "" }, "topic"},
		{"no end", func(c *Config) { c.Window.To = time.Time{} }, "start and an end"},
		{"empty", func(c *Config) { c.Window.To = c.Window.From }, "ends"},
		{"sub-millisecond", func(c *Config) { c.Window.From = c.Window.From.Add(time.Microsecond) }, "whole millisecond"},
		{"workers", func(c *Config) { c.Workers = 0 }, "workers"},
		{"batch", func(c *Config) { c.BatchRows = 0 }, "batch"},
		{"backoff", func(c *Config) { c.RetryMax = c.RetryMin / 2 }, "backoff"},
		{"mode", func(c *Config) { c.Resolver.Mode = 7 }, "mode"},
		{"two at once", func(c *Config) { c.AnalysisID, c.Workers = "", -1 }, "analysis id\nworkers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}
