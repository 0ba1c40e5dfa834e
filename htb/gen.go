package htb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// gen accumulates the trials of one track. All randomness comes from one
// PCG stream seeded from --seed and the track's name, so a track's trials
// do not depend on which other tracks run.
type gen struct {
	r      *rand.Rand
	s      synth
	track  string
	base   time.Time // emission time of the first call
	trials []Trial
	counts map[string]int
}

func newGen(seed uint64, track string, base time.Time) *gen {
	var h uint64 = 14695981039346656037 // FNV-1a of the track name
	for _, c := range []byte(track) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	r := rand.New(rand.NewPCG(seed, h))
	return &gen{r: r, s: synth{r: r}, track: track, base: base, counts: map[string]int{}}
}

func (g *gen) pick(n int) int { return g.r.IntN(n) }

func (g *gen) chance(p float64) bool { return g.r.Float64() < p }

// add appends one trial.
func (g *gen) add(kind, variant string, expect schema.Class, intended Ref, c callSpec) {
	g.counts[kind]++
	id := fmt.Sprintf("%s-%s-%04d", g.track, strings.ToLower(kind), g.counts[kind])
	t := g.base.Add(time.Duration(len(g.trials)) * time.Millisecond)
	g.trials = append(g.trials, Trial{ID: id, Kind: kind, Variant: variant, Expect: expect, Intended: intended, Line: c.line(id, t)})
}

// fill calls try until it has produced n trials of a kind, giving up after
// a bounded number of attempts (a registry may not support every variant).
func (g *gen) fill(kind string, n int, try func() bool) {
	for attempts := 0; g.counts[kind] < n && attempts < 200*n+200; attempts++ {
		try()
	}
}

// fv parses arguments for the signature checker (a tape of their own).
func fv(a obj) jsontape.Value {
	tp := new(jsontape.Tape)
	if err := tp.Parse(mustJSON(a)); err != nil {
		panic(err)
	}
	return tp.Root()
}

func accepts(t *toolDef, a obj) bool { return t.Sig.Accepts(fv(a)) }

// honest draws arguments that satisfy the tool's signature.
func (g *gen) honest(t *toolDef) (obj, bool) {
	for range 12 {
		a, ok := g.s.value(t.Schema, "", 0).(obj)
		if ok && accepts(t, a) {
			return a, true
		}
	}
	return nil, false
}

// acceptedByOther reports whether a tool other than except (by name)
// accepts the arguments.
func acceptedByOther(all []*toolDef, except string, a obj) bool {
	v := fv(a)
	for _, t := range all {
		if t.Name != except && t.Sig.Accepts(v) {
			return true
		}
	}
	return false
}

// unmodelled are the schema keywords borrowedKey does not read: a draw
// whose named tool uses one is skipped rather than labelled on a guess.
var unmodelled = []string{"$ref", "allOf", "anyOf", "oneOf", "not", "if", "patternProperties", "unevaluatedProperties", "dependentSchemas", "propertyNames", "prefixItems"}

// borrowedKey reports whether value v carries a key that schema s does
// not declare where the contract's rule 3 closes an object (the top level
// when top, and every object node that declares properties, unless
// additionalProperties is true or a schema; false closes any node): the
// evidence of a borrowed shape that H5 needs (contract v1.2, rule 6). It
// reads properties, additionalProperties and items, the structure of the
// tracks' schemas, independently of package signature; ok is false for a
// schema with a keyword it does not read (unmodelled).
func borrowedKey(s obj, v any, top bool) (found, ok bool) {
	for _, k := range unmodelled {
		if _, has := s[k]; has {
			return false, false
		}
	}
	switch x := v.(type) {
	case obj:
		props := schemaProps(s)
		addl, hasAddl := s["additionalProperties"]
		closed := top || props != nil
		if hasAddl {
			closed = addl == false
		}
		for _, k := range sortedKeys(x) {
			ps, declared := props[k].(obj)
			if !declared {
				if closed {
					return true, true
				}
				if ps, declared = addl.(obj); !declared {
					continue
				}
			}
			if f, ok := borrowedKey(ps, x[k], false); f || !ok {
				return f, ok
			}
		}
	case []any:
		if _, tuple := s["items"].([]any); tuple {
			return false, false
		}
		items, _ := s["items"].(obj)
		for _, e := range x {
			if items == nil {
				break
			}
			if f, ok := borrowedKey(items, e, false); f || !ok {
				return f, ok
			}
		}
	}
	return false, true
}

