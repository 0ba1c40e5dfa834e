package suggest

import "github.com/valyala/fastjson"

// keysAt returns the member names of the object at path (JSON pointer
// tokens) in the arguments, or false when there is no object there. It is
// the package's only reader of the arguments' parsed form.
func keysAt(args *fastjson.Value, path []string) ([]string, bool) {
	v := args
	for _, tok := range path {
		if v == nil {
			return nil, false
		}
		v = v.Get(tok) // a member of an object, an index of an array
	}
	if v == nil || v.Type() != fastjson.TypeObject {
		return nil, false
	}
	o, _ := v.Object()
	keys := make([]string, 0, o.Len())
	o.Visit(func(k []byte, _ *fastjson.Value) { keys = append(keys, string(k)) })
	return keys, true
}
