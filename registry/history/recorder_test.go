package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
	"github.com/toolaudit/toolaudit/sink/appender"
)

func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// listings is a history of three servers with changes, removals, trust
// changes and relistings, in event time.
func listings() []*schema.Listing {
	defs := []string{
		`{"type":"object","properties":{"a":{"type":"string"}}}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{}},"required":["b"]}`,
		`{"type":"object","properties":{"q":{"enum":["x","y"]}}}`,
	}
	r := rand.New(rand.NewPCG(1, 2))
	var ls []*schema.Listing
	for i := range 60 {
		server := []string{"github", "gitlab", "fs"}[i%3]
		l := &schema.Listing{EventID: fmt.Sprintf("l-%03d", i), ObservedAt: t0.Add(time.Duration(i) * time.Minute),
			Registry: "fleet", Server: server, Trust: r.IntN(2), Op: schema.OpSnapshot}
		if r.IntN(10) == 0 {
			l.Op = schema.OpRemove
		} else {
			for _, name := range []string{"create", "search", "delete"} {
				if r.IntN(4) > 0 {
					l.Tools = append(l.Tools, schema.Tool{Name: name, InputSchema: []byte(defs[r.IntN(len(defs))])})
				}
			}
		}
		ls = append(ls, l)
	}
	return ls
}

// storeOf returns a store that reports its changes to rec.
func storeOf(rec *Recorder) *registry.Store {
	return registry.New(registry.WithChanges(rec.ObserveChanges))
}

// history is what a store reports for ls applied in these batches,
// described: the rows a Recorder queues.
func history(ls []*schema.Listing, batches ...int) []diff.Change {
	var out []diff.Change
	s := registry.New(registry.WithChanges(func(cs []registry.Change) {
		for _, c := range cs {
			out = append(out, diff.Describe(c))
		}
	}))
	for _, n := range batches {
		s.Apply(ls[:n]...)
		ls = ls[n:]
	}
	return out
}

