package benchutil

import (
	"slices"
	"testing"
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
