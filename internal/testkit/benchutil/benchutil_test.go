package benchutil

import (
	"os"
	"slices"
	"testing"
	"time"
)

func TestInts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
	}{
		{"1000", []int{1000}},
		{"1000, 5000", []int{1000, 5000}},
		{"", nil},
		{"0", nil},
		{"-5", nil},
		{"1,x", nil},
		{"1,,2", nil},
	} {
		got, err := Ints(tc.in)
		if (err != nil) != (tc.want == nil) || !slices.Equal(got, tc.want) {
			t.Errorf("Ints(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestCPUTime(t *testing.T) {
	a := CPUTime()
	for x := 0; CPUTime() == a; x++ { // burn CPU until the clock moves
		_ = x * x
	}
	if b := CPUTime(); b <= a {
		t.Errorf("CPU time went from %v to %v", a, b)
	}
}

// TestProcessCPU: this process's CPU read from /proc moves as it burns
// CPU, and stays within two ticks of what getrusage says.
func TestProcessCPU(t *testing.T) {
	a, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for x := 0; ; x++ {
		b, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if b > a {
			break
		}
		_ = x * x
	}
	if _, err := ProcessCPU(-1); err == nil {
		t.Error("no error for a process that does not exist")
	}
	p, r := func() (time.Duration, time.Duration) {
		p, _ := ProcessCPU(os.Getpid())
		return p, CPUTime()
	}()
	if d := r - p; d < -20*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("/proc says %v, getrusage %v", p, r)
	}
}