func names(ts []*toolDef) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// fabricated returns a name made of a verb no tool uses and a noun some
// tool uses, in the registry's naming style.
func (g *gen) fabricated(d *deployment) string {
	var nouns []string
	for _, n := range d.names {
		w := nameWords(n)
		nouns = append(nouns, w[len(w)-1])
	}
	slices.Sort(nouns)
	nouns = slices.Compact(nouns)
	name := fabricatedVerbs[g.pick(len(fabricatedVerbs))] + "_" + nouns[g.pick(len(nouns))]
	if len(d.names) > 0 && !strings.Contains(d.names[0], "_") {
		name = camel(name)
	}
	return name
}

// genSingle generates the trials of a single registry (server ""): n per
// class H1-H5 and nHonest honest calls to the frontier.
func (g *gen) genSingle(d *deployment, frontier []*toolDef, n, nHonest int) {
	visible := names(frontier)
	slices.Sort(visible)
	var offFrontier []*toolDef
	for _, t := range d.all {
		if !slices.Contains(visible, t.Name) {
			offFrontier = append(offFrontier, t)
		}
	}
	call := func(t *toolDef, name string, args obj, seen string) callSpec {
		agent := "agent-admin"
		if t != nil {
			agent = agentFor(t.Contract.Risk)
		}
		return callSpec{registry: d.registry, tool: name, args: args, seen: seen, visible: visible, agent: agent}
	}
	registered := func(name string) bool { return len(d.byName[name]) > 0 }

	// H1: half near-misses of a frontier tool, half fabricated names.
	g.fill("H1", n, func() bool {
		if g.chance(0.5) {
			src := frontier[g.pick(len(frontier))]
			kind := nearMissKinds[g.pick(len(nearMissKinds))]
			name := nearMiss(kind, src.Name, g.pick)
			a, ok := g.honest(src)
			if !ok || registered(name) {
				return false
			}
			g.add("H1", "near-miss/"+kind, schema.H1, Ref{}, call(src, name, a, ""))
			return true
		}
		name := g.fabricated(d)
		src := d.all[g.pick(len(d.all))]
		a, ok := g.honest(src)
		if !ok || registered(name) {
			return false
		}
		g.add("H1", "fabricated", schema.H1, Ref{}, call(nil, name, a, ""))
		return true
	})
	mutated := func(class string, variants []string, kind signature.Kind, expect schema.Class) {
		g.fill(class, n, func() bool {
			t := frontier[g.pick(len(frontier))]
			variant := variants[g.pick(len(variants))]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			var m obj
			if class == "H2" {
				m, ok = mutateKeys(variant, t.Schema, a, g.pick)
			} else {
				m, ok = mutateValue(variant, t.Schema, a, g.pick)
			}
			if !ok || t.Sig.Check(fv(m)).Kind != kind || acceptedByOther(d.all, t.Name, m) {
				return false
			}
			g.add(class, variant, expect, Ref{}, call(t, t.Name, m, t.Digest))
			return true
		})
	}
	mutated("H2", keyMutations, signature.KeyFail, schema.H2)
	mutated("H3", valueMutations, signature.ValueFail, schema.H3)
	// H4: a real tool off the frontier, with valid arguments.
	if len(offFrontier) > 0 {
		g.fill("H4", n, func() bool {
			t := offFrontier[g.pick(len(offFrontier))]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.add("H4", "off-frontier", schema.H4, Ref{}, call(t, t.Name, a, ""))
			return true
		})
	}
	// H5: arguments drawn for a sibling S (a tool sharing a property name),
	// emitted under the name of a frontier tool T.
	g.fill("H5", n, func() bool {
		t := frontier[g.pick(len(frontier))]
		var sibs []*toolDef
		for _, s := range d.all {
			if s.Name != t.Name && sharesProp(s, t) {
				sibs = append(sibs, s)
			}
		}
		if len(sibs) == 0 {
			return false
		}
		s := sibs[g.pick(len(sibs))]
		a, ok := g.honest(s)
		if !ok {
			return false
		}
		variant, expect := "schema-invalid", schema.H5
		borrowed, ok := borrowedKey(t.Schema, a, true)
		switch {
		case !ok:
			return false
		case accepts(t, a):
			variant, expect = "schema-valid", schema.OK
		case !borrowed:
			// No key T does not declare: no evidence of borrowing
			// (contract v1.2), the call is H2 or H3 by T's signature.
			variant, expect = "no-borrowed-key", schema.H3
			if t.Sig.Check(fv(a)).Kind == signature.KeyFail {
				expect = schema.H2
			}
		}
		g.add("H5", variant, expect, s.ref(), call(t, t.Name, a, t.Digest))
		return true
	})
	g.fill(Honest, nHonest, func() bool {
		t := frontier[g.pick(len(frontier))]
		a, ok := g.honest(t)
		if !ok {
			return false
		}
		g.add(Honest, "synthetic", schema.OK, t.ref(), call(t, t.Name, a, t.Digest))
		return true
	})
}

