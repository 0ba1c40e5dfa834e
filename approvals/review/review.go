// Package review tells, for every tool definition the listings say is
// current, how it stands in the approved baseline, and what changed
// since the approved one (a registry/diff of the two inputSchemas): what
// `resolverd registry pending` lists and `registry lock --check` gates
// on.
package review

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
)

// Catalog is the registries as their listings give them (in event time,
// registry), and the inputSchema of every definition listed, by
// digest, so that a current definition can be diffed against an approved
// one that is no longer current. Not safe for concurrent use.
type Catalog struct {
	store   *registry.Store
	schemas map[string][]byte // by digest
	regs    map[string]bool
}

// New returns an empty catalog.
func New() *Catalog {
	return &Catalog{store: registry.New(), schemas: map[string][]byte{}, regs: map[string]bool{}}
}

// Apply applies listings, as registry.Store.Apply, and keeps
// their definitions' schemas.
func (c *Catalog) Apply(ls ...*schema.Listing) []registry.Issue {
	for _, l := range ls {
		c.regs[l.Registry] = true
		for _, t := range l.Tools {
			d, err := schema.Digest(t.Name, t.InputSchema)
			if err != nil {
				continue // the store reports it
			}
			if _, ok := c.schemas[d]; !ok {
				c.schemas[d] = t.InputSchema
			}
		}
	}
	return c.store.Apply(ls...)
}

// Registries returns the registries listed, sorted.
func (c *Catalog) Registries() []string {
	out := make([]string, 0, len(c.regs))
	for r := range c.regs {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// Item is one current definition and its standing.
type Item struct {
	Registry, Server, Tool string
	Digest                 string // the current definition's
	Approval               schema.Approval
	Approved               []string // the tool's approved digests
	// Base is the approved definition the diff is against: the most
	// recently approved one whose schema a listing showed; "" when none.
	Base string
	// Diff is the structured diff from Base to the current definition;
	// nil without Base.
	Diff *diff.SchemaDiff
	// By, At and Reason are the verdict's on the current definition
	// (approved or rejected); empty otherwise.
	By     string
	At     time.Time
	Reason string
}

// Pending reports whether the item waits for a review: its definition is
// neither approved nor rejected.
func (it *Item) Pending() bool {
	return it.Approval == schema.ApprovalUnapproved || it.Approval == schema.ApprovalNew
}

// farFuture reads the registries' newest versions: the latest time the
// store's nanosecond clock holds.
var farFuture = time.Unix(0, math.MaxInt64)

// Review returns every tool of the newest version of the registries
// (all of them when registries is empty) with its standing in b,
// sorted by registry, server and tool. A registry never listed is an
// error: a gate over a registry it cannot see must not pass.
func (c *Catalog) Review(b *approvals.Baseline, registries []string) ([]Item, error) {
	if len(registries) == 0 {
		registries = c.Registries()
	}
	warn, _ := approvals.ParsePolicy("warn")
	g := approvals.NewGate(warn, b)
	var out []Item
	for _, reg := range registries {
		v := c.store.At(reg, farFuture)
		if v == nil {
			return nil, fmt.Errorf("registry %q has no listing", reg)
		}
		for _, s := range v.Servers() {
			for _, t := range s.Tools() {
				out = append(out, c.item(b, g, reg, t))
			}
		}
	}
	slices.SortFunc(out, func(a, b Item) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Tool, b.Tool))
	})
	return out, nil
}

func (c *Catalog) item(b *approvals.Baseline, g *approvals.Gate, reg string, t *registry.Tool) Item {
	it := Item{Registry: reg, Server: t.Server, Tool: t.Name, Digest: t.Digest}
	it.Approval = g.Check(reg, t.Server, t.Name, t.Digest).Approval
	if e := b.Lookup(reg, t.Server, t.Name, t.Digest); e != nil {
		it.By, it.At, it.Reason = e.By, e.At, e.Reason
	}
	var base *approvals.Entry
	for _, e := range b.Tool(reg, t.Server, t.Name) {
		if e.State != approvals.Approved {
			continue
		}
		it.Approved = append(it.Approved, e.Digest)
		if _, known := c.schemas[e.Digest]; known && (base == nil || e.At.After(base.At)) {
			base = e
		}
	}
	if base != nil && base.Digest != t.Digest {
		it.Base = base.Digest
		if d, err := diff.DiffSchemas(c.schemas[base.Digest], t.Sig.Schema()); err == nil {
			it.Diff = &d
		}
	}
	return it
}
