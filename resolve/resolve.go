package resolve

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// Mode chooses how unpinned names that several top-trust servers provide
// are treated.
type Mode uint8

const (
	// Strict rejects them as M2 (the default).
	Strict Mode = iota
	// PinAssisted resolves them deterministically (see Resolver.Resolve)
	// and still rejects M3 shadowing.
	PinAssisted
)

func (m Mode) String() string {
	if m == PinAssisted {
		return "pin-assisted"
	}
	return "strict"
}

// ParseMode parses "strict" or "pin-assisted".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "strict", "":
		return Strict, nil
	case "pin-assisted":
		return PinAssisted, nil
	}
	return Strict, fmt.Errorf("unknown mode %q (want strict or pin-assisted)", s)
}

// Versions is what the resolver reads of the registry history;
// *registry.Snapshot implements it.
type Versions interface {
	At(registry string, t time.Time) *registry.Version
}

var _ Versions = (*registry.Snapshot)(nil)

// Resolver resolves calls. The zero value is a strict resolver.
type Resolver struct {
	Mode Mode
	// Formats: the store's signatures assert format
	// (registry.WithSignatureOptions with signature.Options
	// Formats). Resolution reads the signatures as compiled; this says so
	// in the policy stamp, so that decisions under either are told apart.
	Formats bool
	// Approvals checks the resolved tool's current definition against the
	// approved baseline (package approvals); nil: no check, no cost.
	// Every decision with a resolved tool is marked (Decision.Approval,
	// BaselineVersion) where the policy is not off; under block a
	// definition not approved is M4.
	Approvals *approvals.Gate
}

// Policy is the policy stamp of the decisions: the mode, "+formats"
// when formats are asserted, and "+approvals(POLICY)" under an
// approvals gate.
func (r Resolver) Policy() string {
	p := r.Mode.String()
	if r.Formats {
		p += "+formats"
	}
	if r.Approvals != nil {
		p += "+approvals(" + r.Approvals.PolicyString() + ")"
	}
	return p
}

// Malformed fills d for an event that could not be decoded.
func Malformed(err error, d *schema.Decision) {
	d.Reset()
	var me *schema.MalformedError
	if errors.As(err, &me) {
		d.EventID = me.EventID
		d.Set(schema.Malformed, me.Reason)
		return
	}
	d.Set(schema.Malformed, err.Error())
}

// ArgsNotRecorded is the reason of the decision of a call whose producer
// did not record its arguments (schema.Call.ArgsUnrecorded) and whose
// name resolved: H3, as a part of a schema the checker does not enforce,
// so that it is refused in the call path and counted with those.
const ArgsNotRecorded = "not enforced: arguments not recorded; the name resolved, the arguments are not checked"