func sharesProp(a, b *toolDef) bool {
	for _, p := range a.Props {
		if slices.Contains(b.Props, p) {
			return true
		}
	}
	return false
}

// multiSetup is what a multi-server generator needs beside the current
// deployment.
type multiSetup struct {
	removed []*toolDef // tools of a server that was removed before the calls
	absent  []string   // server names never connected
	stale   []stalePair
}

type stalePair struct {
	cur       *toolDef
	oldDigest string
}

// pinned renders a pinned call in one of the forms hosts use: the server
// field, or a flattened name (server__tool, server/tool, mcp__server__tool).
func (g *gen) pinned(server, tool string) (name, pin, form string) {
	switch r := g.pick(10); {
	case r < 5:
		return tool, server, "field"
	case r < 7:
		return server + "__" + tool, "", "dunder"
	case r < 9:
		return server + "/" + tool, "", "slash"
	default:
		return "mcp__" + server + "__" + tool, "", "mcp"
	}
}

// visibleFor returns the agent's frontier: the emitted name and nine other
// names of the deployment.
func (g *gen) visibleFor(d *deployment, emitted string) []string {
	vis := []string{emitted}
	for range 9 {
		n := d.names[g.pick(len(d.names))]
		if !slices.Contains(vis, n) {
			vis = append(vis, n)
		}
	}
	return vis
}

