package stream

import (
	"testing"
	"time"
)

func (w *watermark) pushProbe(at time.Time, start, end map[int32]int64) bool {
	return w.probed(probe{at: at, start: start, end: end})
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWatermark: the watermark moves to the newest probe whose end
// offsets the applied positions reach; empty partitions (end at start)
// count as read; waiters are woken; the initial catch-up is reported once.
func TestWatermark(t *testing.T) {
	w := newWatermark()
	t0 := time.Now()
	asOf, ch := w.state()
	if asOf != 0 || !w.time().IsZero() {
		t.Fatal("caught up before any probe")
	}
	if w.pushProbe(t0, map[int32]int64{0: 0, 1: 7}, map[int32]int64{0: 5, 1: 7}) || closed(ch) || !w.time().IsZero() {
		t.Fatal("caught up with nothing applied")
	}
	if w.advance(map[int32]int64{0: 3}) || closed(ch) {
		t.Fatal("caught up half way")
	}
	w.pushProbe(t0.Add(time.Second), map[int32]int64{0: 0, 1: 7}, map[int32]int64{0: 8, 1: 7})
	if first := w.advance(map[int32]int64{0: 5}); !first || !closed(ch) || !w.time().Equal(t0) {
		t.Fatalf("watermark %v (first %v), want %v", w.time(), first, t0)
	}
	_, ch = w.state()
	if first := w.advance(map[int32]int64{0: 8}); first || !closed(ch) || !w.time().Equal(t0.Add(time.Second)) || len(w.probes) != 0 {
		t.Fatalf("watermark %v (first %v), probes %d", w.time(), first, len(w.probes))
	}
	// Several satisfied at once: the newest wins; an older one never
	// moves it back.
	w.pushProbe(t0.Add(3*time.Second), nil, map[int32]int64{0: 8})
	w.pushProbe(t0.Add(2*time.Second), nil, map[int32]int64{0: 8})
	if !w.time().Equal(t0.Add(3 * time.Second)) {
		t.Fatalf("watermark %v", w.time())
	}
	// A wall-clock time before the watermark was made never releases
	// anything: it maps to zero or less.
	if w.mono(w.epoch.Add(-time.Hour)) > 0 {
		t.Fatal("a time before the epoch maps above zero")
	}
}

// TestArrivalMarks: a record's arrival bound is the first mark above its
// offset; thinning keeps bounds late, never early.
func TestArrivalMarks(t *testing.T) {
	l := newArrivals()
	t0 := time.Now()
	l.add(0, mark{end: 10, at: t0})
	l.add(0, mark{end: 10, at: t0.Add(time.Second)}) // no progress: the earlier time stays
	l.add(0, mark{end: 20, at: t0.Add(2 * time.Second)})
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
	for i := 1; i <= 3*maxMarks; i++ {
		l.add(2, mark{end: int64(i * 10), at: t0.Add(time.Duration(i) * time.Millisecond)})
	}
	n := len(l.marks[2])
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
