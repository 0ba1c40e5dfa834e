package topic

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
)

// fleet starts n followers of the approvals topic (the instances of a
// fleet), each caught up and following until the test ends.
func fleet(t testing.TB, opts []kgo.Opt, n int) []*approvals.Gate {
	t.Helper()
	p, _ := approvals.ParsePolicy("block")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var gates []*approvals.Gate
	for range n {
		g := approvals.NewGate(p, nil)
		f := NewFollower(opts, Default, g, nil)
		if err := f.CatchUp(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { f.Run(ctx) })
		gates = append(gates, g)
	}
	return gates
}

// waitVersion waits until every gate's baseline is at version v.
func waitVersion(t testing.TB, gates []*approvals.Gate, v int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for _, g := range gates {
		for g.Baseline().Version() < v {
			if time.Now().After(deadline) {
				t.Fatalf("baseline version %d, want %d after %v", g.Baseline().Version(), v, within)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

// TestFollow: two instances catch up with the approvals written before
// they started, then see each new one; a bad event is skipped by both.
func TestFollow(t *testing.T) {
	ctx := context.Background()
	opts := broker(t)
	if err := Ensure(ctx, opts, Default); err != nil {
		t.Fatal(err)
	}
	if _, err := Produce(ctx, opts, Default, ev(approvals.Approve, "a", "a1")); err != nil {
		t.Fatal(err)
	}
	gates := fleet(t, opts, 2)
	for _, g := range gates {
		if b := g.Baseline(); b.Version() != 1 || b.Lookup("prod", "s", "a", ev("", "", "a1").Digest) == nil {
			t.Fatalf("after catch-up: version %d", b.Version())
		}
	}
	produce(t, opts, Default, []byte(`{"type":"approval","verb":"approve"}`))
	v, err := Produce(ctx, opts, Default, ev(approvals.Reject, "a", "a1"), ev(approvals.Approve, "b", "b1"))
	if err != nil || v != 4 {
		t.Fatalf("%v %d", err, v)
	}
	waitVersion(t, gates, 4, 10*time.Second)
	for _, g := range gates {
		b := g.Baseline()
		if b.Len() != 2 || b.Lookup("prod", "s", "a", ev("", "", "a1").Digest).State != approvals.Rejected {
			t.Fatalf("after follow: %d entries", b.Len())
		}
		if o := g.Check("prod", "s", "a", ev("", "", "a1").Digest); !o.Refuse || o.Version != "4" {
			t.Fatalf("check: %+v", o)
		}
	}
	if err := NewFollower(opts, "missing", gates[0], nil).CatchUp(ctx); err == nil {
		t.Fatal("caught up with a missing topic")
	}
}

// BenchmarkPropagation: one op is an approval written (acks=all) until
// two followers (two instances of a fleet) have published it, against
// the in-process kfake broker: the bound of an approval reaching a fleet,
// less the network.
func BenchmarkPropagation(b *testing.B) {
	ctx := context.Background()
	opts := broker(b)
	if err := Ensure(ctx, opts, Default); err != nil {
		b.Fatal(err)
	}
	gates := fleet(b, opts, 2)
	cl, err := kgo.NewClient(append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	i := 0
	for b.Loop() {
		i++
		e := ev(approvals.Approve, "t"+strconv.Itoa(i), "d")
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: Default, Key: []byte(e.Key()), Value: e.AppendJSON(nil)}).First()
		if err != nil {
			b.Fatal(err)
		}
		waitVersion(b, gates, r.Offset+1, 10*time.Second)
	}
}
