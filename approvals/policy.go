package approvals

import (
	"fmt"
	"slices"
	"strings"
)

// Mode is what a call to a tool whose current definition is not approved
// gets.
type Mode uint8

// Modes.
const (
	Off   Mode = iota // no check, no mark: decisions as without approvals
	Warn              // decided as without approvals, marked
	Block             // rejected as M4, naming the approved and the current digest
)

func (m Mode) String() string {
	switch m {
	case Warn:
		return "warn"
	case Block:
		return "block"
	}
	return "off"
}

// FirstSeen is what happens to a tool no definition of which was ever
// approved.
type FirstSeen uint8

// FirstSeen choices.
const (
	// TOFU (trust on first use) lets calls through, marked "new", until a
	// definition is approved; from then on drift from it is checked. The
	// pin itself is an approval event (resolverd registry pin).
	TOFU FirstSeen = iota
	// Hold treats it as not approved: under block, refused until approved.
	Hold
)

func (f FirstSeen) String() string {
	if f == Hold {
		return "hold"
	}
	return "tofu"
}

// Rule is the policy of one scope.
type Rule struct {
	Mode      Mode
	FirstSeen FirstSeen
}

func (r Rule) String() string {
	if r.Mode == Off {
		return "off"
	}
	return r.Mode.String() + "+" + r.FirstSeen.String()
}

// Policy is the approvals policy: a default rule, and rules per registry
// and per registry and server (the most specific applies). The zero
// Policy is off everywhere.
type Policy struct {
	Default   Rule
	registry  map[string]Rule
	server    map[[2]string]Rule
	overrides bool
}

// Off reports whether the policy checks nothing anywhere.
func (p *Policy) Off() bool {
	if p.Default.Mode != Off {
		return false
	}
	for _, r := range p.registry {
		if r.Mode != Off {
			return false
		}
	}
	for _, r := range p.server {
		if r.Mode != Off {
			return false
		}
	}
	return true
}

// For returns the rule of a registry's server: no lookup without
// overrides.
func (p *Policy) For(registry, server string) Rule {
	if !p.overrides {
		return p.Default
	}
	if r, ok := p.server[[2]string{registry, server}]; ok {
		return r
	}
	if r, ok := p.registry[registry]; ok {
		return r
	}
	return p.Default
}

// ParsePolicy parses a policy: comma-separated rules, one of them
// (the default, else off) without a scope, the others SCOPE=RULE where
// SCOPE is a registry or registry/server (split at the first "/"). A rule
// is off, warn or block, optionally +tofu (the default) or +hold:
//
//	warn,prod=block+hold,prod/legacy=off
func ParsePolicy(s string) (Policy, error) {
	var p Policy
	seenDefault := false
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		scope, rule, scoped := strings.Cut(part, "=")
		if !scoped {
			rule = scope
		}
		r, err := parseRule(rule)
		if err != nil {
			return Policy{}, fmt.Errorf("approvals policy %q: %w", part, err)
		}
		if !scoped {
			if seenDefault {
				return Policy{}, fmt.Errorf("approvals policy %q: two defaults", s)
			}
			p.Default, seenDefault = r, true
			continue
		}
		reg, srv, hasServer := strings.Cut(scope, "/")
		if reg == "" {
			return Policy{}, fmt.Errorf("approvals policy %q: empty registry", part)
		}
		p.overrides = true
		if hasServer {
			if p.server == nil {
				p.server = map[[2]string]Rule{}
			}
			if _, dup := p.server[[2]string{reg, srv}]; dup {
				return Policy{}, fmt.Errorf("approvals policy: %s given twice", scope)
			}
			p.server[[2]string{reg, srv}] = r
		} else {
			if p.registry == nil {
				p.registry = map[string]Rule{}
			}
			if _, dup := p.registry[reg]; dup {
				return Policy{}, fmt.Errorf("approvals policy: %s given twice", scope)
			}
			p.registry[reg] = r
		}
	}
	return p, nil
}

func parseRule(s string) (Rule, error) {
	mode, first, hasFirst := strings.Cut(s, "+")
	var r Rule
	switch mode {
	case "off":
		r.Mode = Off
	case "warn":
		r.Mode = Warn
	case "block":
		r.Mode = Block
	default:
		return Rule{}, fmt.Errorf("mode %q: want off, warn or block", mode)
	}
	if hasFirst {
		switch first {
		case "tofu":
			r.FirstSeen = TOFU
		case "hold":
			r.FirstSeen = Hold
		default:
			return Rule{}, fmt.Errorf("first seen %q: want tofu or hold", first)
		}
	}
	return r, nil
}

// String is the policy in ParsePolicy's syntax, canonical: the default,
// then the scoped rules sorted. Decisions' policy stamp carries it.
func (p *Policy) String() string {
	parts := []string{p.Default.String()}
	var scoped []string
	for reg, r := range p.registry {
		scoped = append(scoped, reg+"="+r.String())
	}
	for k, r := range p.server {
		scoped = append(scoped, k[0]+"/"+k[1]+"="+r.String())
	}
	slices.Sort(scoped)
	return strings.Join(append(parts, scoped...), ",")
}
