package ingest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/toolaudit/toolaudit/jsontape"
)

// unmarshal is json.Unmarshal of a log's JSON into v, refusing what
// encoding/json would read other than the agent's own parser does
// (JSON.parse, Python's json, the SDKs): the audit trail must name the
// call that ran. Refused, with the reason:
//
//   - an object that repeats a member name (parsers disagree on which
//     copy wins), invalid UTF-8 (replaced silently), and any other text
//     jsontape does not accept as exactly one reading;
//   - a member whose name matches a field of v only when case is folded
//     ("Function" for "function"): encoding/json takes it for the field,
//     the others ignore it, so {"function":{"name":"wipe_disk"},
//     "FUNCTION":{"name":"get_weather"}} would be audited as get_weather
//     and run as wipe_disk.
func unmarshal(b []byte, v any) error {
	t := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(t)
	if err := t.Parse(b); err != nil {
		return err
	}
	if err := exactNames(t.Root(), reflect.TypeOf(v), ""); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

var tapes = sync.Pool{New: func() any { return new(jsontape.Tape) }}

// exactNames checks that every member name of v that encoding/json would
// match to a field of t (when decoding v into t) is the field's name
// exactly. Its recursion follows t, whose depth is the program's, not the
// input's.
func exactNames(v jsontape.Value, t reflect.Type, ptr string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if v.Kind() != jsontape.Object {
			return nil // encoding/json says what is wrong, or reads nothing
		}
		fs := fieldsOfType(t)
		for ms := v.Members(); ms.Next(); {
			name := string(ms.Name())
			if ft, ok := fs.exact[name]; ok {
				if err := exactNames(ms.Value(), ft, ptr+"/"+name); err != nil {
					return err
				}
				continue
			}
			for _, f := range fs.names {
				if strings.EqualFold(f, name) { // encoding/json's folding
					return fmt.Errorf("%s: member %q is not %q: names are matched exactly", cmp.Or(ptr, "/"), name, f)
				}
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 || v.Kind() != jsontape.Array {
			return nil // json.RawMessage, bytes: read as they are, or later
		}
		i := 0
		for it := v.Items(); it.Next(); i++ {
			if err := exactNames(it.Value(), t.Elem(), fmt.Sprintf("%s/%d", ptr, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Kind() != jsontape.Object {
			return nil
		}
		for ms := v.Members(); ms.Next(); {
			if err := exactNames(ms.Value(), t.Elem(), ptr+"/"+string(ms.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// structNames are the JSON names of a struct's fields as encoding/json
// decodes them: the tag's name, else the field's; the fields of an
// untagged embedded struct promoted.
type structNames struct {
	exact map[string]reflect.Type
	names []string
}

var namesOfType sync.Map // reflect.Type → *structNames

func fieldsOfType(t reflect.Type) *structNames {
	if fs, ok := namesOfType.Load(t); ok {
		return fs.(*structNames)
	}
	fs := &structNames{exact: map[string]reflect.Type{}}
	var add func(t reflect.Type)
	add = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, _, _ := strings.Cut(tag, ",")
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			switch {
			case f.Anonymous && name == "" && ft.Kind() == reflect.Struct:
				add(ft)
				continue
			case !f.IsExported():
				continue
			case name == "":
				name = f.Name
			}
			if _, ok := fs.exact[name]; !ok {
				fs.exact[name] = f.Type
				fs.names = append(fs.names, name)
			}
		}
	}
	add(t)
	namesOfType.Store(t, fs)
	return fs
}
