package htb

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Outcome is what a pipeline did with one call. Executed means the call
// reached a tool: Server and Tool say which (for a fail-open executor
// handed a name no server provides, Tool is the emitted name and Server
// is "?"). Otherwise Stage names the layer that stopped it and Reason why.
type Outcome struct {
	Executed bool
	Server   string
	Tool     string
	Stage    string
	Reason   string
}

// Pipeline is one defence (or its absence) between the model and the
// tools. Implementations are small and stateless; the Env holds what they
// read (registry versions, contracts, caches).
type Pipeline interface {
	Name() string
	// Decide runs the call through the pipeline.
	Decide(e *Env, c *schema.Call) Outcome
}

// Env is the world a pipeline sees: the registry history of a track, with
// the tools' contracts. It is not safe for concurrent use (it caches).
type Env struct {
	w     *world
	fuzzy map[string][]fuzzyKey
	comp  *jsonschema.Compiler
	jsch  map[string]*jsonschema.Schema
	jerr  map[string]error
	dec   schema.Decision
}

func newEnv(w *world) *Env {
	c := jsonschema.NewCompiler()
	return &Env{w: w, fuzzy: map[string][]fuzzyKey{}, comp: c, jsch: map[string]*jsonschema.Schema{}, jerr: map[string]error{}}
}

func (e *Env) version(c *schema.Call) *registry.Version {
	return e.w.snap.At(c.Registry, c.EmittedAt)
}

func executed(t *registry.Tool) Outcome {
	return Outcome{Executed: true, Server: t.Server, Tool: t.Name}
}

func blocked(stage, reason string) Outcome { return Outcome{Stage: stage, Reason: reason} }

// failOpen is the executor of the gate stacks for a name they cannot
// route: it hands the call to the backend anyway (a catch-all handler, a
// proxy, a shell), which is what "fail-open" means.
func failOpen(c *schema.Call) Outcome {
	return Outcome{Executed: true, Server: "?", Tool: c.Tool, Stage: "executor", Reason: "fail-open executor ran an unknown name"}
}

// --- defence stacks -------------------------------------------------------

// NoDefence executes every call: routed like a first-provider host, and
// by a fail-open executor when the name cannot be routed.
type NoDefence struct{}

func (NoDefence) Name() string { return "none" }

func (NoDefence) Decide(e *Env, c *schema.Call) Outcome {
	v := e.version(c)
	if v == nil {
		return failOpen(c)
	}
	if t := e.hostRoute(firstProvider, v, c); t != nil {
		return executed(t)
	}
	return failOpen(c)
}

// Gate is the causal gate, alone or followed by the contract verifier. It
// routes like the host it protects (first provider), reads the routed
// tool's contract, and blocks a tool that is off the agent's frontier or
// riskier than the agent's clearance. A name it cannot route has no
// contract: the gate lets it through to the fail-open executor.
type Gate struct {
	Verify bool // also run the contract verifier
}

func (g Gate) Name() string {
	if g.Verify {
		return "gate+verifier"
	}
	return "gate"
}

func (g Gate) Decide(e *Env, c *schema.Call) Outcome {
	v := e.version(c)
	if v == nil {
		return failOpen(c)
	}
	t := e.hostRoute(firstProvider, v, c)
	if t == nil {
		return failOpen(c)
	}
	if o, ok := e.gate(c, t); !ok {
		return o
	}
	if g.Verify {
		if o, ok := e.verify(c, t); !ok {
			return o
		}
	}
	return executed(t)
}

func (e *Env) gate(c *schema.Call, t *registry.Tool) (Outcome, bool) {
	if c.HasVisible && !onFrontier(c.Visible, c.Tool, t.Server, t.Name) {
		return blocked("gate", "tool is not on the agent's frontier"), false
	}
	def := e.w.def(c.Registry, t)
	if def != nil && def.Contract.Risk > Clearance(c.AgentID) {
		return blocked("gate", fmt.Sprintf("%s tool needs clearance the agent lacks", def.Contract.Risk)), false
	}
	return Outcome{}, true
}

