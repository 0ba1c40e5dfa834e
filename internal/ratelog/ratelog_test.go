package ratelog

import (
	"testing"
	"time"
)

func TestEvery(t *testing.T) {
	e := Every{Interval: 50 * time.Millisecond}
	if ok, n := e.Allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for i := 0; i < 3; i++ {
		if ok, _ := e.Allow(); ok {
			t.Fatal("let through within the interval")
		}
	}
	time.Sleep(60 * time.Millisecond)
	if ok, n := e.Allow(); !ok || n != 3 {
		t.Fatalf("after the interval: %v, %d suppressed", ok, n)
	}
}
