package registry

// KeyIndex indexes a version's tools by the top-level keys their
// signatures declare and require (signature.TopLevel), so that a search
// for the tools that accept an argument object (the H5 candidates of a
// rejected call) tries only the tools that could, not every tool of the
// version. Lists hold indices into Version.Tools(), ascending. Build cost
// and memory are linear in the declared keys of the version's tools; it
// is built on first use, so versions that never see a rejected call pay
// nothing.
//
// A tool that accepts an object with keys K is, by TopLevel's necessary
// condition, in one of these lists:
//   - closed (undeclared keys fail): in Declaring(k) for every k in K, or
//     in NoneRequired when K is empty (then its required keys are none);
//   - open, with required keys: in Requiring(r) for its first required key
//     r, which K holds;
//   - open, without: in Open.
type KeyIndex struct {
	declaring    map[string][]int32
	noneRequired []int32
	requiring    map[string][]int32
	open         []int32
}

// Declaring returns the closed tools that declare key k.
func (x *KeyIndex) Declaring(k []byte) []int32 { return x.declaring[string(k)] }

// NoneRequired returns the closed tools that require no key: the only
// closed ones that may accept an empty object.
func (x *KeyIndex) NoneRequired() []int32 { return x.noneRequired }

// Requiring returns the open tools whose first required key is k.
func (x *KeyIndex) Requiring(k []byte) []int32 { return x.requiring[string(k)] }

// Open returns the open tools that require no key: candidates for any
// object.
func (x *KeyIndex) Open() []int32 { return x.open }

// KeyIndex returns the version's key index, building it on first use.
// Safe for concurrent use: racing builders make equal indexes, one wins.
func (v *Version) KeyIndex() *KeyIndex {
	if x := v.keys.Load(); x != nil {
		return x
	}
	x := &KeyIndex{declaring: map[string][]int32{}, requiring: map[string][]int32{}}
	for i, t := range v.Tools() {
		tl := t.Sig.TopLevel()
		switch {
		case tl.Closed:
			for _, k := range tl.Declared {
				x.declaring[k] = append(x.declaring[k], int32(i))
			}
			if len(tl.Required) == 0 {
				x.noneRequired = append(x.noneRequired, int32(i))
			}
		case len(tl.Required) > 0:
			x.requiring[tl.Required[0]] = append(x.requiring[tl.Required[0]], int32(i))
		default:
			x.open = append(x.open, int32(i))
		}
	}
	if v.keys.CompareAndSwap(nil, x) {
		return x
	}
	return v.keys.Load()
}