// Resolve decides call c against vs and writes the decision into d.
//
// In PinAssisted mode an unpinned name that several top-trust servers
// provide resolves to the provider whose digest equals seen_digest, else
// to the first by server name whose signature accepts the arguments, else
// to the first by server name (contract v1.2); lower-trust providers of
// the name still make it M3.
func (r *Resolver) Resolve(vs Versions, c *schema.Call, d *schema.Decision) {
	d.Reset()
	d.EventID = c.EventID
	d.SeenDigest = c.SeenDigest
	v := vs.At(c.Registry, c.EmittedAt)
	if v == nil {
		cls := schema.H1
		if c.Server != "" {
			cls = schema.M1
		}
		d.Set(cls, "registry "+quote(c.Registry)+" has no listing at or before emitted_at")
		return
	}
	d.RegistryVersion = v.ID
	t, cls, reason := r.name(v, c)
	if t == nil {
		d.Set(cls, reason)
		return
	}
	d.ResolvedServer, d.ResolvedTool, d.CurrentDigest = t.Server, t.Name, t.Digest
	d.Drift = t.Drift()
	var refused string // by the approvals gate
	if r.Approvals != nil {
		o := r.Approvals.Check(c.Registry, t.Server, t.Name, t.Digest)
		d.Approval, d.BaselineVersion = o.Approval, o.Version
		refused = o.Reason
	}
	if cls != schema.OK { // M3 after a pin-assisted tie-break
		d.Set(cls, reason)
		return
	}
	if c.SeenDigest != "" && c.SeenDigest != t.Digest {
		d.Set(schema.M4, "seen_digest differs from the definition current at emission")
		return
	}
	if refused != "" {
		d.Set(schema.M4, refused)
		return
	}
	if c.ArgsUnrecorded {
		// The name resolved; the arguments cannot be checked, and a call
		// not checked is never allowed (as a schema part not enforced).
		if c.HasVisible && !visible(c, t) {
			d.Set(schema.H4, "tool is not in the agent's visible tools")
			return
		}
		d.Set(schema.H3, ArgsNotRecorded)
		return
	}
	if res := t.Sig.Check(c.Arguments); res.Kind != signature.Pass {
		r.arguments(v, c, t, res, d)
		return
	}
	if c.HasVisible && !visible(c, t) {
		d.Set(schema.H4, "tool is not in the agent's visible tools")
		return
	}
	d.Set(schema.OK, "")
}

// arguments classifies arguments that fail the resolved tool t.
func (r *Resolver) arguments(v *registry.Version, c *schema.Call, t *registry.Tool, res signature.Result, d *schema.Decision) {
	for _, o := range v.Providers(t.Name) {
		if o != t && o.Sig.Accepts(c.Arguments) {
			d.Set(schema.M5, "arguments fit "+quote(t.Name)+" on server "+quote(o.Server)+", not on "+quote(t.Server))
			d.Path = res.Path
			return
		}
	}
	// H5 needs the evidence of a borrowed shape, a key t does not declare
	// (v1.2): in a registry of hundreds of tools some unrelated tool
	// accepts nearly any small object that only misses a key or has a
	// wrong value.
	if path, ok := borrowed(res); ok {
		if o := otherAccepting(v, t.Name, c.Arguments); o != nil {
			d.Set(schema.H5, "arguments fit tool "+quote(qualified(o))+", not "+quote(qualified(t)))
			d.Path = path // the borrowed key
			return
		}
	}
	if res.Kind == signature.KeyFail {
		d.Set(schema.H2, res.Reason)
	} else {
		d.Set(schema.H3, res.Reason)
		d.Coercible = res.Coercible
	}
	d.Path = res.Path
}

// name resolves the emitted name (spec v1, rule 2). It returns the tool and
// OK, or no tool and the failing class, or (pin-assisted) a tool and M3.
func (r *Resolver) name(v *registry.Version, c *schema.Call) (*registry.Tool, schema.Class, string) {
	if c.Server != "" {
		s := v.Server(c.Server)
		if s == nil {
			return nil, schema.M1, "pinned server " + quote(c.Server) + " is not connected"
		}
		if t := s.Tool(c.Tool); t != nil {
			return t, schema.OK, ""
		}
		if srv, name, ok := split(v, c.Tool); ok && srv.Name == c.Server {
			if t := srv.Tool(name); t != nil {
				return t, schema.OK, ""
			}
		}
		return nil, schema.M1, "pinned server " + quote(c.Server) + " has no tool " + quote(c.Tool)
	}
	provs := v.Providers(c.Tool)
	switch len(provs) {
	case 0:
		if srv, name, ok := split(v, c.Tool); ok {
			if t := srv.Tool(name); t != nil {
				return t, schema.OK, ""
			}
			return nil, schema.M1, "server " + quote(srv.Name) + " has no tool " + quote(name)
		}
		if v.Single() {
			return nil, schema.H1, "no tool named " + quote(c.Tool)
		}
		return nil, schema.M1, "no connected server provides " + quote(c.Tool)
	case 1:
		return provs[0], schema.OK, ""
	}
	top, nTop, lower := provs[0].Trust, 0, false
	for _, p := range provs {
		top = max(top, p.Trust)
	}
	for _, p := range provs {
		if p.Trust == top {
			nTop++
		} else {
			lower = true
		}
	}
	if nTop > 1 && r.Mode == Strict {
		return nil, schema.M2, fmt.Sprintf("%d servers of trust %d provide %s; no pin", nTop, top, quote(c.Tool))
	}
	if nTop > 1 {
		t := tieBreak(c, provs, top)
		if lower {
			return t, schema.M3, "a lower-trust server shadows " + quote(c.Tool)
		}
		return t, schema.OK, ""
	}
	return nil, schema.M3, "a lower-trust server shadows " + quote(c.Tool) + " of a trust-" + itoa(top) + " server"
}

