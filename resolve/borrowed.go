package resolve

import (
	"slices"
	"strings"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/signature"
)

// reasonUndeclared is package signature's reason for a key that an object
// closed by rule 3 does not declare. Its Result has Kind KeyFail for that
// and for a missing required key alike, and only the reason tells the two
// apart (TestBorrowed fails if the reason changes).
const reasonUndeclared = "undeclared argument"

// borrowed reports whether args, which fail t's signature with res, carry
// a key that t does not declare where rule 3 closes an object: the
// evidence of a borrowed shape that H5 needs (contract v1.2, rule 6), and
// the JSON pointer of that key. A missing required key or a wrong value
// alone is no such evidence.
//
// res is the checker's first failure. It names an undeclared key whenever
// one is met before any other key failure: an object's members are walked
// before its required keys are counted, and a value failure does not stop
// the walk. A missing required key of a nested object met first can hide
// an undeclared key that comes later, so the top level's own keys are
// checked too (TopLevel, which allocates: failure path only). An
// undeclared key deeper than the top level, behind a nested object's
// missing key, is not seen and the call is H2, as the missing key alone
// would make it.
func borrowed(t *registryversions.Tool, args jsontape.Value, res signature.Result) (string, bool) {
	if res.Kind == signature.KeyFail && res.Reason == reasonUndeclared {
		return res.Path, true
	}
	tl := t.Sig.TopLevel()
	if !tl.Closed {
		return "", false
	}
	for m := args.Members(); m.Next(); {
		if k := string(m.Name()); !has(tl.Declared, k) {
			return "/" + pointerEscaper.Replace(k), true
		}
	}
	return "", false
}

// has reports whether sorted holds k: a search, as a hostile call may
// carry as many keys as a hostile schema declares.
func has(sorted []string, k string) bool {
	_, ok := slices.BinarySearch(sorted, k)
	return ok
}

// pointerEscaper escapes a key as a JSON pointer token (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")
