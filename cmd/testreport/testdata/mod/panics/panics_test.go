package panics

import "testing"

func TestPanic(t *testing.T) {
	t.Log("before the panic")
	panic("kaboom")
}
