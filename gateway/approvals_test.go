package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/schema"
)

// approveAll is a baseline approving every definition the gateway lists
// now, at version v.
func approveAll(t *testing.T, st *started, v int64, set *approvals.Set) *approvals.Baseline {
	t.Helper()
	ver := st.gw.Store().At(st.gw.cfg.Registry, time.Now())
	for _, s := range ver.Servers() {
		for _, tl := range s.Tools() {
			v++
			if err := set.Apply(&approvals.Event{Registry: st.gw.cfg.Registry, Server: s.Name, Tool: tl.Name, Digest: tl.Digest,
				Verb: approvals.Approve, By: "ops", At: time.Now()}, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	return set.Snapshot()
}

// TestApprovals: a server changes a tool and announces it; the client
// relists, so its seen digest is the current one. Under block the call to
// the new definition is refused (M4, the reason naming both digests, a
// text saying an operator must approve it) before the upstream sees it,
// until the new definition is approved; then it is forwarded. Under warn
// it is forwarded and the audit record marked unapproved.
func TestApprovals(t *testing.T) {
	for _, mode := range []string{"block", "warn"} {
		t.Run(mode, func(t *testing.T) {
			fx, url := httpFixture(t, "fx")
			p, _ := approvals.ParsePolicy(mode)
			gate := approvals.NewGate(p, nil)
			st := start(t, Config{Upstreams: []Upstream{{Name: "fx", Trust: 1, URL: url}}}, Options{Approvals: gate})
			var set approvals.Set
			gate.Publish(approveAll(t, st, 0, &set))
			c := connect(t, st.url, nil)
			before := c.list(t)["fx__transfer"].Meta[MetaDigest].(string)
			if got, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5}`); je != nil || got != "sent 5 to bob" {
				t.Fatalf("approved: %q %v", got, je)
			}
			if _, je := c.call(t, "fx__change_schema", `{}`); je != nil {
				t.Fatal(je)
			}
			st.waitChanged(t, "fx__transfer")
			after := c.list(t)["fx__transfer"].Meta[MetaDigest].(string)
			if after == before {
				t.Fatal("the definition did not change")
			}
			calls := fx.Calls()
			got, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5,"cc":"eve"}`)
			last := st.rec.recs()[len(st.rec.recs())-1].Decision
			if mode == "warn" {
				if je != nil || got != "sent 5 to bob" || last.Approval != schema.ApprovalUnapproved || last.Class != schema.OK || last.BaselineVersion == "" {
					t.Fatalf("warn: %q %v %+v", got, je, last)
				}
				return
			}
			if je == nil {
				t.Fatal("the unapproved definition was forwarded")
			}
			a := decodeAnswer(t, je)
			if a.Class != "M4" || !strings.Contains(a.Reason, after) || !strings.Contains(a.Reason, "approved: "+before) ||
				!strings.Contains(je.Message, "not approved by the operators") || strings.Contains(je.Message, "List the tools again") {
				t.Fatalf("block: %s %+v", je.Message, a)
			}
			if n := fx.Calls() - calls; n != 0 {
				t.Fatalf("the upstream received %d calls", n)
			}
			if last.Approval != schema.ApprovalUnapproved || !strings.Contains(st.gw.step.PolicyVersion, "+approvals(block+tofu)") {
				t.Fatalf("audit record %+v, policy %s", last, st.gw.step.PolicyVersion)
			}
			gate.Publish(approveAll(t, st, set.Version(), &set))
			if got, je := c.call(t, "fx__transfer", `{"to":"bob","amount":5,"cc":"eve"}`); je != nil || got != "sent 5 to bob" {
				t.Fatalf("after the approval: %q %v", got, je)
			}
		})
	}
}
