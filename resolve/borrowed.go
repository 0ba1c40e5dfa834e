package resolve

import (
	"github.com/toolaudit/toolaudit/signature"
)

// borrowed reports whether the arguments, which fail the resolved tool's
// signature with res, carry a key that the tool does not declare where rule 3 closes an object: the
// evidence of a borrowed shape that H5 needs (contract v1.2, rule 6), and
// the JSON pointer of that key. A missing required key or a wrong value
// alone is no such evidence. The checker reports an undeclared key
// anywhere in the arguments before a missing one (Result.Undeclared), so
// its first failure is the answer.
func borrowed(res signature.Result) (string, bool) {
	if res.Kind == signature.KeyFail && res.Undeclared {
		return res.Path, true
	}
	return "", false
}
