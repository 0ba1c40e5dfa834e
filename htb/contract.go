package htb

import (
	"slices"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
)

// Risk is the effect tier of a tool, read from its contract.
type Risk uint8

// Risk tiers, in increasing order.
const (
	RiskRead        Risk = iota // readOnlyHint: true
	RiskWrite                   // destructiveHint: false
	RiskDestructive             // the MCP default when neither hint says otherwise
)

func (r Risk) String() string {
	switch r {
	case RiskRead:
		return "read"
	case RiskWrite:
		return "write"
	}
	return "destructive"
}

// Contract is what the causal gate and the contract verifier know of a
// tool. It is read from the tool object of the listing, never from the
// inputSchema:
//
//   - Risk from the MCP annotations: readOnlyHint true is read;
//     otherwise destructiveHint false is write; otherwise destructive
//     (the MCP specification's defaults: a tool without annotations is
//     assumed destructive).
//   - Preconditions from _meta["htb/contract"]: {"scope": {ARG: PREFIX},
//     "max": {ARG: NUMBER}}: a string argument must start with PREFIX (the
//     tenant scope), a numeric argument must not exceed NUMBER.
//
// Preconditions are semantic, as a policy engine's are: one whose argument
// is absent or has another type does not fire (fail-open), because the
// verifier checks what a well-formed call may do, not whether it is
// well-formed.
type Contract struct {
	Risk   Risk
	Scopes []Scope
	Limits []Limit
}

// Scope requires a string argument to start with Prefix.
type Scope struct{ Arg, Prefix string }

// Limit caps a numeric argument.
type Limit struct {
	Arg string
	Max float64
}

// contractOf reads the contract from a raw MCP tool object.
func contractOf(tool obj) Contract {
	c := Contract{Risk: RiskDestructive}
	ann, _ := tool["annotations"].(obj)
	ro, _ := ann["readOnlyHint"].(bool)
	de, hasDe := ann["destructiveHint"].(bool)
	switch {
	case ro:
		c.Risk = RiskRead
	case hasDe && !de:
		c.Risk = RiskWrite
	}
	meta, _ := tool["_meta"].(obj)
	hc, _ := meta["htb/contract"].(obj)
	if sc, ok := hc["scope"].(obj); ok {
		for _, k := range sortedKeys(sc) {
			if p, ok := sc[k].(string); ok {
				c.Scopes = append(c.Scopes, Scope{k, p})
			}
		}
	}
	if mx, ok := hc["max"].(obj); ok {
		for _, k := range sortedKeys(mx) {
			if f, ok := num(mx, k); ok {
				c.Limits = append(c.Limits, Limit{k, f})
			}
		}
	}
	return c
}

// annotationsFor returns MCP annotations that encode risk r.
func annotationsFor(r Risk) obj {
	switch r {
	case RiskRead:
		return obj{"readOnlyHint": true}
	case RiskWrite:
		return obj{"readOnlyHint": false, "destructiveHint": false}
	}
	return obj{"readOnlyHint": false, "destructiveHint": true}
}

// Clearance is the highest risk an agent is authorised for. The benchmark
// names its agents after their clearance ("agent-read", "agent-write",
// "agent-admin"); any other agent id (BFCL's "bfcl") is fully cleared,
// as an unrestricted deployment would be.
func Clearance(agentID string) Risk {
	switch agentID {
	case "agent-read":
		return RiskRead
	case "agent-write":
		return RiskWrite
	}
	return RiskDestructive
}

// agentFor returns the least-cleared agent that may call a tool of risk r.
func agentFor(r Risk) string {
	switch r {
	case RiskRead:
		return "agent-read"
	case RiskWrite:
		return "agent-write"
	}
	return "agent-admin"
}

// checkPreconditions is the contract verifier: it returns the first
// violated precondition, or "".
func (c *Contract) checkPreconditions(args jsontape.Value) string {
	for _, s := range c.Scopes {
		v := args.Get(s.Arg)
		if v.Kind() != jsontape.String {
			continue
		}
		if !strings.HasPrefix(string(v.Str()), s.Prefix) {
			return "argument " + s.Arg + " is outside the tenant scope " + s.Prefix
		}
	}
	for _, l := range c.Limits {
		v := args.Get(l.Arg)
		if v.Kind() != jsontape.Number {
			continue
		}
		if v.Float64() > l.Max {
			return "argument " + l.Arg + " exceeds its contract limit"
		}
	}
	return ""
}

// onFrontier reports whether the agent's visible tools list the tool under
// the emitted name, its own name or a flattened form.
func onFrontier(visible []string, emitted, server, name string) bool {
	if slices.Contains(visible, emitted) || slices.Contains(visible, name) {
		return true
	}
	if server == "" {
		return false
	}
	for _, n := range []string{server + "__" + name, server + "/" + name, "mcp__" + server + "__" + name} {
		if slices.Contains(visible, n) {
			return true
		}
	}
	return false
}