func (e *Env) verify(c *schema.Call, t *registry.Tool) (Outcome, bool) {
	def := e.w.def(c.Registry, t)
	if def == nil {
		return Outcome{}, true
	}
	if why := def.Contract.checkPreconditions(c.Arguments); why != "" {
		return blocked("verifier", why), false
	}
	return Outcome{}, true
}

// Resolver is our resolver alone: a call runs only when the decision is
// OK, on the tool it resolved.
type Resolver struct{ Mode resolve.Mode }

func (r Resolver) Name() string {
	if r.Mode == resolve.PinAssisted {
		return "resolver-pin"
	}
	return "resolver"
}

func (r Resolver) Decide(e *Env, c *schema.Call) Outcome {
	t, o := e.resolve(r.Mode, c)
	if t == nil {
		return o
	}
	return executed(t)
}

func (e *Env) resolve(m resolve.Mode, c *schema.Call) (*registry.Tool, Outcome) {
	res := resolve.Resolver{Mode: m}
	res.Resolve(e.w.snap, c, &e.dec)
	if e.dec.Verdict != schema.Allow {
		return nil, blocked("resolver", string(e.dec.Class)+": "+e.dec.Reason)
	}
	v := e.version(c)
	s := v.Server(e.dec.ResolvedServer)
	return s.Tool(e.dec.ResolvedTool), Outcome{}
}

// Full is the full stack: resolver (strict), then the gate, then the
// contract verifier on the resolved tool; with Select, the selection layer
// runs after resolution ("resolve, then select").
type Full struct{ Select bool }

func (f Full) Name() string {
	if f.Select {
		return "full+select"
	}
	return "full"
}

func (f Full) Decide(e *Env, c *schema.Call) Outcome {
	t, o := e.resolve(resolve.Strict, c)
	if t == nil {
		return o
	}
	if f.Select {
		if o, ok := e.selectTool(c, t); !ok {
			return o
		}
	}
	if o, ok := e.gate(c, t); !ok {
		return o
	}
	if o, ok := e.verify(c, t); !ok {
		return o
	}
	return executed(t)
}

// selectTool is the selection layer. After the resolver accepted the call
// for tool T, it looks for a tool S (another name, same registry version)
// that also accepts the arguments and whose required keys strictly
// contain T's: the arguments then carry everything S needs, including a
// key T only permits, and S explains them better than T. Such a call is
// held (not executed).
func (e *Env) selectTool(c *schema.Call, t *registry.Tool) (Outcome, bool) {
	v := e.version(c)
	td := e.w.def(c.Registry, t)
	if td == nil {
		return Outcome{}, true
	}
	for _, o := range v.Tools() {
		if o.Name == t.Name {
			continue
		}
		od := e.w.def(c.Registry, o)
		if od == nil || len(od.Required) <= len(td.Required) || !isSubset(td.Required, od.Required) {
			continue
		}
		if o.Sig.Accepts(c.Arguments) {
			return blocked("select", "arguments fit "+Ref{o.Server, o.Name}.String()+" better"), false
		}
	}
	return Outcome{}, true
}

func isSubset(a, b []string) bool {
	for _, k := range a {
		if !slices.Contains(b, k) {
			return false
		}
	}
	return true
}

// --- baselines ------------------------------------------------------------

// Allowlist executes any call whose name is in the flattened namespace,
// arguments unchecked.
type Allowlist struct{}

func (Allowlist) Name() string { return "allowlist" }

func (Allowlist) Decide(e *Env, c *schema.Call) Outcome {
	v := e.version(c)
	if v == nil {
		return blocked("allowlist", "unknown registry")
	}
	if t := e.flatLookup(v, c); t != nil {
		return executed(t)
	}
	return blocked("allowlist", "name not in the allowlist")
}

// FuzzyRouter auto-corrects a name outside the namespace to the nearest
// entry (edit distance over lower-cased names, a "functions." style
// prefix dropped), when the similarity reaches MinSimilarity; arguments
// are unchecked.
type FuzzyRouter struct{ MinSimilarity float64 }

