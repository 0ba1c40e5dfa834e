package topic

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/schema"
)

func broker(t testing.TB, opts ...kfake.Opt) []kgo.Opt {
	t.Helper()
	kf, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	return []kgo.Opt{kgo.SeedBrokers(kf.ListenAddrs()...)}
}

func produce(t *testing.T, opts []kgo.Opt, topic string, values ...[]byte) {
	t.Helper()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range values {
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func ev(verb approvals.Verb, tool, digestOf string) *approvals.Event {
	d, _ := schema.Digest(digestOf, []byte(`{}`))
	return &approvals.Event{EventID: "e", Registry: "prod", Server: "s", Tool: tool, Digest: d, Verb: verb, By: "alice", At: t0, Reason: "r"}
}

// Ensure creates a one-partition topic; events produced are loaded at
// version offset + 1, a bad record is skipped and counted; a topic of
// several partitions is refused by every operation.
func TestApprovalsTopic(t *testing.T) {
	ctx := context.Background()
	opts := broker(t, kfake.SeedTopics(3, "wide"))
	if _, _, err := Load(ctx, opts, Default, nil); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("load before the topic: %v", err)
	}
	if created, err := Create(ctx, opts, Default); err != nil || !created {
		t.Fatalf("create: %t, %v", created, err)
	}
	if created, err := Create(ctx, opts, Default); err != nil || created {
		t.Fatalf("create again: %t, %v", created, err)
	}
	if err := Ensure(ctx, opts, Default); err != nil {
		t.Fatal(err)
	}
	if err := Ensure(ctx, opts, Default); err != nil { // again: exists
		t.Fatal(err)
	}
	set, st, err := Load(ctx, opts, Default, nil)
	if err != nil || set.Version() != 0 || st.Records != 0 {
		t.Fatalf("empty topic: %v %d %+v", err, set.Version(), st)
	}
	v, err := Produce(ctx, opts, Default, ev(approvals.Approve, "a", "a1"), ev(approvals.Approve, "b", "b1"))
	if err != nil || v != 2 {
		t.Fatalf("produce: %v, version %d", err, v)
	}
	produce(t, opts, Default, []byte(`{"type":"approval"}`), []byte(`not json`))
	if v, err = Produce(ctx, opts, Default, ev(approvals.Reject, "a", "a1")); err != nil || v != 5 {
		t.Fatalf("produce: %v, version %d", err, v)
	}
	set, st, err = Load(ctx, opts, Default, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := set.Snapshot()
	if b.Version() != 5 || st != (Stats{Records: 5, Applied: 3, Bad: 2}) || b.Len() != 2 {
		t.Fatalf("version %d, stats %+v, %d entries", b.Version(), st, b.Len())
	}
	if e := b.Lookup("prod", "s", "a", ev("", "", "a1").Digest); e == nil || e.State != approvals.Rejected {
		t.Fatalf("a: %+v", e)
	}
	if _, err := Produce(ctx, opts, Default, &approvals.Event{Registry: "prod"}); err == nil {
		t.Fatal("an invalid event produced")
	}
	for name, err := range map[string]error{
		"ensure":  Ensure(ctx, opts, "wide"),
		"produce": func() error { _, err := Produce(ctx, opts, "wide", ev(approvals.Approve, "a", "a1")); return err }(),
		"load":    func() error { _, _, err := Load(ctx, opts, "wide", nil); return err }(),
	} {
		if !errors.Is(err, ErrPartitions) {
			t.Errorf("%s on 3 partitions: %v", name, err)
		}
	}
}
