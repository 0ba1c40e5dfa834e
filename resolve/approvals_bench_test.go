package resolve_test

import (
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// BenchmarkResolveApprovals: BenchmarkResolve's calls with an approvals
// gate. none is no gate (BenchmarkResolve); off a gate whose policy is
// off; warn and block a gate over a baseline that approves every
// definition the calls resolve to (the cost of the check on the path
// that passes: one map lookup); scoped is block with per-registry rules.
// One op is one call.
func BenchmarkResolveApprovals(b *testing.B) {
	bc := loadBench(b)
	var set approvals.Set
	var r resolve.Resolver
	var d schema.Decision
	n := int64(0)
	for _, c := range bc.calls {
		r.Resolve(bc.snap, c, &d)
		if d.CurrentDigest == "" {
			continue
		}
		n++
		if err := set.Apply(&approvals.Event{Registry: c.Registry, Server: d.ResolvedServer, Tool: d.ResolvedTool,
			Digest: d.CurrentDigest, Verb: approvals.Approve, By: "bench", At: time.Unix(0, 0)}, n); err != nil {
			b.Fatal(err)
		}
	}
	base := set.Snapshot()
	for _, tc := range []struct{ name, policy string }{
		{"none", ""}, {"off", "off"}, {"warn", "warn"}, {"block", "block"}, {"scoped", "block,bench-a=warn,bench-b/x=off"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var r resolve.Resolver
			if tc.policy != "" {
				p, err := approvals.ParsePolicy(tc.policy)
				if err != nil {
					b.Fatal(err)
				}
				r.Approvals = approvals.NewGate(p, base)
			}
			var d schema.Decision
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Resolve(bc.snap, bc.calls[i%len(bc.calls)], &d)
			}
		})
	}
}