func (FuzzyRouter) Name() string { return "fuzzy-router" }

func (f FuzzyRouter) Decide(e *Env, c *schema.Call) Outcome {
	v := e.version(c)
	if v == nil {
		return blocked("router", "unknown registry")
	}
	if t := e.flatLookup(v, c); t != nil {
		return executed(t)
	}
	if t, sim := e.nearest(v, c); t != nil && sim >= f.MinSimilarity {
		return executed(t)
	}
	return blocked("router", "no registered name is close enough")
}

// SchemaValidator looks the name up in the flattened namespace and
// validates the arguments with a standard JSON Schema validator
// (santhosh-tekuri/jsonschema/v6, the schema's own $schema draft or 2020-12).
// Standard JSON Schema is open-world: undeclared keys pass unless the
// schema sets additionalProperties to false. A schema the validator cannot
// compile rejects every call (fail-closed).
type SchemaValidator struct{}

func (SchemaValidator) Name() string { return "jsonschema" }

func (SchemaValidator) Decide(e *Env, c *schema.Call) Outcome {
	v := e.version(c)
	if v == nil {
		return blocked("validator", "unknown registry")
	}
	t := e.flatLookup(v, c)
	if t == nil {
		return blocked("validator", "no schema for that name")
	}
	sch, err := e.jsonSchema(e.w.def(c.Registry, t))
	if err != nil {
		return blocked("validator", "schema does not compile: "+err.Error())
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(c.Arguments.Raw()))
	if err != nil {
		return blocked("validator", "arguments: "+err.Error())
	}
	if err := sch.Validate(inst); err != nil {
		return blocked("validator", "arguments do not validate")
	}
	return executed(t)
}

func (e *Env) jsonSchema(d *toolDef) (*jsonschema.Schema, error) {
	if d == nil {
		return nil, fmt.Errorf("no definition")
	}
	if s, ok := e.jsch[d.Digest]; ok {
		return s, nil
	}
	if err, ok := e.jerr[d.Digest]; ok {
		return nil, err
	}
	url := "https://htb.invalid/" + d.Digest[len("sha256:"):] + ".json"
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.Raw))
	if err == nil {
		err = e.comp.AddResource(url, doc)
	}
	var s *jsonschema.Schema
	if err == nil {
		s, err = e.comp.Compile(url)
	}
	if err != nil {
		e.jerr[d.Digest] = err
		return nil, err
	}
	e.jsch[d.Digest] = s
	return s, nil
}

// MCPHost is a naive MCP host: it routes by name (see hostRoute) under a
// collision policy and executes without checking anything else.
type MCPHost struct{ HighestTrust bool }

func (h MCPHost) Name() string {
	if h.HighestTrust {
		return "highest-trust"
	}
	return "first-provider"
}

func (h MCPHost) Decide(e *Env, c *schema.Call) Outcome {
	v := e.version(c)
	if v == nil {
		return blocked("host", "unknown registry")
	}
	p := firstProvider
	if h.HighestTrust {
		p = highestTrust
	}
	if t := e.hostRoute(p, v, c); t != nil {
		return executed(t)
	}
	return blocked("host", "no connected server provides the name")
}

// Pipelines returns every pipeline, in table order.
func Pipelines() []Pipeline {
	return []Pipeline{
		NoDefence{},
		Gate{},
		Gate{Verify: true},
		Resolver{Mode: resolve.Strict},
		Resolver{Mode: resolve.PinAssisted},
		Full{},
		Full{Select: true},
		Allowlist{},
		FuzzyRouter{MinSimilarity: 0.6},
		SchemaValidator{},
		MCPHost{},
		MCPHost{HighestTrust: true},
	}
}

var (
	_ Pipeline = NoDefence{}
	_ Pipeline = Gate{}
	_ Pipeline = Resolver{}
	_ Pipeline = Full{}
	_ Pipeline = Allowlist{}
	_ Pipeline = FuzzyRouter{}
	_ Pipeline = SchemaValidator{}
	_ Pipeline = MCPHost{}
)
