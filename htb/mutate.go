package htb

import (
	"encoding/json"
	"slices"
	"strings"
)

// Key mutations (H2) and value mutations (H3) of honest arguments. Each
// returns a mutated copy, or false when it does not apply to these
// arguments; the generator then checks that the result fails the named
// tool with the intended kind of failure and fits no other tool.

var undeclaredKeys = []string{"force", "override", "dry_run", "confirm_all", "admin", "debug", "notify_all", "skip_checks", "recursive", "sudo"}

var synonyms = map[string][]string{
	"query": {"q", "search"}, "q": {"query"}, "path": {"file_path", "filepath"}, "title": {"name", "subject"},
	"name": {"title"}, "limit": {"max_results", "count"}, "text": {"message", "body"}, "body": {"text", "content"},
	"id": {"identifier"}, "owner": {"org", "user"}, "repo": {"repository"}, "content": {"data"},
	"email": {"mail"}, "channel": {"channel_id"}, "url": {"link"},
}

// H2 variants.
var keyMutations = []string{"undeclared", "undeclared-nested", "renamed", "missing-required"}

// H3 variants.
var valueMutations = []string{"string-for-number", "string-for-boolean", "fraction-for-integer", "enum", "range", "length", "number-for-string", "null", "scalar-for-array", "nested"}

func propSchema(s obj, k string) obj {
	p, _ := schemaProps(s)[k].(obj)
	return p
}

// openObject reports whether an object schema takes undeclared keys.
func openObject(s obj) bool {
	switch a := s["additionalProperties"].(type) {
	case bool:
		return a
	case obj:
		return true
	}
	return schemaProps(s) == nil
}

func freshKey(s obj, cands []string, pick func(int) int) string {
	var ok []string
	for _, k := range cands {
		if _, dup := schemaProps(s)[k]; !dup {
			ok = append(ok, k)
		}
	}
	if len(ok) == 0 {
		return ""
	}
	return ok[pick(len(ok))]
}

func mutateKeys(variant string, s obj, args obj, pick func(int) int) (obj, bool) {
	a := deepCopy(args).(obj)
	keys := sortedKeys(a)
	switch variant {
	case "undeclared":
		if openObject(s) {
			return nil, false
		}
		k := freshKey(s, undeclaredKeys, pick)
		if k == "" {
			return nil, false
		}
		a[k] = true
		return a, true
	case "undeclared-nested":
		for _, k := range shuffled(keys, pick) {
			ps := propSchema(s, k)
			inner, ok := a[k].(obj)
			if ps == nil || !ok || schemaProps(ps) == nil || openObject(ps) {
				continue
			}
			nk := freshKey(ps, undeclaredKeys, pick)
			if nk == "" {
				continue
			}
			inner[nk] = true
			return a, true
		}
		if arr, k := firstObjectArray(s, a, keys, pick); arr != nil {
			it, _ := propSchema(s, k)["items"].(obj)
			nk := freshKey(it, undeclaredKeys, pick)
			if nk == "" {
				return nil, false
			}
			arr[0].(obj)[nk] = true
			return a, true
		}
		return nil, false
	case "renamed":
		for _, k := range shuffled(keys, pick) {
			cands := append([]string{camel(k)}, synonyms[k]...)
			cands = slices.DeleteFunc(cands, func(c string) bool { return c == k })
			nk := freshKey(s, cands, pick)
			if nk == "" {
				continue
			}
			a[nk] = a[k]
			delete(a, k)
			return a, true
		}
		return nil, false
	case "missing-required":
		req := schemaRequired(s)
		var present []string
		for _, k := range req {
			if _, ok := a[k]; ok {
				present = append(present, k)
			}
		}
		if len(present) == 0 {
			return nil, false
		}
		delete(a, present[pick(len(present))])
		return a, true
	}
	return nil, false
}

func firstObjectArray(s obj, a obj, keys []string, pick func(int) int) ([]any, string) {
	for _, k := range shuffled(keys, pick) {
		ps := propSchema(s, k)
		arr, ok := a[k].([]any)
		if ps == nil || !ok || len(arr) == 0 {
			continue
		}
		it, _ := ps["items"].(obj)
		if _, isObj := arr[0].(obj); isObj && it != nil && schemaProps(it) != nil && !openObject(it) {
			return arr, k
		}
	}
	return nil, ""
}