func newSink(t *testing.T) *sink.ClickHouse {
	t.Helper()
	srv := chenginetest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := "registryhistory_" + fmt.Sprint(time.Now().UnixNano())
	w, err := sink.NewClickHouse(ctx, sink.Config{Addr: []string{srv.Addr()}, Database: db}, sink.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// start runs r until the test ends.
func start(t *testing.T, r *Recorder) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRecorderStore: listings applied in shuffled batches to a store
// that reports to the Recorder, written to ClickHouse, read back with
// FINAL, are the history computed in event time; a second instance
// writing the same history changes nothing.
func TestRecorderStore(t *testing.T) {
	w := newSink(t)
	reg := prometheus.NewRegistry()
	rec, err := New(w, Options{Registerer: reg, BatchRows: 7})
	if err != nil {
		t.Fatal(err)
	}
	start(t, rec)
	store := storeOf(rec)
	ls := listings()
	shuffled := append([]*schema.Listing(nil), ls...)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var batches []int
	for i := 0; i < len(shuffled); i += 5 {
		n := min(5, len(shuffled)-i)
		store.Apply(shuffled[i : i+n]...)
		batches = append(batches, n)
	}
	emitted := len(history(shuffled, batches...)) // rows the recorder queues: the same batches through another store
	waitFor(t, "every row written", func() bool { return testutil.ToFloat64(rec.hw.Written) == float64(emitted) })

	want := Rows(ls...)
	read := func() []diff.Change {
		got, err := w.RegistryChanges(context.Background(), sink.ChangeFilter{Registry: "fleet"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := read(); !sameHistory(got, want) {
		t.Fatalf("stored history (%d rows) is not the history in event time (%d rows)%s", len(got), len(want), diffRows(got, want))
	}

	other, err := New(w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start(t, other)
	storeOf(other).Apply(ls...)
	waitFor(t, "the second recorder", func() bool { return testutil.ToFloat64(other.hw.Written) == float64(len(want)) })
	if got := read(); !sameHistory(got, want) {
		t.Fatalf("after a second writer: %d rows, want %d", len(got), len(want))
	}
}

// sameHistory compares what a reader sees: key, kind, digests, trust and
// the summary.
func sameHistory(got, want []diff.Change) bool {
	type row struct {
		key              registry.ChangeKey
		kind             diff.Kind
		before, after    string
		tBefore, tAfter  int
		summary, eventID string
	}
	rows := func(cs []diff.Change) []row {
		var out []row
		for _, c := range cs {
			c.ObservedAt = c.ObservedAt.UTC()
			out = append(out, row{c.Key(), c.Kind, c.DigestBefore, c.DigestAfter, c.TrustBefore, c.TrustAfter, c.Summary, c.EventID})
		}
		return out
	}
	sortRows(got)
	sortRows(want)
	g, w := rows(got), rows(want)
	return len(g) > 0 && reflect.DeepEqual(g, w)
}

// TestRecorderRetries: failed writes are retried until they succeed; a
// permanent failure drops its rows and counts them.
func TestRecorderRetries(t *testing.T) {
	var calls atomic.Int32
	var stored sync.Map
	w := WriterFunc(func(ctx context.Context, cs []diff.Change) error {
		switch calls.Add(1) {
		case 1, 2:
			return errors.New("connection refused")
		case 3:
			return appender.Permanent(errRefused)
		}
		for _, c := range cs {
			stored.Store(c.Key(), c)
		}
		return nil
	})
	rec, err := New(w, Options{RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond, BatchRows: 1000})
	if err != nil {
		t.Fatal(err)
	}
	start(t, rec)
	store := storeOf(rec)
	ls := listings()
	store.Apply(ls[:3]...) // written at the third attempt... as permanent: dropped
	waitFor(t, "the dropped batch", func() bool { return testutil.ToFloat64(rec.hw.Dropped) > 0 })
	store.Apply(ls[3:]...)
	first := Rows(ls[:3]...)
	restRows := len(history(ls, 3, len(ls)-3)) - len(first)
	waitFor(t, "the rest", func() bool { return testutil.ToFloat64(rec.hw.Written) == float64(restRows) })
	if n := testutil.ToFloat64(rec.hw.WriteErrors); n != 3 {
		t.Errorf("write errors = %v, want 3", n)
	}
	if got := testutil.ToFloat64(rec.hw.Dropped); got != float64(len(first)) {
		t.Errorf("dropped = %v, want the first batch's %d rows", got, len(first))
	}
}

var errRefused = errors.New("rows refused (test)")

// TestRecorderQueueFull: with the store stuck, ObserveChanges does not
// block; rows beyond MaxQueued are dropped and counted; cancelling Run
// returns at once though the write in progress never ends.
func TestRecorderQueueFull(t *testing.T) {
	w := WriterFunc(func(ctx context.Context, cs []diff.Change) error {
		<-ctx.Done()
		return ctx.Err()
	})
	rec, err := New(w, Options{MaxQueued: 10, BatchRows: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rec.Run(ctx); close(done) }()
	observed := make(chan struct{})
	go func() { storeOf(rec).Apply(listings()...); close(observed) }()
	select {
	case <-observed:
	case <-time.After(10 * time.Second):
		t.Fatal("ObserveChanges blocked on a stuck store")
	}
	all := len(Rows(listings()...))
	waitFor(t, "the writer to take a batch", func() bool { return rec.queued() <= 6 })
	if got := testutil.ToFloat64(rec.hw.Dropped); got != float64(all-10) {
		t.Errorf("dropped %v of %d rows, want all but the 10 queued", got, all)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// TestRecordedAtIncreases: each batch is stamped later than the one
// before, even within one millisecond.
func TestRecordedAtIncreases(t *testing.T) {
	rec, err := New(WriterFunc(func(context.Context, []diff.Change) error { return nil }), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec.now = func() time.Time { return t0 }
	store := storeOf(rec)
	ls := listings()
	var last time.Time
	for _, l := range ls {
		store.Apply(l)
		if n := len(rec.queue); n > 0 {
			at := rec.queue[n-1].recordedAt
			if !at.After(last) && !last.IsZero() && at != last {
				t.Fatalf("RecordedAt %v after %v", at, last)
			}
			last = at
		}
	}
	seen := map[time.Time]bool{}
	prev := time.Time{}
	for _, q := range rec.queue {
		if q.recordedAt.Before(prev) {
			t.Fatalf("RecordedAt went back: %v after %v", q.recordedAt, prev)
		}
		prev = q.recordedAt
		seen[q.recordedAt] = true
	}
	// take describes and stamps what it takes.
	want := rec.queue[0]
	if batch := rec.take(); len(batch) == 0 || batch[0].RecordedAt != want.recordedAt || !reflect.DeepEqual(batch[0].Change, want.c) || batch[0].Kind == "" {
		t.Fatalf("took %+v, queued %+v", batch[:min(1, len(batch))], want)
	}
	if len(seen) < 10 {
		t.Errorf("%d distinct stamps for %d listings", len(seen), len(ls))
	}
}

func diffRows(got, want []diff.Change) string {
	in := map[registry.ChangeKey]diff.Change{}
	for _, c := range want {
		c.ObservedAt = c.ObservedAt.UTC()
		in[c.Key()] = c
	}
	out := ""
	for _, c := range got {
		c.ObservedAt = c.ObservedAt.UTC()
		w, ok := in[c.Key()]
		if !ok {
			out += fmt.Sprintf("\nextra %+v", c)
		} else if w.Kind != c.Kind || w.Summary != c.Summary || w.EventID != c.EventID {
			out += fmt.Sprintf("\ndiffers got %s %s %s want %s %s %s", c.Kind, c.Summary, c.EventID, w.Kind, w.Summary, w.EventID)
		}
		delete(in, c.Key())
	}
	for _, c := range in {
		out += fmt.Sprintf("\nmissing %+v", c)
	}
	return out
}

func sortRows(cs []diff.Change) {
	slices.SortFunc(cs, func(a, b diff.Change) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Server, b.Server),
			a.ObservedAt.Compare(b.ObservedAt), cmp.Compare(a.Tool, b.Tool))
	})
}
