package approvals

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/toolaudit/toolaudit/schema"
)

// Gate is the approvals policy and the current baseline, the input that
// resolution reads (resolve.Resolver.Approvals). The baseline is
// replaced as approval events arrive (Publish); Check reads it with one
// atomic load. Safe for concurrent use.
type Gate struct {
	policy Policy
	stamp  string // policy.String()
	cur    atomic.Pointer[Baseline]
}

// NewGate returns a gate of policy p over baseline b (nil: empty).
func NewGate(p Policy, b *Baseline) *Gate {
	g := &Gate{policy: p, stamp: p.String()}
	g.Publish(b)
	return g
}

// Publish makes b the baseline calls are checked against.
func (g *Gate) Publish(b *Baseline) {
	if b == nil {
		b = (&Set{}).Snapshot()
	}
	g.cur.Store(b)
}

// Baseline returns the current baseline.
func (g *Gate) Baseline() *Baseline { return g.cur.Load() }

// PolicyString is Policy().String(), made once: decisions' policy stamp
// carries it.
func (g *Gate) PolicyString() string { return g.stamp }

// Policy returns the gate's policy.
func (g *Gate) Policy() *Policy { return &g.policy }

// Outcome is the approvals check of one call's resolved definition.
type Outcome struct {
	Approval schema.Approval // "" when the rule is off
	Version  string          // the baseline's Label; "" when off
	Refuse   bool            // block: the call is M4 with Reason
	Reason   string
}

// Check checks the definition digest of a registry's server's tool,
// current at the call, against the baseline under the rule of that
// server. An approved definition costs one map lookup; the reason of a
// refusal is only built for one.
func (g *Gate) Check(registry, server, tool, digest string) Outcome {
	rule := g.policy.For(registry, server)
	if rule.Mode == Off {
		return Outcome{}
	}
	b := g.cur.Load()
	o := Outcome{Version: b.Label()}
	if e := b.Lookup(registry, server, tool, digest); e != nil {
		if e.State == Approved {
			o.Approval = schema.ApprovalApproved
			return o
		}
		o.Approval = schema.ApprovalRejected
		if rule.Mode == Block {
			o.Refuse = true
			o.Reason = "definition " + digest + " of " + name(server, tool) + " was rejected by " + strconv.Quote(e.By) +
				reasonOf(e.Reason) + " (approved: " + list(b.Approved(registry, server, tool)) + "; baseline " + o.Version + ")"
		}
		return o
	}
	approved := b.Approved(registry, server, tool)
	if len(approved) == 0 {
		o.Approval = schema.ApprovalNew
		if rule.Mode == Block && rule.FirstSeen == Hold {
			o.Refuse = true
			o.Reason = "definition " + digest + " of " + name(server, tool) + " is held until approved: no definition of it is approved (baseline " + o.Version + ")"
		}
		return o
	}
	o.Approval = schema.ApprovalUnapproved
	if rule.Mode == Block {
		o.Refuse = true
		o.Reason = "definition " + digest + " of " + name(server, tool) + " is not approved (approved: " + list(approved) + "; baseline " + o.Version + ")"
	}
	return o
}

func name(server, tool string) string {
	if server == "" {
		return "tool " + strconv.Quote(tool)
	}
	return "tool " + strconv.Quote(tool) + " of server " + strconv.Quote(server)
}

func reasonOf(r string) string {
	if r == "" {
		return ""
	}
	return ": " + strconv.Quote(r)
}

// list names the approved digests, the first few.
func list(ds []string) string {
	if len(ds) == 0 {
		return "none"
	}
	const most = 3
	if len(ds) > most {
		return strings.Join(ds[:most], ", ") + " and " + strconv.Itoa(len(ds)-most) + " more"
	}
	return strings.Join(ds, ", ")
}
