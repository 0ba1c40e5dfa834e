package sink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// fields lists the leaf fields of schema.Row (Decision's promoted).
func fields(v reflect.Value) []reflect.Value {
	var out []reflect.Value
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if v.Type().Field(i).Anonymous {
			out = append(out, fields(f)...)
			continue
		}
		out = append(out, f)
	}
	return out
}

// fullRow sets every field of a Row to a distinct, non-zero value, so that
// a field the store loses or swaps shows up.
func fullRow(seed int) schema.Row {
	var r schema.Row
	for i, f := range fields(reflect.ValueOf(&r).Elem()) {
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("f%d-%d ✓ «ü» 工具 🛠", i, seed))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(1000*seed + i))
		case reflect.Struct: // time.Time
			f.Set(reflect.ValueOf(base.Add(time.Duration(seed)*time.Hour + time.Duration(i)*time.Millisecond)))
		default:
			panic("fullRow: new field kind " + f.Kind().String())
		}
	}
	return r
}

// TestSchemaMatchesRow: the table stores every field of schema.Row, exactly.
func TestSchemaMatchesRow(t *testing.T) {
	if n := len(fields(reflect.ValueOf(schema.Row{}))); n != len(columns) {
		t.Fatalf("schema.Row has %d fields, the writer %d columns", n, len(columns))
	}
	reg := prometheus.NewRegistry()
	w := newWriter(t, WithRegisterer(reg))
	ctx := context.Background()

	full := fullRow(1)
	full.AnalysisID = "an"
	full.CallKey = "k1"
	empty := schema.Row{AnalysisID: "an", CallKey: "k2"} // empty strings, zero times
	odd := fullRow(2)
	odd.AnalysisID, odd.CallKey = "an", "k3"
	odd.Reason = "nul\x00 tab\t newline\n quote\" backslash\\ invalid\xff utf8 \u2028"
	odd.EmittedAt = time.Date(2026, 11, 29, 10, 0, 5, 250_999_999, time.FixedZone("CET", 3600)) // ms precision, not UTC
	odd.DecidedAt = time.Date(1969, 7, 20, 20, 17, 40, 123e6, time.UTC)                         // before the epoch
	odd.Partition, odd.Offset = -1, 1<<62
	clamped := fullRow(3)
	clamped.AnalysisID, clamped.CallKey = "an", "k4"
	clamped.EmittedAt = time.Date(1800, 1, 1, 0, 0, 0, 0, time.UTC)
	clamped.DecidedAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	before := time.Now().Truncate(time.Millisecond)
	mustWrite(t, w, []schema.Row{full, empty, odd, clamped})
	after := time.Now()

	got, err := w.Rows(ctx, "an", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []schema.Row{full, empty, odd, clamped}
	want[2].EmittedAt = time.Date(2026, 11, 29, 9, 0, 5, 250e6, time.UTC)
	want[3].EmittedAt, want[3].DecidedAt = minTime, maxTime
	if len(got) != len(want) {
		t.Fatalf("read %d rows, want %d", len(got), len(want))
	}
	// A zero DecidedAt is stored as the time of the Write.
	if d := got[1].DecidedAt; d.Before(before) || d.After(after) {
		t.Errorf("zero DecidedAt stored as %v, want the time of the Write", d)
	}
	want[1].DecidedAt = got[1].DecidedAt
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			gf, wf := fields(reflect.ValueOf(got[i])), fields(reflect.ValueOf(want[i]))
			for j := range gf {
				if !reflect.DeepEqual(gf[j].Interface(), wf[j].Interface()) {
					t.Errorf("row %s field %d: got %#v, want %#v", want[i].CallKey, j, gf[j].Interface(), wf[j].Interface())
				}
			}
		}
	}
	if n := gauge(t, reg, "toolaudit_sink_clamped_times_total", ""); n != 2 {
		t.Errorf("clamped_times_total = %v, want 2", n)
	}
	// The timeless row is in partition 197001, as documented.
	if n := count(t, w, "SELECT count() FROM {db}.decisions WHERE _partition_id = '197001' AND call_key = 'k2'"); n != 1 {
		t.Errorf("timeless row not in partition 197001")
	}
}

