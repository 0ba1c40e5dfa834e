package signature

// TopLevel is what the top level of an argument object must satisfy, key
// by key, for the signature to accept it: a necessary condition, never a
// sufficient one. It lets a caller skip, without checking them, the
// signatures that cannot accept an object (the H5 search over a large
// registry).
type TopLevel struct {
	// Closed: a key that is not in Declared fails.
	Closed   bool
	Declared []string // sorted; nil when the top level declares none
	Required []string // every one must be present
}

// TopLevel returns the top level's key constraints. The root's own object
// keywords apply whatever else it has ($ref, combinators and not only add
// constraints, see check), so they are necessary as they stand; a root
// without object keywords constrains no key.
func (s *Signature) TopLevel() TopLevel {
	n := s.root
	if n.has&cObject == 0 {
		return TopLevel{}
	}
	// A key a patternProperties pattern matches is declared without
	// being named: the top level then closes no key by name.
	tl := TopLevel{Closed: n.closed && n.x.patterns == nil, Required: n.required}
	if len(n.props) > 0 {
		tl.Declared = make([]string, len(n.props))
		for i := range n.props {
			tl.Declared[i] = n.props[i].name
		}
	}
	return tl
}
