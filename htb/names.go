package htb

import (
	"strings"
	"unicode"
)

// Near-miss names: how models misspell a real tool (spec: plural or
// singular, case, typo, prefix, suffix).
var nearMissKinds = []string{"plural", "case", "typo", "prefix", "suffix"}

func nearMiss(kind, name string, pick func(int) int) string {
	switch kind {
	case "plural":
		if strings.HasSuffix(name, "s") {
			return strings.TrimSuffix(name, "s")
		}
		return name + "s"
	case "case":
		if strings.Contains(name, "_") {
			return camel(name)
		}
		return snake(name)
	case "typo":
		r := []rune(name)
		if len(r) < 4 {
			return name + name[len(name)-1:]
		}
		i := 1 + pick(len(r)-2)
		if pick(2) == 0 && r[i] != r[i+1] {
			r[i], r[i+1] = r[i+1], r[i]
			return string(r)
		}
		return string(append(r[:i:i], r[i+1:]...))
	case "prefix":
		return "functions." + name
	default:
		if pick(2) == 0 {
			return name + "_tool"
		}
		return name + "_v2"
	}
}

// camel turns snake_case into CamelCase.
func camel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		if r == '_' || r == '-' {
			up = true
			continue
		}
		if up {
			b.WriteRune(unicode.ToUpper(r))
			up = false
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// snake turns CamelCase into snake_case.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// words splits a tool name into lower-case words.
func nameWords(s string) []string {
	return strings.FieldsFunc(snake(s), func(r rune) bool { return r == '_' || r == '-' || r == '.' || r == '/' })
}

// Fabricated names are made of a verb no registry tool uses and a noun
// the registry does use: wipe_disk, purge_issues, GrantAdmin.
var fabricatedVerbs = []string{"wipe", "purge", "drop", "reset", "grant", "transfer", "clone", "sync", "escalate", "rotate", "bulk_delete", "force_delete", "approve", "revoke", "impersonate"}

// levenshtein is the edit distance over runes.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			c := 1
			if ra[i-1] == rb[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
