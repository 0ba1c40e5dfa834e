package resolve

import (
	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registry"
)

// smallScan is the most tools a version may have for the H5 search to try
// them all: below it, the key index costs more than it saves.
const smallScan = 32

// otherAccepting returns the H5 candidate: the first tool of v, in
// v.Tools() order, not named name, whose signature accepts args; nil when
// none does. In a large version it tries only the tools that the key
// index says could accept the arguments' top-level keys, so a storm of
// rejected calls costs a few OK calls each, not a check against every
// tool of a 5,000-tool catalogue; the answer is the exhaustive search's
// (TestCandidatesDifferential).
func otherAccepting(v *registry.Version, name string, args jsontape.Value) *registry.Tool {
	all := v.Tools()
	if len(all) <= smallScan {
		for _, o := range all {
			if o.Name != name && o.Sig.Accepts(args) {
				return o
			}
		}
		return nil
	}
	x := v.KeyIndex()
	best := len(all)
	// try scans one ascending list up to its first accepting tool: the
	// smallest index over all lists is the exhaustive search's answer,
	// as every tool that accepts args is in one of them.
	try := func(list []int32) {
		for _, i := range list {
			if int(i) >= best {
				return
			}
			if o := all[i]; o.Name != name && o.Sig.Accepts(args) {
				best = int(i)
				return
			}
		}
	}
	var closed []int32 // the shortest list of closed tools declaring a key
	n := 0
	for m := args.Members(); m.Next(); {
		k := m.Name()
		if l := x.Declaring(k); n == 0 || len(l) < len(closed) {
			closed = l
		}
		n++
		try(x.Requiring(k))
	}
	if n == 0 {
		closed = x.NoneRequired()
	}
	try(closed)
	try(x.Open())
	if best < len(all) {
		return all[best]
	}
	return nil
}
