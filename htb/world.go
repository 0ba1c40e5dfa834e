package htb

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// toolDef is one tool definition of one server, with what the benchmark
// needs beside the compiled signature: the parsed schema, its required
// keys and the tool's contract.
type toolDef struct {
	Registry string
	Server   string
	Trust    int
	Name     string
	Digest   string
	Schema   obj
	Raw      []byte
	Sig      *signature.Signature
	Required []string // top-level required keys, sorted
	Props    []string // top-level declared keys, sorted
	Contract Contract
}

func (t *toolDef) ref() Ref { return Ref{t.Server, t.Name} }

type toolKey struct{ registry, server, digest string }

// world is the registry history of one track: the store the resolver
// reads, and the raw definitions, contracts and connection order that
// the generators and the other pipelines read.
type world struct {
	store *registry.Store
	snap  *registry.Snapshot
	defs  map[toolKey]*toolDef
	order map[string]map[string]int // registry → server → connection rank
}

// newWorld applies listing events (JSONL lines of the wire contract).
func newWorld(lines [][]byte) (*world, error) {
	w := &world{store: registry.New(), defs: map[toolKey]*toolDef{}, order: map[string]map[string]int{}}
	ls := make([]*schema.Listing, 0, len(lines))
	raws := make([]obj, 0, len(lines))
	for i, line := range lines {
		l, err := schema.DecodeListing(line)
		if err != nil {
			return nil, fmt.Errorf("listing %d: %w", i, err)
		}
		raw, err := decodeObj(line)
		if err != nil {
			return nil, fmt.Errorf("listing %d: %w", i, err)
		}
		ls = append(ls, l)
		raws = append(raws, raw)
	}
	// Issues (keywords the signature does not enforce) do not stop the
	// benchmark: every pipeline sees the same definitions.
	w.store.Apply(ls...)
	w.snap = w.store.Snapshot()
	idx := make([]int, len(ls))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(ls[a].ObservedAt.Compare(ls[b].ObservedAt), cmp.Compare(ls[a].EventID, ls[b].EventID))
	})
	for _, i := range idx {
		l := ls[i]
		o := w.order[l.Registry]
		if o == nil {
			o = map[string]int{}
			w.order[l.Registry] = o
		}
		if _, ok := o[l.Server]; !ok {
			o[l.Server] = len(o)
		}
		rawTools, _ := raws[i]["tools"].([]any)
		for j, t := range l.Tools {
			d, err := schema.Digest(t.Name, t.InputSchema)
			if err != nil {
				return nil, err
			}
			k := toolKey{l.Registry, l.Server, d}
			if _, ok := w.defs[k]; ok {
				continue
			}
			s, err := decodeObj(t.InputSchema)
			if err != nil {
				return nil, err
			}
			sig, err := signature.Compile(t.InputSchema)
			if err != nil {
				return nil, err
			}
			var rt obj
			if j < len(rawTools) {
				rt, _ = rawTools[j].(obj)
			}
			w.defs[k] = &toolDef{
				Registry: l.Registry, Server: l.Server, Trust: l.Trust, Name: t.Name, Digest: d,
				Schema: s, Raw: t.InputSchema, Sig: sig,
				Required: schemaRequired(s), Props: sortedKeys(schemaProps(s)),
				Contract: contractOf(rt),
			}
		}
	}
	return w, nil
}

// def returns the definition of a resolved tool.
func (w *world) def(registry string, t *registry.Tool) *toolDef {
	return w.defs[toolKey{registry, t.Server, t.Digest}]
}

// rank is a server's connection order in its registry (first listing).
func (w *world) rank(registry, server string) int {
	if r, ok := w.order[registry][server]; ok {
		return r
	}
	return 1 << 30
}

// deployment is the generators' view of one registry version.
type deployment struct {
	registry string
	at       time.Time
	servers  []string // connection order
	trust    map[string]int
	all      []*toolDef // connection order, then name
	byName   map[string][]*toolDef
	names    []string // distinct tool names, sorted
}

func (w *world) deployment(registry string, at time.Time) *deployment {
	v := w.snap.At(registry, at)
	if v == nil {
		return nil
	}
	d := &deployment{registry: registry, at: at, trust: map[string]int{}, byName: map[string][]*toolDef{}}
	for _, s := range v.Servers() {
		d.servers = append(d.servers, s.Name)
		d.trust[s.Name] = s.Trust
	}
	slices.SortFunc(d.servers, func(a, b string) int {
		return cmp.Compare(w.rank(registry, a), w.rank(registry, b))
	})
	for _, s := range d.servers {
		for _, t := range v.Server(s).Tools() {
			td := w.def(registry, t)
			d.all = append(d.all, td)
			if len(d.byName[td.Name]) == 0 {
				d.names = append(d.names, td.Name)
			}
			d.byName[td.Name] = append(d.byName[td.Name], td)
		}
	}
	slices.Sort(d.names)
	return d
}

// server returns the tools of one server, sorted by name.
func (d *deployment) server(name string) []*toolDef {
	var out []*toolDef
	for _, t := range d.all {
		if t.Server == name {
			out = append(out, t)
		}
	}
	return out
}

// tool returns a server's tool of that name, or nil.
func (d *deployment) tool(server, name string) *toolDef {
	for _, t := range d.byName[name] {
		if t.Server == server {
			return t
		}
	}
	return nil
}
