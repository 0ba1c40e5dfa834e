package approvals

import (
	"strconv"
	"testing"
)

// BenchmarkGateCheck: the approvals check alone over a baseline of 10,000
// definitions (1,000 servers of 10 tools): an approved definition under
// block (one map lookup), one not approved (the refusal's reason is
// built), and an off policy.
func BenchmarkGateCheck(b *testing.B) {
	var s Set
	n := int64(0)
	for i := range 1000 {
		for j := range 10 {
			n++
			s.Apply(ev(Approve, "srv"+strconv.Itoa(i), "tool"+strconv.Itoa(j), dg(strconv.Itoa(i*10+j))), n)
		}
	}
	base := s.Snapshot()
	block, _ := ParsePolicy("block")
	off, _ := ParsePolicy("off")
	approved, other := dg(strconv.Itoa(5*10+3)), dg("x")
	for _, tc := range []struct {
		name   string
		p      Policy
		digest string
	}{{"approved", block, approved}, {"unapproved", block, other}, {"off", off, other}} {
		b.Run(tc.name, func(b *testing.B) {
			g := NewGate(tc.p, base)
			b.ReportAllocs()
			for b.Loop() {
				g.Check("prod", "srv5", "tool3", tc.digest)
			}
		})
	}
}
