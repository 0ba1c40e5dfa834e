package reanalyze

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
)

// outlier kinds of the property test's partitions.
const (
	normal     = iota // stamped with its emitted_at, which is at most horizon/2 from its place
	unusable          // emitted_at unusable, stamped with the time of ingestion (weeks later)
	aheadClock        // its producer's clock 3h ahead: emitted_at and timestamp
	aheadStamp        // emitted_at right, its record stamped 3h later
	earlyStamp        // emitted_at right, its record stamped 3h before, or with no timestamp (-1)
)

// TestKafkaSourceProperty checks the Kafka source against a brute-force
// reference (every record read, kept by its window time) over random
// partitions, windows, horizons and Confirm runs, with records out of
// place as production makes them: unusable emitted_at stamped at
// ingestion, a producer's clock hours ahead, a record stamped hours late,
// hours early or not at all. Every call the reference keeps is read,
// except, as documented, one stamped more than the horizon before its
// emitted_at and placed before the read's start; when any record read is
// stamped so, its partition is reported unproven. Without such records
// the read is exact and proven, whatever else is out of place.
func TestKafkaSourceProperty(t *testing.T) {
	c := newCluster(t, 1)
	ctx := testContext(t, 2*time.Minute)
	cl, err := kgo.NewClient(append(clientOpts(c), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := admin(t, c)
	rng := rand.New(rand.NewPCG(20, 1))
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	exact := 0
	for trial := range 60 {
		topic := fmt.Sprintf("prop-%d", trial)
		parts := 1 + rng.IntN(3)
		if _, err := adm.CreateTopic(ctx, int32(parts), 1, nil, topic); err != nil {
			t.Fatal(err)
		}
		horizon := []time.Duration{0, time.Second, 10 * time.Second, time.Minute}[rng.IntN(4)]
		confirm := 2 + rng.IntN(5)
		withEarly := trial%2 == 1
		type rec struct {
			p       int32
			id      string
			kind    int
			emitted time.Time // zero: unusable
			ts      time.Time
		}
		var recs []*kgo.Record
		var all []rec
		var last time.Time // the latest place of a record
		for p := range int32(parts) {
			n := 40 + rng.IntN(120)
			at := base
			prevAhead := false
			for k := range n {
				at = at.Add(time.Duration(1+rng.IntN(30)) * time.Second)
				var jitter time.Duration
				if horizon > 0 {
					jitter = time.Duration(rng.Int64N(int64(horizon))) - horizon/2
				}
				r := rec{p: p, id: fmt.Sprintf("p%d-%d", p, k), kind: normal, emitted: at.Add(jitter).Truncate(time.Millisecond)}
				switch x := rng.IntN(100); {
				case x < 6:
					r.kind = unusable
				case x < 12 && !prevAhead: // never Confirm of them in a row
					r.kind = aheadClock
				case x < 18:
					r.kind = aheadStamp
				case x < 24 && withEarly:
					r.kind = earlyStamp
				}
				prevAhead = r.kind == aheadClock
				r.ts = r.emitted
				emitted := r.emitted.Format(time.RFC3339Nano)
				switch r.kind {
				case unusable:
					r.emitted, r.ts, emitted = time.Time{}, base.Add(30*24*time.Hour), "yesterday"
				case aheadClock:
					r.emitted = r.emitted.Add(3 * time.Hour)
					r.ts, emitted = r.emitted, r.emitted.Format(time.RFC3339Nano)
				case aheadStamp:
					r.ts = r.ts.Add(3 * time.Hour)
				case earlyStamp:
					r.ts = r.ts.Add(-3 * time.Hour)
					if rng.IntN(2) == 0 {
						r.ts = time.UnixMilli(-1)
					}
				}
				all = append(all, r)
				if at.After(last) {
					last = at
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Timestamp: r.ts,
					Value: fmt.Appendf(nil, `{"type":"call","event_id":%q,"emitted_at":%q,"registry":"r","tool":"t","arguments":{}}`, r.id, emitted)})
			}
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		// A window within the partitions' span, whole milliseconds.
		span := last.Sub(base)
		from := base.Add(time.Duration(rng.Int64N(int64(span / 2)))).Truncate(time.Millisecond)
		w := schema.Window{Topic: topic, From: from, To: from.Add(time.Duration(1 + rng.Int64N(int64(span/2)))).Truncate(time.Millisecond)}
		if !w.From.Before(w.To) {
			w.To = w.From.Add(time.Millisecond)
		}

		src := &KafkaSource{Window: w, Horizon: horizon, Confirm: confirm, Opts: clientOpts(c)}
		if _, err := src.Plan(ctx); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		var dec schema.CallDecoder
		var call schema.Call
		if err := src.Read(ctx, func(ch Chunk) error {
			for _, ev := range ch.Events {
				_ = dec.Decode(ev.Value, &call)
				if w.Contains(schema.WindowTime(call.EmittedAt, ev.Timestamp)) {
					if got[call.EventID] {
						t.Errorf("trial %d: %s read twice", trial, call.EventID)
					}
					got[call.EventID] = true
				}
			}
			ch.Done()
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		rep := src.Report()
		offsets := map[string]int64{} // by id: offsets follow production order per partition
		next := map[int32]int64{}
		for _, r := range all {
			offsets[r.id] = next[r.p]
			next[r.p]++
		}
		want := 0
		for _, r := range all {
			in := w.Contains(schema.WindowTime(r.emitted, r.ts))
			if in {
				want++
			}
			pr := rep[r.p]
			switch {
			case in && !got[r.id] && !(r.kind == earlyStamp && offsets[r.id] < pr.Start):
				t.Errorf("trial %d (horizon %s, confirm %d, window %s..%s): %s (kind %d, offset %d) missed; report %+v",
					trial, horizon, confirm, w.From.Format(time.RFC3339), w.To.Format(time.RFC3339), r.id, r.kind, offsets[r.id], pr)
			case !in && got[r.id]:
				t.Errorf("trial %d: %s kept outside the window", trial, r.id)
			case r.kind == earlyStamp && offsets[r.id] >= pr.Start && offsets[r.id] < pr.End && len(pr.Unproven) == 0:
				t.Errorf("trial %d: %s stamped early read at offset %d, partition not reported unproven: %+v", trial, r.id, offsets[r.id], pr)
			}
		}
		unproven := slices.ContainsFunc(rep, func(r PartitionReport) bool { return len(r.Unproven) > 0 })
		if !withEarly && (unproven || len(got) != want) {
			t.Errorf("trial %d without early stamps: %d of %d read, report %+v", trial, len(got), want, rep)
		}
		if len(got) == want && !unproven {
			exact++
		}
	}
	if exact < 30 {
		t.Errorf("only %d of 60 trials exact and proven: the generator tests little", exact)
	}
}
