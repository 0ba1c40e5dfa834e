package suggest

import (
	"strconv"

	"github.com/toolaudit/toolaudit/jsontape"
)

// keysAt returns the member names of the object at path (JSON pointer
// tokens) in the arguments, or false when there is no object there. It is
// the package's only reader of the arguments' parsed form.
func keysAt(args jsontape.Value, path []string) ([]string, bool) {
	v := args
	for _, tok := range path {
		switch v.Kind() {
		case jsontape.Object:
			v = v.Get(tok)
		case jsontape.Array:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 {
				return nil, false
			}
			var it jsontape.Items
			for it = v.Items(); i >= 0 && it.Next(); i-- {
			}
			if i >= 0 {
				return nil, false
			}
			v = it.Value()
		default:
			return nil, false
		}
	}
	if v.Kind() != jsontape.Object {
		return nil, false
	}
	keys := make([]string, 0, v.Len())
	for m := v.Members(); m.Next(); {
		keys = append(keys, string(m.Name()))
	}
	return keys, true
}
