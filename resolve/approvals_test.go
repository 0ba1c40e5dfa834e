package resolve

import (
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/schema"
)

// TestApprovals: the approvals gate in resolution. github's create_issue
// changes at 100 s (fixture); only its first definition is approved,
// search_code of github-ref is rejected, single's tools were never
// reviewed. Under block a definition not approved is M4 naming both
// digests; under warn it is decided as without approvals and marked; a
// nil gate and an off policy mark nothing.
func TestApprovals(t *testing.T) {
	s := fixture(t)
	issue := `{"owner":"o","repo":"r","title":"t"}`
	v1 := digestOf(t, s, "fleet", "github", "create_issue", 1)
	v2 := digestOf(t, s, "fleet", "github", "create_issue", 101)
	refSearch := digestOf(t, s, "fleet", "github-ref", "search_code", 1)
	var set approvals.Set
	for i, e := range []*approvals.Event{
		{Registry: "fleet", Server: "github", Tool: "create_issue", Digest: v1, Verb: approvals.Approve, By: "alice", At: t0},
		{Registry: "fleet", Server: "github-ref", Tool: "search_code", Digest: refSearch, Verb: approvals.Reject, By: "bob", At: t0, Reason: "exfiltrates"},
	} {
		if err := set.Apply(e, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	base := set.Snapshot()
	before := call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 1}
	after := call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 101}
	rejected := call{reg: "fleet", tool: "search_code", server: "github-ref", args: `{"q":"x"}`, sec: 1}
	fresh := call{reg: "single", tool: "search", args: `{"q":"x"}`, sec: 1}
	badArgs := call{reg: "fleet", tool: "create_issue", server: "github", args: `{"owner":"o"}`, sec: 101}
	for _, tc := range []struct {
		name     string
		policy   string // "-": no gate
		c        call
		class    schema.Class
		approval schema.Approval
		reason   []string
	}{
		{"no gate", "-", after, schema.OK, "", nil},
		{"off", "off", after, schema.OK, "", nil},
		{"warn approved", "warn", before, schema.OK, schema.ApprovalApproved, nil},
		{"warn drifted", "warn", after, schema.OK, schema.ApprovalUnapproved, nil},
		{"block approved", "block", before, schema.OK, schema.ApprovalApproved, nil},
		{"block drifted", "block", after, schema.M4, schema.ApprovalUnapproved, []string{"not approved", v2, "approved: " + v1, "baseline 2"}},
		{"block rejected", "block", rejected, schema.M4, schema.ApprovalRejected, []string{"rejected by", "exfiltrates"}},
		{"block new tofu", "block", fresh, schema.OK, schema.ApprovalNew, nil},
		{"block new hold", "block+hold", fresh, schema.M4, schema.ApprovalNew, []string{"held until approved"}},
		{"block other registry only", "off,single=block+hold", after, schema.OK, "", nil},
		{"block one server", "off,fleet/github=block", after, schema.M4, schema.ApprovalUnapproved, nil},
		// The mark is on every decision with a resolved tool, whatever fails.
		{"warn marks H2", "warn", badArgs, schema.H2, schema.ApprovalUnapproved, nil},
		{"seen_digest M4 first", "block", call{reg: "fleet", tool: "create_issue", server: "github", args: issue, sec: 101, seen: v1}, schema.M4, schema.ApprovalUnapproved, []string{"seen_digest"}},
		{"unresolved: no mark", "block", call{reg: "fleet", tool: "nope", sec: 1}, schema.M1, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Resolver
			if tc.policy != "-" {
				p, err := approvals.ParsePolicy(tc.policy)
				if err != nil {
					t.Fatal(err)
				}
				r.Approvals = approvals.NewGate(p, base)
			}
			var d schema.Decision
			r.Resolve(s.Snapshot(), tc.c.build(t), &d)
			if d.Class != tc.class || d.Approval != tc.approval {
				t.Fatalf("%s %q (approval %q), want %s approval %q", d.Class, d.Reason, d.Approval, tc.class, tc.approval)
			}
			if want := map[bool]string{true: "2", false: ""}[tc.approval != ""]; d.BaselineVersion != want {
				t.Errorf("baseline_version %q, want %q", d.BaselineVersion, want)
			}
			for _, sub := range tc.reason {
				if !strings.Contains(d.Reason, sub) {
					t.Errorf("reason %q lacks %q", d.Reason, sub)
				}
			}
		})
	}
}

// The policy stamp names the approvals policy; a new baseline published
// to the gate decides the next call.
func TestApprovalsPublish(t *testing.T) {
	s := fixture(t)
	p, _ := approvals.ParsePolicy("block,fleet/hub=off")
	g := approvals.NewGate(p, nil)
	r := Resolver{Approvals: g}
	if got := r.Policy(); got != "strict+approvals(block+tofu,fleet/hub=off)" {
		t.Errorf("policy %q", got)
	}
	c := call{reg: "fleet", tool: "create_issue", server: "github", args: `{"owner":"o","repo":"r","title":"t"}`, sec: 101}.build(t)
	var d schema.Decision
	r.Resolve(s.Snapshot(), c, &d)
	if d.Class != schema.OK || d.Approval != schema.ApprovalNew || d.BaselineVersion != "0" {
		t.Fatalf("before: %s %s %s", d.Class, d.Approval, d.BaselineVersion)
	}
	var set approvals.Set
	set.Apply(&approvals.Event{Registry: "fleet", Server: "github", Tool: "create_issue", Digest: digestOf(t, s, "fleet", "github", "create_issue", 1), Verb: approvals.Approve, By: "a", At: t0}, 7)
	g.Publish(set.Snapshot())
	r.Resolve(s.Snapshot(), c, &d)
	if d.Class != schema.M4 || d.Approval != schema.ApprovalUnapproved || d.BaselineVersion != "7" {
		t.Fatalf("after: %s %s %s", d.Class, d.Approval, d.BaselineVersion)
	}
}
