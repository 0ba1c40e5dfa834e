package registry

import (
	"sync/atomic"
	"time"

	"github.com/toolaudit/toolaudit/signature"
)

// Tool is one tool of one server during one of that server's states (the
// interval between two listings that changed it).
type Tool struct {
	Server      string
	Name        string
	Trust       int // the trust of the listing that defined it
	Digest      string
	Description string               // from the first listing of this definition the store saw
	Sig         *signature.Signature // never nil
	// drift: a listing after this state changed the tool's digest or
	// dropped it (spec v1, drift). Set by the writer as later listings
	// arrive; readers see the latest knowledge.
	drift atomic.Bool
}

// Drift reports whether a listing after the state that holds this tool
// changed its digest or dropped it (spec v1, drift), as far as the
// listings applied so far tell.
func (t *Tool) Drift() bool { return t.drift.Load() }

// ServerState is one server's tool set between two of its listings that
// changed it.
type ServerState struct {
	Name  string
	Trust int
	tools map[string]*Tool
	list  []*Tool  // sorted by name
	c     *content // what was listed
}

// Tool returns the server's tool of that name, or nil.
func (s *ServerState) Tool(name string) *Tool { return s.tools[name] }

// Tools returns the server's tools sorted by name. Do not modify.
func (s *ServerState) Tools() []*Tool { return s.list }

// Version is a registry's tool namespace during an interval of event time.
// It is immutable (but for the drift of its tools) and safe for
// concurrent use.
type Version struct {
	ID       string
	Registry string
	From     time.Time      // observed_at of the listing that made it current
	servers  []*ServerState // sorted by name
	byServer map[string]*ServerState
	// names indexes small versions without a map: the names packed in
	// one string, scanned in a cache line or two (resolution is bound by
	// memory latency, and most registries have a handful of tools); all
	// is every tool, by server then name. Both built with the version.
	names    string
	nameRefs []nameRef
	all      []*Tool
	// A large version's name map and tool list are built on first use:
	// a registry's history holds many versions that no call reads, and
	// the map would be most of their memory (measured: 52 KB of 53 per
	// version of a 450-tool registry).
	large atomic.Pointer[largeIndex]
	keys  atomic.Pointer[KeyIndex]
}

type largeIndex struct {
	byName map[string][]*Tool // providers of a name, in server order
	all    []*Tool
}

// index returns the large version's index, building it on first use.
// Racing builders make equal indexes; one wins.
func (v *Version) index() *largeIndex {
	if x := v.large.Load(); x != nil {
		return x
	}
	x := &largeIndex{byName: map[string][]*Tool{}}
	for _, s := range v.servers {
		for _, t := range s.list {
			x.byName[t.Name] = append(x.byName[t.Name], t)
			x.all = append(x.all, t)
		}
	}
	if v.large.CompareAndSwap(nil, x) {
		return x
	}
	return v.large.Load()
}

// Single reports whether this is a single registry: its only server is ""
// (spec v1, rule 1). An empty version is not single.
func (v *Version) Single() bool {
	return len(v.servers) == 1 && v.servers[0].Name == ""
}

// Server returns the connected server of that name, or nil.
func (v *Version) Server(name string) *ServerState { return v.byServer[name] }

// Servers returns the connected servers sorted by name. Do not modify.
func (v *Version) Servers() []*ServerState { return v.servers }

// Providers returns the tools of that exact name, one per server that
// provides it, in server-name order. Do not modify.
func (v *Version) Providers(name string) []*Tool {
	if v.nameRefs == nil {
		return v.index().byName[name]
	}
	for i := range v.nameRefs {
		r := &v.nameRefs[i]
		if int(r.len) == len(name) && v.names[r.off:r.off+r.len] == name {
			return r.tools
		}
	}
	return nil
}

// smallVersion is the most tools a version indexes by scanning.
const smallVersion = 8

type nameRef struct {
	off, len uint32
	tools    []*Tool
}

// Tools returns every tool of the version, by server then name. Do not
// modify.
func (v *Version) Tools() []*Tool {
	if v.nameRefs == nil {
		return v.index().all
	}
	return v.all
}

func (v *Version) numTools() int {
	n := 0
	for _, s := range v.servers {
		n += len(s.list)
	}
	return n
}
