package stream

import (
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/sink/appender"
)

// TestTee: through Tee(store, topic), offsets are committed only once
// both sinks took a batch; while the second fails, the first is not
// written again (each batch reaches the store once), and nothing is
// committed.
func TestTee(t *testing.T) {
	c, calls := seedCorpus(t, 3, "sample")
	store, topic := newRecSink(), newRecSink()
	topic.failing.Store(true)
	r := start(t, testConfig(c), nil, appender.Tee(store, topic), nil)
	// How many calls the first batches hold depends on how fast they
	// were read (batch_wait), and a stalled batch holds the rest back:
	// wait for some in the first sink, not all.
	eventually(t, 30*time.Second, "calls in the first sink, the second retried", func() bool {
		return store.unique() > 0 && topic.failures.Load() >= 3
	})
	adm := admin(t, c)
	committed, _ := offsets(t, adm, "resolverd")
	for p, o := range committed {
		if o > 0 {
			t.Fatalf("partition %d committed at %d while the second sink fails", p, o)
		}
	}
	topic.failing.Store(false)
	eventually(t, 10*time.Second, "offsets committed to the end", func() bool { return allCommitted(t, adm, "resolverd") })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	_, storeTotal := store.snapshot()
	_, topicTotal := topic.snapshot()
	if storeTotal != len(calls) || topicTotal != len(calls) || topic.unique() != len(calls) {
		t.Fatalf("store took %d rows, topic %d (%d unique), for %d calls", storeTotal, topicTotal, topic.unique(), len(calls))
	}
}
