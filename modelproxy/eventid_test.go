package modelproxy

import (
	"slices"
	"testing"
)

// TestEventIDUnique: the call event ids of one request are unique
// however the upstream repeats its ids (an upstream's id may look like
// one the proxy makes).
func TestEventIDUnique(t *testing.T) {
	var r request
	var got []string
	for _, id := range []string{"x", "x", "x#3", "x", "y", "x#3", "x"} {
		got = append(got, r.eventID(id))
	}
	if want := []string{"x", "x#2", "x#3", "x#4", "y", "x#3#2", "x#5"}; !slices.Equal(got, want) {
		t.Errorf("ids %v, want %v", got, want)
	}
}
