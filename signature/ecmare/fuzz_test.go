package ecmare

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"testing"
)

// FuzzTranslate: on any input Translate does not panic, and either gives
// a translation of bounded size that RE2 compiles (or refuses only for
// its size, depth and nested repetition limits, which Compile reports as Unsupported), or an
// *Error with an offset inside the pattern.
func FuzzTranslate(f *testing.F) {
	for _, c := range loadCases(f) {
		f.Add(c.Pattern)
	}
	for _, s := range []string{``, `\`, `(`, `[`, `[\`, `\u{`, `\uD83D\u`, `(?<`, `\k<`, `{1,`, "\xff", `[\p{L}-\d]`, `(?:a{1000}){1000}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if len(p) > 1<<12 {
			return
		}
		s, err := Translate(p)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset > len(p) || e.Construct == "" {
				t.Fatalf("%q: %#v", p, err)
			}
			return
		}
		if len(s) > outputBound(p) {
			t.Fatalf("%q: %d bytes out, more than %d", p, len(s), outputBound(p))
		}
		if _, err := regexp.Compile(s); err != nil {
			var se *syntax.Error
			if !errors.As(err, &se) || se.Code != syntax.ErrLarge && se.Code != syntax.ErrNestingDepth && se.Code != syntax.ErrInvalidRepeatSize {
				t.Fatalf("%q -> %q: %v", p, s, err)
			}
			if _, err := Compile(p); err == nil {
				t.Fatalf("%q: Compile succeeded where regexp.Compile failed", p)
			}
		}
	})
}