// tieBreak picks one of several top-trust providers (pin-assisted mode):
// the one whose digest is seen_digest, else the first by server name
// whose signature accepts the arguments, else the first by server name
// (contract v1.2). provs is in server-name order.
func tieBreak(c *schema.Call, provs []*registry.Tool, top int) *registry.Tool {
	if c.SeenDigest != "" {
		for _, p := range provs {
			if p.Trust == top && p.Digest == c.SeenDigest {
				return p
			}
		}
	}
	var first *registry.Tool
	for _, p := range provs {
		if p.Trust != top {
			continue
		}
		if p.Sig.Accepts(c.Arguments) {
			return p
		}
		if first == nil {
			first = p
		}
	}
	return first
}

// split parses a flattened name: "mcp__server__tool", "server__tool" or
// "server/tool", only where the prefix is a connected, named server (an
// exact name was already tried; BFCL has tool names beginning with "__").
func split(v *registry.Version, name string) (*registry.ServerState, string, bool) {
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok {
		if s, tool, ok := cutAny(v, rest, "__"); ok {
			return s, tool, true
		}
	}
	if s, tool, ok := cutAny(v, name, "__"); ok {
		return s, tool, true
	}
	return cutAny(v, name, "/")
}

// cutAny tries every occurrence of sep, leftmost first, as the boundary
// between a connected server's name and a tool name.
func cutAny(v *registry.Version, name, sep string) (*registry.ServerState, string, bool) {
	for i := 0; ; {
		j := strings.Index(name[i:], sep)
		if j < 0 {
			return nil, "", false
		}
		i += j
		if i > 0 && i+len(sep) < len(name) {
			if s := v.Server(name[:i]); s != nil {
				return s, name[i+len(sep):], true
			}
		}
		i += len(sep)
	}
}

// visible reports whether the agent's frontier lists the resolved tool,
// under the emitted name, its own name or a flattened form.
func visible(c *schema.Call, t *registry.Tool) bool {
	for _, n := range c.Visible {
		if n == c.Tool || n == t.Name {
			return true
		}
		if t.Server == "" {
			continue
		}
		if flattenedAs(n, t.Server, t.Name, "__") || flattenedAs(n, t.Server, t.Name, "/") {
			return true
		}
		if rest, ok := strings.CutPrefix(n, "mcp__"); ok && flattenedAs(rest, t.Server, t.Name, "__") {
			return true
		}
	}
	return false
}

// flattenedAs reports whether n is server+sep+tool, without allocating.
func flattenedAs(n, server, tool, sep string) bool {
	return len(n) == len(server)+len(sep)+len(tool) &&
		strings.HasPrefix(n, server) && strings.HasSuffix(n, tool) &&
		n[len(server):len(server)+len(sep)] == sep
}

func qualified(t *registry.Tool) string {
	if t.Server == "" {
		return t.Name
	}
	return t.Server + "/" + t.Name
}

func quote(s string) string { return strconv.Quote(s) }

func itoa(i int) string { return strconv.Itoa(i) }
