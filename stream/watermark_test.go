package stream

import (
	"log/slog"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registryversions"
)

func newTestListings(t *testing.T) *listings {
	t.Helper()
	cfg := DefaultConfig()
	l := newListings(cfg, registryversions.New(), testLoggerOrDiscard(t), nil)
	m, err := newMetrics(nil, func() float64 { return ageSeconds(l.caughtUpAsOf()) })
	if err != nil {
		t.Fatal(err)
	}
	l.m = m
	return l
}

func testLoggerOrDiscard(t *testing.T) *slog.Logger {
	if l := testLogger(t); l != nil {
		return l
	}
	return slog.New(slog.DiscardHandler)
}

func (l *listings) pushProbe(at time.Time, start, end map[int32]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.probes = append(l.probes, probe{at: at, start: start, end: end})
	l.checkLocked()
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestCaughtUp: caughtUpAsOf moves to the newest probe whose end offsets
// the applied positions reach; empty partitions (end at start) count as
// read; waiters are woken.
func TestCaughtUp(t *testing.T) {
	l := newTestListings(t)
	t0 := time.Now()
	asOf, ch := l.state()
	if asOf != 0 || !l.caughtUpAsOf().IsZero() {
		t.Fatal("caught up before any probe")
	}
	l.pushProbe(t0, map[int32]int64{0: 0, 1: 7}, map[int32]int64{0: 5, 1: 7})
	if closed(ch) || l.caughtUpAsOf() != (time.Time{}) {
		t.Fatal("caught up with nothing applied")
	}
	l.advance(map[int32]int64{0: 3})
	if closed(ch) {
		t.Fatal("caught up half way")
	}
	l.pushProbe(t0.Add(time.Second), map[int32]int64{0: 0, 1: 7}, map[int32]int64{0: 8, 1: 7})
	l.advance(map[int32]int64{0: 5})
	if !closed(ch) || !l.caughtUpAsOf().Equal(t0) {
		t.Fatalf("caughtUpAsOf %v, want %v", l.caughtUpAsOf(), t0)
	}
	_, ch = l.state()
	l.advance(map[int32]int64{0: 8})
	if !closed(ch) || !l.caughtUpAsOf().Equal(t0.Add(time.Second)) || len(l.probes) != 0 {
		t.Fatalf("caughtUpAsOf %v, probes %d", l.caughtUpAsOf(), len(l.probes))
	}
	// Several satisfied at once: the newest wins; an older one never
	// moves it back.
	l.pushProbe(t0.Add(3*time.Second), nil, map[int32]int64{0: 8})
	l.pushProbe(t0.Add(2*time.Second), nil, map[int32]int64{0: 8})
	if !l.caughtUpAsOf().Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("caughtUpAsOf %v", l.caughtUpAsOf())
	}
}

// TestArrivalMarks: a record's arrival bound is the first mark above its
// offset; thinning keeps bounds late, never early.
func TestArrivalMarks(t *testing.T) {
	l := newTestListings(t)
	t0 := time.Now()
	l.mu.Lock()
	l.addMarkLocked(0, mark{end: 10, at: t0})
	l.addMarkLocked(0, mark{end: 10, at: t0.Add(time.Second)}) // no progress: the earlier time stays
	l.addMarkLocked(0, mark{end: 20, at: t0.Add(2 * time.Second)})
	l.mu.Unlock()
	if at, below, ok := l.arrival(0, 5); !ok || !at.Equal(t0) || below != 10 {
		t.Fatalf("arrival(5) = %v %d %v", at, below, ok)
	}
	if at, below, ok := l.arrival(0, 10); !ok || !at.Equal(t0.Add(2*time.Second)) || below != 20 {
		t.Fatalf("arrival(10) = %v %d %v", at, below, ok)
	}
	if _, _, ok := l.arrival(0, 20); ok {
		t.Fatal("arrival(20) known before any mark covers it")
	}
	if _, _, ok := l.arrival(1, 0); ok {
		t.Fatal("arrival on an unknown partition")
	}

	// Thinning.
	l.mu.Lock()
	for i := 1; i <= 3*maxMarks; i++ {
		l.addMarkLocked(2, mark{end: int64(i * 10), at: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	n := len(l.marks[2])
	l.mu.Unlock()
	if n > maxMarks {
		t.Fatalf("%d marks kept", n)
	}
	for off := int64(0); off < int64(30*maxMarks); off += 7 {
		at, _, ok := l.arrival(2, off)
		if !ok {
			t.Fatalf("arrival(%d) lost", off)
		}
		exact := t0.Add(time.Duration(off/10+1) * time.Millisecond)
		if at.Before(exact) {
			t.Fatalf("arrival(%d) = %v, earlier than the true bound %v", off, at, exact)
		}
	}
}