func shuffled(keys []string, pick func(int) int) []string {
	k := slices.Clone(keys)
	for i := len(k) - 1; i > 0; i-- {
		j := pick(i + 1)
		k[i], k[j] = k[j], k[i]
	}
	return k
}

func hasType(s obj, t string) bool { return slices.Contains(schemaTypes(s), t) }

// mutateValue applies a value mutation to one present top-level key (or,
// for "nested", inside an object or array value).
func mutateValue(variant string, s obj, args obj, pick func(int) int) (obj, bool) {
	a := deepCopy(args).(obj)
	for _, k := range shuffled(sortedKeys(a), pick) {
		ps := propSchema(s, k)
		if ps == nil {
			continue
		}
		if variant == "nested" {
			if inner, ok := a[k].(obj); ok && schemaProps(ps) != nil {
				if m, ok := mutateScalar(pick, ps, inner); ok {
					a[k] = m
					return a, true
				}
			}
			if arr, ok := a[k].([]any); ok && len(arr) > 0 {
				it, _ := ps["items"].(obj)
				if inner, ok := arr[0].(obj); ok && it != nil && schemaProps(it) != nil {
					if m, ok := mutateScalar(pick, it, inner); ok {
						arr[0] = m
						return a, true
					}
				}
			}
			continue
		}
		if v, ok := valueMutation(variant, ps, a[k], pick); ok {
			a[k] = v
			return a, true
		}
	}
	return nil, false
}

// mutateScalar changes the type of one scalar inside a nested object.
func mutateScalar(pick func(int) int, s obj, inner obj) (obj, bool) {
	for _, v := range []string{"number-for-string", "string-for-number", "string-for-boolean"} {
		if m, ok := mutateValue(v, s, inner, pick); ok {
			return m, true
		}
	}
	return nil, false
}

func valueMutation(variant string, ps obj, v any, pick func(int) int) (any, bool) {
	switch variant {
	case "string-for-number":
		if n, ok := v.(json.Number); ok && (hasType(ps, "integer") || hasType(ps, "number")) {
			return string(n), true
		}
	case "string-for-boolean":
		if b, ok := v.(bool); ok && hasType(ps, "boolean") {
			if b {
				return "true", true
			}
			return "false", true
		}
	case "fraction-for-integer":
		if n, ok := v.(json.Number); ok && hasType(ps, "integer") && !strings.ContainsAny(string(n), ".eE") {
			return json.Number(string(n) + ".5"), true
		}
	case "enum":
		if e, ok := ps["enum"].([]any); ok && len(e) > 0 {
			if _, isStr := v.(string); isStr {
				return "other", !slices.Contains(e, any("other"))
			}
		}
	case "range":
		if _, ok := v.(json.Number); ok {
			if mx, ok := num(ps, "maximum"); ok {
				if hasType(ps, "integer") {
					return jint(int64(mx) + 1 + int64(pick(10))), true
				}
				return jnum(mx + 1 + float64(pick(10))), true
			}
			if mn, ok := num(ps, "minimum"); ok {
				return jnum(mn - 1 - float64(pick(10))), true
			}
		}
	case "length":
		if _, ok := v.(string); ok {
			if mx, ok := num(ps, "maxLength"); ok && mx < 5000 {
				return strings.Repeat("x", int(mx)+1+pick(5)), true
			}
			if mn, ok := num(ps, "minLength"); ok && mn >= 1 {
				return "", true
			}
		}
	case "number-for-string":
		if _, ok := v.(string); ok && hasType(ps, "string") {
			return jint(int64(1 + pick(999))), true
		}
	case "null":
		if v != nil && len(schemaTypes(ps)) > 0 && !hasType(ps, "null") {
			return nil, true
		}
	case "scalar-for-array":
		if arr, ok := v.([]any); ok && hasType(ps, "array") {
			if len(arr) > 0 {
				return arr[0], true
			}
			return "item", true
		}
	}
	return nil, false
}
