package topic

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
)

// fleet starts n followers of the approvals topic (the instances of a
// fleet), each caught up and following until the test ends; the first
// registers its metrics with reg.
func fleet(t testing.TB, opts []kgo.Opt, n int, reg prometheus.Registerer) []*approvals.Gate {
	t.Helper()
	p, _ := approvals.ParsePolicy("block")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	var gates []*approvals.Gate
	for i := range n {
		g := approvals.NewGate(p, nil)
		if i > 0 {
			reg = nil
		}
		f, err := NewFollower(opts, Default, g, nil, reg)
		if err != nil {
			t.Fatal(err)
		}
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
	reg := prometheus.NewRegistry()
	gates := fleet(t, opts, 2, reg)
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
	// The metrics: the version in force, the event skipped.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP toolaudit_approvals_bad_events_total Approval events skipped because they do not decode or validate (logged with their offset).
# TYPE toolaudit_approvals_bad_events_total counter
toolaudit_approvals_bad_events_total 1
# HELP toolaudit_approvals_baseline_version Version of the approved baseline in force (approval events applied): equal on every instance that has caught up.
# TYPE toolaudit_approvals_baseline_version gauge
toolaudit_approvals_baseline_version 4
`), "toolaudit_approvals_bad_events_total", "toolaudit_approvals_baseline_version"); err != nil {
		t.Error(err)
	}
	if f, _ := NewFollower(opts, "missing", gates[0], nil, nil); f.CatchUp(ctx) == nil {
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
	gates := fleet(b, opts, 2, nil)
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