// genMulti generates the trials of a multi-server deployment: n per class
// M1-M5 and nHonest per honest kind (pinned, unique provider, flat).
func (g *gen) genMulti(d *deployment, ms multiSetup, n, nHonest int) {
	var tied, shadowed, unique []string
	for _, name := range d.names {
		ps := d.byName[name]
		if len(ps) == 1 {
			unique = append(unique, name)
			continue
		}
		top, nTop := -1<<31, 0
		for _, p := range ps {
			top = max(top, p.Trust)
		}
		for _, p := range ps {
			if p.Trust == top {
				nTop++
			}
		}
		switch {
		case nTop == len(ps):
			tied = append(tied, name)
		case nTop == 1:
			shadowed = append(shadowed, name)
		}
	}
	var pairs [][2]*toolDef // same name, different servers and digests
	for _, name := range d.names {
		for _, x := range d.byName[name] {
			for _, y := range d.byName[name] {
				if x != y && x.Digest != y.Digest {
					pairs = append(pairs, [2]*toolDef{x, y})
				}
			}
		}
	}
	call := func(name, pin string, args obj, seen, agent string) callSpec {
		return callSpec{registry: d.registry, tool: name, server: pin, args: args, seen: seen,
			visible: g.visibleFor(d, name), agent: agent}
	}
	admin := "agent-admin"

	// M1: the server is absent (never connected, or removed), or no server
	// provides the name.
	m1 := []string{"flat-absent", "unknown-name"}
	if len(ms.absent) > 0 {
		m1 = append(m1, "pinned-absent")
	}
	if len(ms.removed) > 0 {
		m1 = append(m1, "pinned-removed")
	}
	absentOrRemoved := append(slices.Clone(ms.absent), serversOf(ms.removed)...)
	g.fill("M1", n, func() bool {
		switch m1[g.pick(len(m1))] {
		case "pinned-absent":
			t := d.all[g.pick(len(d.all))]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.add("M1", "pinned-absent", schema.M1, Ref{}, call(t.Name, ms.absent[g.pick(len(ms.absent))], a, "", admin))
		case "pinned-removed":
			t := ms.removed[g.pick(len(ms.removed))]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.add("M1", "pinned-removed", schema.M1, Ref{}, call(t.Name, t.Server, a, t.Digest, admin))
		case "flat-absent":
			if len(absentOrRemoved) == 0 {
				return false
			}
			t := d.all[g.pick(len(d.all))]
			if len(ms.removed) > 0 && g.chance(0.5) {
				t = ms.removed[g.pick(len(ms.removed))]
			}
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.add("M1", "flat-absent", schema.M1, Ref{}, call(absentOrRemoved[g.pick(len(absentOrRemoved))]+"__"+t.Name, "", a, "", admin))
		default:
			src := d.all[g.pick(len(d.all))]
			kind := nearMissKinds[g.pick(len(nearMissKinds))]
			name := nearMiss(kind, src.Name, g.pick)
			a, ok := g.honest(src)
			if !ok || len(d.byName[name]) > 0 || strings.Contains(name, "__") || strings.Contains(name, "/") {
				return false
			}
			g.add("M1", "unknown-name/"+kind, schema.M1, Ref{}, call(name, "", a, "", admin))
		}
		return true
	})
	// M2: unpinned, several top-trust providers, and no digest to tell them
	// apart.
	if len(tied) > 0 {
		g.fill("M2", n, func() bool {
			name := tied[g.pick(len(tied))]
			ps := d.byName[name]
			t := ps[g.pick(len(ps))]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.add("M2", "unpinned-tie", schema.M2, Ref{}, call(name, "", a, "", admin))
			return true
		})
	}
	// M3: unpinned, one top-trust provider shadowed by lower-trust ones;
	// the arguments are shaped for the shadow or for the top provider.
	if len(shadowed) > 0 {
		g.fill("M3", n, func() bool {
			name := shadowed[g.pick(len(shadowed))]
			ps := d.byName[name]
			top := ps[0]
			for _, p := range ps {
				if p.Trust > top.Trust {
					top = p
				}
			}
			t, variant := top, "top-shaped"
			if g.chance(0.5) {
				var low []*toolDef
				for _, p := range ps {
					if p != top {
						low = append(low, p)
					}
				}
				t, variant = low[g.pick(len(low))], "shadow-shaped"
			}
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.add("M3", variant, schema.M3, Ref{}, call(name, "", a, t.Digest, admin))
			return true
		})
	}
	// M4: a pinned call, valid now, whose seen_digest is an older definition
	// of the tool or the same name's definition on another server.
	g.fill("M4", n, func() bool {
		var t *toolDef
		var seen, variant string
		if len(ms.stale) > 0 && (len(pairs) == 0 || g.chance(0.5)) {
			p := ms.stale[g.pick(len(ms.stale))]
			t, seen, variant = p.cur, p.oldDigest, "stale-snapshot"
		} else if len(pairs) > 0 {
			p := pairs[g.pick(len(pairs))]
			t, seen, variant = p[0], p[1].Digest, "cross-server"
		} else {
			return false
		}
		a, ok := g.honest(t)
		if !ok {
			return false
		}
		name, pin, form := g.pinned(t.Server, t.Name)
		g.add("M4", variant+"/"+form, schema.M4, Ref{}, call(name, pin, a, seen, admin))
		return true
	})
	// M5: pinned to X, arguments drawn for the same name on Y, failing X.
	if len(pairs) > 0 {
		g.fill("M5", n, func() bool {
			p := pairs[g.pick(len(pairs))]
			x, y := p[0], p[1]
			a, ok := g.honest(y)
			if !ok || accepts(x, a) {
				return false
			}
			name, pin, form := g.pinned(x.Server, x.Name)
			g.add("M5", "pinned/"+form, schema.M5, Ref{}, call(name, pin, a, x.Digest, admin))
			return true
		})
	}
	// Honest: pinned calls to any tool, unpinned calls to a unique name, and
	// unpinned calls to a same-tier collided name that carry the digest of
	// the definition the host showed.
	g.fill(Honest+"/pinned", nHonest, func() bool {
		t := d.all[g.pick(len(d.all))]
		a, ok := g.honest(t)
		if !ok {
			return false
		}
		name, pin, form := g.pinned(t.Server, t.Name)
		g.counts[Honest+"/pinned"]++
		g.add(Honest, "pinned/"+form, schema.OK, t.ref(), call(name, pin, a, t.Digest, agentFor(t.Contract.Risk)))
		return true
	})
	if len(unique) > 0 {
		g.fill(Honest+"/unique", nHonest, func() bool {
			t := d.byName[unique[g.pick(len(unique))]][0]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.counts[Honest+"/unique"]++
			g.add(Honest, "unique", schema.OK, t.ref(), call(t.Name, "", a, t.Digest, agentFor(t.Contract.Risk)))
			return true
		})
	}
	if len(tied) > 0 {
		g.fill(Honest+"/flat", nHonest, func() bool {
			ps := d.byName[tied[g.pick(len(tied))]]
			t := ps[g.pick(len(ps))]
			a, ok := g.honest(t)
			if !ok {
				return false
			}
			g.counts[Honest+"/flat"]++
			g.add(Honest, "flat", schema.M2, t.ref(), call(t.Name, "", a, t.Digest, agentFor(t.Contract.Risk)))
			return true
		})
	}
}

func serversOf(ts []*toolDef) []string {
	var out []string
	for _, t := range ts {
		if !slices.Contains(out, t.Server) {
			out = append(out, t.Server)
		}
	}
	return out
}
