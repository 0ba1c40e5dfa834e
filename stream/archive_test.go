package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

// TestArchiveCalls: with ArchiveCalls, every record of the calls topic,
// undecodable ones included, is archived as it was produced, at its
// window time (emitted_at, else the record's timestamp), by the time its
// offset is committed; a pipeline of another group reading them all again
// (a redelivery) leaves one archived record each under FINAL.
func TestArchiveCalls(t *testing.T) {
	srv := chenginetest.Server(t)
	ctx := testContext(t, 2*time.Minute)
	ch, err := sink.NewClickHouse(ctx, sink.Config{Addr: []string{srv.Addr()}, Database: "stream_archive"}, sink.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	c := newCluster(t, 3)
	prod := newProducer(t, c)
	produce(t, prod, listingsTopic, readLines(t, corpus("sample", "listings.jsonl")))
	recordTime := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) // the poison records'
	var rs []*kgo.Record
	want := map[[2]int64]time.Time{} // partition, offset -> window time; filled after producing
	for _, l := range readLines(t, corpus("sample", "calls.jsonl")) {
		// The record's timestamp is the call's emitted_at, as ingest sets
		// it, or recordTime for a call without a usable one.
		var e struct {
			EmittedAt any `json:"emitted_at"`
		}
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		s, _ := e.EmittedAt.(string)
		ts, err := schema.ParseTime(s)
		if err != nil {
			ts = recordTime
		}
		rs = append(rs, &kgo.Record{Topic: callsTopic, Key: keyOf(l), Value: l, Timestamp: ts})
	}
	for _, v := range []string{"not JSON", `{"type":"call","emitted_at":"2026-12-01T00:14:00.379Z","registry":"r","tool":"t","arguments":{}}`} {
		rs = append(rs, &kgo.Record{Topic: callsTopic, Value: []byte(v), Timestamp: recordTime})
	}
	produceRecords(t, prod, rs)
	for _, r := range rs {
		want[[2]int64{int64(r.Partition), r.Offset}] = r.Timestamp
	}
	// The call without an event_id is MALFORMED but keeps its emitted_at,
	// which places it.
	last := rs[len(rs)-1]
	want[[2]int64{int64(last.Partition), last.Offset}] = time.Date(2026, 12, 1, 0, 14, 0, 379e6, time.UTC)

	cfg := testConfig(c)
	cfg.ArchiveCalls = true
	if _, err := New(cfg, nil, newRecSink(), nil, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("New with a sink that cannot archive = %v, want ErrConfig", err)
	}
	archived := func() map[[2]int64]schema.CallEvent {
		got := map[[2]int64]schema.CallEvent{}
		win := schema.Window{Topic: callsTopic, From: time.Unix(0, 0), To: time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)}
		if err := ch.CallEvents(ctx, win, func(evs []schema.CallEvent) error {
			for _, e := range evs {
				k := [2]int64{int64(e.Partition), e.Offset}
				if _, dup := got[k]; dup {
					t.Errorf("record %v read twice", k)
				}
				got[k] = e
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	adm := admin(t, c)
	for _, group := range []string{"resolverd", "again"} {
		cfg.Group, cfg.AnalysisID = group, group
		r := start(t, cfg, nil, ch.Appender(), nil)
		eventually(t, time.Minute, "every record decided", func() bool {
			_, n, err := ch.Counts(ctx, group)
			return err == nil && n == len(rs)
		})
		eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, group) })
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
		// Committed, so archived: every record, once, as produced.
		got := archived()
		if len(got) != len(rs) {
			t.Fatalf("group %s: %d records archived, want %d", group, len(got), len(rs))
		}
		for _, r := range rs {
			k := [2]int64{int64(r.Partition), r.Offset}
			e := got[k]
			if !bytes.Equal(e.Value, r.Value) || !bytes.Equal(e.Key, r.Key) || !e.Timestamp.Equal(r.Timestamp.Truncate(time.Millisecond)) ||
				!e.EmittedAt.Equal(want[k].Truncate(time.Millisecond)) || e.Topic != callsTopic {
				t.Errorf("record %v archived as %+v, produced %+v (window time %v)", k, e, r, want[k])
			}
		}
	}
}