// gauge returns the value of the sample of metric name (label kind, if
// given) from reg.
func gauge(t testing.TB, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := kind == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" && l.GetValue() == kind {
					match = true
				}
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func TestWrite100k(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := newWriter(t, WithRegisterer(reg))
	const n, batch = 100_000, 10_000
	start := time.Now()
	for i := 0; i < n; i += batch {
		mustWrite(t, w, mkRows("big", i, batch, base.Add(time.Hour)))
	}
	t.Logf("%d rows in batches of %d: %v (%.0f rows/s)", n, batch, time.Since(start), n/time.Since(start).Seconds())
	counts, total, err := w.Counts(context.Background(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if total != n {
		t.Fatalf("Counts total = %d, want %d", total, n)
	}
	for i, c := range schema.Classes {
		want := n / schema.NumClasses
		if i < n%schema.NumClasses {
			want++
		}
		if counts[c] != want {
			t.Errorf("class %s: %d, want %d", c, counts[c], want)
		}
	}
	if got := gauge(t, reg, "toolaudit_sink_rows_written_total", ""); got != n {
		t.Errorf("rows_written_total = %v, want %d", got, n)
	}
	if got := gauge(t, reg, "toolaudit_sink_batches_written_total", ""); got != n/batch {
		t.Errorf("batches_written_total = %v, want %d", got, n/batch)
	}
	if got := gauge(t, reg, "toolaudit_sink_write_duration_seconds", ""); got != n/batch {
		t.Errorf("write_duration_seconds count = %v, want %d", got, n/batch)
	}
}

// TestRepeatWithinOneInsert: the same call twice in one INSERT (nothing
// collapses it at insert time, optimize_on_insert=0) is one decision read
// with FINAL, the later one.
func TestRepeatWithinOneInsert(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	rows := mkRows("rep", 0, 100, base.Add(time.Minute))
	again := mkRows("rep", 0, 10, base.Add(2*time.Minute))
	for i := range again {
		again[i].Reason = "later"
	}
	mustWrite(t, w, append(append(again[:5:5], rows...), again[5:]...))
	if _, total, err := w.Counts(ctx, "rep"); err != nil || total != 100 {
		t.Fatalf("Counts total = %d, %v; want 100", total, err)
	}
	got, err := w.Rows(ctx, "rep", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range got[:10] {
		if r.Reason != "later" {
			t.Fatalf("FINAL kept %s decided %v reason %q; want the later decision", r.CallKey, r.DecidedAt, r.Reason)
		}
	}
}

func TestRedelivery(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	const n = 5000
	first := mkRows("a1", 0, n, base.Add(time.Minute))
	mustWrite(t, w, first)

	// Kafka redelivers the batch after a crash: the calls are decided again,
	// later, this time with another reason.
	again := mkRows("a1", 0, n, base.Add(2*time.Minute))
	for i := range again {
		again[i].Reason = "second"
	}
	mustWrite(t, w, again)
	if _, total, err := w.Counts(ctx, "a1"); err != nil || total != n {
		t.Fatalf("after redelivery: Counts total = %d, %v; want %d", total, err, n)
	}
	if raw := count(t, w, "SELECT count() FROM {db}.decisions"); raw != 2*n {
		t.Logf("rows before FINAL: %d (merged already)", raw)
	}
	// Stored counts deliveries until parts merge: between n and 2n, never
	// below the FINAL count.
	if s, err := w.Stored(ctx, "a1"); err != nil || s < n || s > 2*n {
		t.Fatalf("Stored = %d, %v; want %d..%d", s, err, n, 2*n)
	}
	if s, err := w.Stored(ctx, "other"); err != nil || s != 0 {
		t.Fatalf("Stored of another analysis = %d, %v; want 0", s, err)
	}
	rows, err := w.Rows(ctx, "a1", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.DecidedAt.Equal(base.Add(2*time.Minute)) || r.Reason != "second" {
			t.Fatalf("FINAL kept %s decided %v reason %q; want the latest", r.CallKey, r.DecidedAt, r.Reason)
		}
	}
	// argMax over the raw rows agrees with FINAL.
	if stale := count(t, w, `SELECT count() FROM (SELECT call_key, argMax(reason, decided_at) AS r, max(decided_at) AS d
		FROM {db}.decisions WHERE analysis_id = 'a1' GROUP BY call_key) WHERE r != 'second' OR d != toDateTime64('2026-11-29 10:02:00', 3, 'UTC')`); stale != 0 {
		t.Errorf("argMax: %d calls without the latest decision", stale)
	}

	// An exact retry of the same batch (ack lost) is dropped at insert, in
	// the table and in every rollup, those fed through decisions_groups
	// (migration 0010) included.
	rollups := []string{"decisions_by_minute", "decisions_rollup_minute", "decisions_rollup_hour", "decisions_by_tool_day", "registry_versions_seen", "sessions_by_hour"}
	rawBefore := count(t, w, "SELECT count() FROM {db}.decisions")
	rollupBefore := map[string]uint64{}
	for _, r := range rollups {
		rollupBefore[r] = count(t, w, "SELECT sum(rows) FROM {db}."+r)
	}
	mustWrite(t, w, again)
	if raw := count(t, w, "SELECT count() FROM {db}.decisions"); raw != rawBefore {
		t.Errorf("exact retry inserted again: %d rows, had %d", raw, rawBefore)
	}
	for _, r := range rollups {
		if c := count(t, w, "SELECT sum(rows) FROM {db}."+r); c != rollupBefore[r] || c == 0 {
			t.Errorf("exact retry counted again in %s: %d, had %d", r, c, rollupBefore[r])
		}
	}
	// The rollup: rows counts the redelivery, calls does not.
	if r := count(t, w, "SELECT sum(rows) FROM {db}.decisions_by_minute WHERE analysis_id = 'a1'"); r != 2*n {
		t.Errorf("rollup rows = %d, want %d (both deliveries)", r, 2*n)
	}
	if c := count(t, w, "SELECT uniqMerge(calls) FROM {db}.decisions_by_minute WHERE analysis_id = 'a1'"); c != n {
		t.Errorf("rollup calls = %d, want %d", c, n)
	}

	// A new analysis sits beside the old one.
	mustWrite(t, w, mkRows("a2", 0, n, base.Add(time.Hour)))
	for _, a := range []string{"a1", "a2"} {
		if _, total, err := w.Counts(ctx, a); err != nil || total != n {
			t.Errorf("analysis %s: %d, %v; want %d", a, total, err, n)
		}
	}
	if all := count(t, w, "SELECT count() FROM {db}.decisions FINAL"); all != 2*n {
		t.Errorf("FINAL over both analyses: %d, want %d", all, 2*n)
	}
}

func TestConcurrentWrites(t *testing.T) {
	w := newWriter(t)
	const writers, batches, size = 4, 5, 2000
	var wg sync.WaitGroup
	errs := make(chan error, writers*batches)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				from := (g*batches + b) * size
				if err := w.Write(context.Background(), mkRows("conc", from, size, base)); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, total, err := w.Counts(context.Background(), "conc"); err != nil || total != writers*batches*size {
		t.Fatalf("Counts total = %d, %v; want %d", total, err, writers*batches*size)
	}
}

// TestServerDown: with the server gone a Write fails retryably, and the
// same rows go in once it is back.
func TestServerDown(t *testing.T) {
	dir := t.TempDir()
	srv := chenginetest.Start(t, chengine.Options{Dir: dir})
	_, port, _ := net.SplitHostPort(srv.Addr())
	reg := prometheus.NewRegistry()
	w := newWriterAt(t, srv.Addr(), "down", WithRegisterer(reg))
	mustWrite(t, w, mkRows("d", 0, 100, base))

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	rows := mkRows("d", 100, 100, base)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := w.Write(ctx, rows)
	cancel()
	if err == nil {
		t.Fatal("Write succeeded with the server stopped")
	}
	t.Logf("server down: kind %s: %v", Kind(err), err)
	if !IsRetryable(err) || appender.IsPermanent(err) {
		t.Fatalf("IsRetryable = %v, IsPermanent = %v for %v", IsRetryable(err), appender.IsPermanent(err), err)
	}
	if gauge(t, reg, "toolaudit_sink_write_errors_total", Kind(err)) != 1 {
		t.Errorf("write_errors_total{kind=%q} != 1", Kind(err))
	}

	tcp, _ := strconv.Atoi(port)
	chenginetest.Start(t, chengine.Options{Dir: dir, TCPPort: tcp})
	// The pool may hold a connection to the dead server: retry as a
	// consumer would, a bounded number of times.
	for attempt := 1; ; attempt++ {
		err = w.Write(context.Background(), rows)
		if err == nil || attempt == 3 || !IsRetryable(err) {
			break
		}
		t.Logf("attempt %d: %v", attempt, err)
	}
	if err != nil {
		t.Fatalf("retry after restart: %v", err)
	}
	if _, total, err := w.Counts(context.Background(), "d"); err != nil || total != 200 {
		t.Fatalf("Counts total = %d, %v; want 200", total, err)
	}
}

// TestPermanent: a column the writer needs was dropped behind its back: the
// server's NO_SUCH_COLUMN_IN_TABLE is permanent (appender.IsPermanent,
// the one rule its callers ask), through Write, through the Appender's
// batches, and for the registry history's table.
func TestPermanent(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	for _, q := range []string{"decisions DROP COLUMN args_raw", "registry_changes DROP COLUMN summary"} {
		if err := w.Conn().Exec(ctx, "ALTER TABLE `"+w.Database()+"`."+q); err != nil {
			t.Fatal(err)
		}
	}
	err := w.Write(ctx, mkRows("p", 0, 10, base))
	t.Logf("kind %s: %v", Kind(err), err)
	if !appender.IsPermanent(err) || IsRetryable(err) {
		t.Fatalf("IsPermanent = %v, IsRetryable = %v for %v", appender.IsPermanent(err), IsRetryable(err), err)
	}
	b := appender.NewBatch(w.Appender())
	if _, ok := b.(*Batch); !ok {
		t.Fatalf("the Appender's batch is a %T, want a *Batch", b)
	}
	b.Append(mkRows("p", 0, 10, base))
	if err := b.Write(ctx); !appender.IsPermanent(err) || Kind(err) != KindSchema {
		t.Fatalf("the Appender's batch: kind %s, permanent %v: %v", Kind(err), appender.IsPermanent(err), err)
	}
	cs := storeRows()(&schema.Listing{EventID: "l1", ObservedAt: base, Registry: "fleet", Server: "github", Op: schema.OpSnapshot,
		Tools: []schema.Tool{{Name: "search", InputSchema: []byte(`{"type":"object"}`)}}})
	if err := w.WriteRegistryChanges(ctx, cs); !appender.IsPermanent(err) || Kind(err) != KindSchema {
		t.Fatalf("WriteRegistryChanges: kind %s, permanent %v: %v", Kind(err), appender.IsPermanent(err), err)
	}
	// And a new writer refuses to start on that table.
	_, err = NewClickHouse(context.Background(), Config{Addr: []string{chenginetest.Server(t).Addr()}, Database: w.Database()})
	if !errors.Is(err, ErrSchemaMismatch) || !appender.IsPermanent(err) {
		t.Fatalf("NewClickHouse on a mismatched table: %v; want ErrSchemaMismatch", err)
	}
}

func TestNoTable(t *testing.T) {
	srv := chenginetest.Server(t)
	_, err := NewClickHouse(context.Background(), Config{Addr: []string{srv.Addr()}, Database: testDB(t)})
	if !errors.Is(err, ErrSchemaMismatch) {
		t.Fatalf("NewClickHouse without the table: %v; want ErrSchemaMismatch", err)
	}
}

func TestClose(t *testing.T) {
	w := newWriter(t)
	mustWrite(t, w, nil) // empty batch: no-op
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	err := w.Write(context.Background(), mkRows("c", 0, 1, base))
	if !errors.Is(err, ErrClosed) || IsRetryable(err) || appender.IsPermanent(err) {
		t.Fatalf("Write after Close: %v", err)
	}
}

func TestCanceled(t *testing.T) {
	w := newWriter(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := w.Write(ctx, mkRows("x", 0, 10, base))
	if err == nil || Kind(err) != KindCanceled || IsRetryable(err) || appender.IsPermanent(err) {
		t.Fatalf("Write with a canceled context: kind %q: %v", Kind(err), err)
	}
}
