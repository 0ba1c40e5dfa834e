package fail

import "testing"

func TestFail(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Error("boom") })
	t.Run("subskip", func(t *testing.T) { t.Skipf("nope %d", 1) })
}
