package stream

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// fleetEvents: host sessions relisting the corpus's real manifests every
// 30 s (1,000 sessions: 8.3 hours of event time, inside the store's late
// window), 3% changing a definition.
func fleetEvents(t testing.TB, sessions int) []fleet.Event {
	t.Helper()
	ms, err := fleet.ReadManifests(corpus("mcp", "listings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return fleet.Generate(fleet.Config{Sessions: sessions, Every: 30 * time.Second, ChangeRate: 0.03, Seed: 3}, ms)
}

// fleetCalls are calls to the fleet registry pinned to each server, at
// instants spread over its history: their versions and drift show whether
// the history is the same.
func fleetCalls(evs []fleet.Event) [][]byte {
	var out [][]byte
	for i := 0; i < len(evs); i += 7 {
		e := evs[i]
		out = append(out, fmt.Appendf(nil, `{"type":"call","event_id":"fc-%d","emitted_at":%q,"registry":"fleet","session_id":"s%d","server":%q,"tool":"search_repositories","arguments":{"query":"q"}}`,
			i, e.ObservedAt.Add(500*time.Microsecond).Format(time.RFC3339Nano), i%5, e.Server))
	}
	return out
}

// TestCheckpointRestart: an instance that read a long listings topic
// leaves a registry checkpoint at shutdown; listings then arrive late
// (observed hours before the newest the checkpoint holds, many changing a
// definition); a new instance loads the checkpoint, reads only what came
// after it (also past a torn checkpoint write), and decides every call
// exactly as `check` does over all the listings.
func TestCheckpointRestart(t *testing.T) {
	c := newCluster(t, 3)
	prod := newProducer(t, c)
	evs := fleetEvents(t, 1000)
	rng := rand.New(rand.NewPCG(1, 2))
	var early, late [][]byte
	for _, e := range evs {
		if rng.IntN(10) == 0 || e.Changed && rng.IntN(2) == 0 {
			late = append(late, e.Line)
		} else {
			early = append(early, e.Line)
		}
	}
	sample := readLines(t, corpus("sample", "listings.jsonl"))
	produce(t, prod, listingsTopic, append(early, sample...))
	calls := append(readLines(t, corpus("sample", "calls.jsonl")), fleetCalls(evs)...)
	produce(t, prod, callsTopic, calls)

	cfg := testConfig(c)
	cfg.CheckpointEvery = time.Hour // only the one written at shutdown
	reg := prometheus.NewRegistry()
	sinkA := newRecSink()
	a := start(t, cfg, nil, sinkA, reg)
	eventually(t, 60*time.Second, "instance A decides every call", func() bool { return sinkA.unique() == len(calls) })
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := testutil.ToFloat64(a.p.m.checkpointsWritten); n != 1 {
		t.Fatalf("%v checkpoints written, want 1 (at shutdown)", n)
	}
	if testutil.ToFloat64(a.p.m.checkpointLoaded) != 0 {
		t.Fatal("A found a checkpoint in a new topic")
	}

	// A torn write after A's checkpoint: chunks of a checkpoint whose
	// marker never came. The reader must go back to A's.
	adm := admin(t, c)
	ends, err := adm.ListEndOffsets(testContext(t, 10*time.Second), cfg.CheckpointTopic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(cfg.CheckpointTopic, 0)
	produceRecords(t, prod, []*kgo.Record{{Topic: cfg.CheckpointTopic, Partition: 0, Value: []byte("torn"), Headers: []kgo.RecordHeader{
		{Key: hdrGen, Value: []byte("torn")}, {Key: hdrPart, Value: []byte("0")}, {Key: hdrPrev, Value: fmt.Append(nil, end.Offset-1)}}}})

	produce(t, prod, listingsTopic, late)

	cfg.Group, cfg.AnalysisID = "resolverd-b", "b"
	storeB := registry.New()
	sinkB := newRecSink()
	b := start(t, cfg, storeB, sinkB, prometheus.NewRegistry())
	eventually(t, 60*time.Second, "instance B decides every call", func() bool { return sinkB.unique() == len(calls) })
	if testutil.ToFloat64(b.p.m.checkpointLoaded) != 1 {
		t.Fatal("B did not load the checkpoint")
	}
	if n := storeB.Stats().Listings; n != int64(len(late)) {
		t.Fatalf("B applied %d listings, want the %d produced after the checkpoint", n, len(late))
	}

	// Every decision as over all the listings at once.
	all := registry.New()
	var ls []*schema.Listing
	for _, l := range append(append(early, sample...), late...) {
		li, err := schema.DecodeListing(l)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, li)
	}
	all.Apply(ls...)
	rows, _ := sinkB.snapshot()
	var r resolve.Resolver
	var dec schema.CallDecoder
	var call schema.Call
	drift, versions := 0, map[string]bool{}
	for _, l := range calls {
		var want schema.Decision
		if err := dec.Decode(l, &call); err != nil {
			resolve.Malformed(err, &want)
		} else {
			r.Resolve(all.Snapshot(), &call, &want)
		}
		got := rows[want.EventID].Decision
		if got != want {
			t.Fatalf("call %s: decided\n%+v\nwant\n%+v", want.EventID, got, want)
		}
		if want.Drift {
			drift++
		}
		versions[want.RegistryVersion] = true
	}
	if drift == 0 || len(versions) < 100 {
		t.Fatalf("%d calls with drift, %d versions: the late changes are not tested", drift, len(versions))
	}
}
