package history

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/topicrange"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/approvals/topic"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func ev(verb approvals.Verb, tool, def, by string, min int) *approvals.Event {
	d, _ := schema.Digest(tool, []byte(def))
	return &approvals.Event{EventID: "e-" + by, Registry: "prod", Server: "github", Tool: tool, Digest: d,
		Verb: verb, By: by, At: t0.Add(time.Duration(min) * time.Minute), Reason: "reviewed"}
}

// run starts a Recorder of the approvals topic writing to w, stopped when
// the test ends.
func run(t *testing.T, opts []kgo.Opt, w Writer, reg prometheus.Registerer) {
	t.Helper()
	r, err := New(opts, topic.Default, w, Options{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// waitHistory waits up to 10 s for the table to hold want.
func waitHistory(t *testing.T, ch *sink.ClickHouse, want []approvals.Recorded) {
	t.Helper()
	var got []approvals.Recorded
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if got, err = ch.ApprovalEvents(context.Background(), "", 0); err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(got, want) {
			return
		}
	}
	t.Fatalf("approval history:\n got %+v\nwant %+v", got, want)
}

// TestRecorder: every event of the approvals topic reaches table
// approval_events with its baseline version, a bad record is skipped and
// counted, failed writes are retried; after the topic lost its first
// records (compaction, here DeleteRecords) a restart reads what is left
// and the table still holds every event, each once; a later event is
// written as it comes.
func TestRecorder(t *testing.T) {
	ctx := context.Background()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(kf.ListenAddrs()...)}
	if err := topic.Ensure(ctx, opts, topic.Default); err != nil {
		t.Fatal(err)
	}
	srv := chenginetest.Server(t)
	ch, err := sink.NewClickHouse(ctx, sink.Config{Addr: []string{srv.Addr()}, Database: "history_test"}, sink.WithMigrate())
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	const v1, v2 = `{"type":"object"}`, `{"type":"object","properties":{"labels":{"type":"array"}}}`
	es := []*approvals.Event{
		ev(approvals.Approve, "create_issue", v1, "ana", 0),
		ev(approvals.Reject, "create_issue", v2, "bo", 1),
	}
	if _, err := topic.Produce(ctx, opts, topic.Default, es...); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic.Default, Value: []byte(`{"type":"approval","verb":"bless"}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	last := ev(approvals.Approve, "create_issue", v2, "cy", 2) // supersedes bo's verdict: compaction keeps it alone
	if _, err := topic.Produce(ctx, opts, topic.Default, last); err != nil {
		t.Fatal(err)
	}
	want := []approvals.Recorded{{Event: *es[0], Version: 1}, {Event: *es[1], Version: 2}, {Event: *last, Version: 4}}

	// The first two writes fail: retried, nothing lost.
	var fails atomic.Int32
	flaky := writerFunc(func(ctx context.Context, rs []approvals.Recorded) error {
		if fails.Add(1) <= 2 {
			return errors.New("clickhouse unavailable")
		}
		return ch.WriteApprovalEvents(ctx, rs)
	})
	reg := prometheus.NewRegistry()
	runCtx, stop := context.WithCancel(ctx)
	r, err := New(opts, topic.Default, flaky, Options{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	waitHistory(t, ch, want)
	// The rows are in the table a moment before the write that stored
	// them returns and the version is set: stopping at once could cancel
	// that write's last round trip (seen under load).
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(r.version) != 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(r.bad); n != 1 {
		t.Errorf("bad events %v, want 1", n)
	}
	if n := testutil.ToFloat64(r.hw.WriteErrors); n != 2 {
		t.Errorf("write errors %v, want 2", n)
	}
	if n := testutil.ToFloat64(r.version); n != 4 {
		t.Errorf("version %v, want 4", n)
	}

	// The topic loses its first three records (as compaction drops bo's
	// superseded verdict); a restart reads the rest: the history keeps
	// all, each once.
	adm := kadm.NewClient(cl)
	var off kadm.Offsets
	off.Add(kadm.Offset{Topic: topic.Default, Partition: 0, At: 3})
	if _, err := adm.DeleteRecords(ctx, off); err != nil {
		t.Fatal(err)
	}
	var left []int64
	if err := topicrange.ReadAll(ctx, opts, topic.Default, nil, func(_ int32, recs []*kgo.Record) error {
		for _, r := range recs {
			left = append(left, r.Offset)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(left, []int64{3}) {
		t.Fatalf("the topic holds offsets %v, want [3]: the test would prove nothing", left)
	}
	run(t, opts, ch, nil)
	later := ev(approvals.Revoke, "create_issue", v1, "dee", 3)
	if _, err := topic.Produce(ctx, opts, topic.Default, later); err != nil {
		t.Fatal(err)
	}
	waitHistory(t, ch, append(want, approvals.Recorded{Event: *later, Version: 5}))
}

type writerFunc func(ctx context.Context, rs []approvals.Recorded) error

func (f writerFunc) WriteApprovalEvents(ctx context.Context, rs []approvals.Recorded) error {
	return f(ctx, rs)
}
