package ecmare

import (
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// testCase is one entry of testdata/cases.json, written from ECMA-262
// (ES2020 §21.2) and JSON Schema 2020-12: a pattern and strings it must
// and must not match, or the error it must give.
type testCase struct {
	Why       string   `json:"why"`
	Pattern   string   `json:"pattern"`
	AnnexB    bool     `json:"annexB"` // valid only without the u flag (Annex B)
	Match     []string `json:"match"`
	NoMatch   []string `json:"nomatch"`
	Err       string   `json:"error"` // "syntax", "unsupported" or "" (translates)
	Construct string   `json:"construct"`
}

func loadCases(t testing.TB) []testCase {
	t.Helper()
	b, err := os.ReadFile("testdata/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cs []testCase
	if err := json.Unmarshal(b, &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestTranslate(t *testing.T) {
	for _, c := range loadCases(t) {
		re, err := Compile(c.Pattern)
		if c.Err != "" {
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("%q: err %v, want a %s *Error", c.Pattern, err, c.Err)
				continue
			}
			if e.Kind.String() != c.Err || !strings.Contains(e.Construct, c.Construct) {
				t.Errorf("%q: %v (%s), want %s naming %q", c.Pattern, e, e.Kind, c.Err, c.Construct)
			}
			if e.Offset < 0 || e.Offset > len(c.Pattern) {
				t.Errorf("%q: offset %d outside the pattern", c.Pattern, e.Offset)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.Pattern, err)
			continue
		}
		for _, s := range c.Match {
			if !re.MatchString(s) {
				t.Errorf("%q (RE2 %q) does not match %+q", c.Pattern, re, s)
			}
		}
		for _, s := range c.NoMatch {
			if re.MatchString(s) {
				t.Errorf("%q (RE2 %q) matches %+q", c.Pattern, re, s)
			}
		}
	}
}

// TestCasesAgainstNode runs the cases on node's RegExp, a real ECMA-262
// engine: the expectations TestTranslate holds the translation to are
// ECMA-262's, and what this package calls a syntax error node refuses in
// unicode mode while it accepts every unsupported pattern.
func TestCasesAgainstNode(t *testing.T) {
	cs := loadCases(t)
	res := runNode(t, cs)
	for i, c := range cs {
		r := res[i]
		if (c.Err == "syntax") == r.Compiled {
			t.Errorf("%q: node compiled it: %v (%s), want %v", c.Pattern, r.Compiled, r.Error, c.Err != "syntax")
			continue
		}
		for j, s := range c.Match {
			if !r.Match[j] {
				t.Errorf("%q: node does not match %+q", c.Pattern, s)
			}
		}
		for j, s := range c.NoMatch {
			if r.NoMatch[j] {
				t.Errorf("%q: node matches %+q", c.Pattern, s)
			}
		}
	}
}

// TestPropertyNames: every name ECMA-262 and Go's tables share translates
// to a pattern RE2 compiles and that matches what Go's table holds.
func TestPropertyNames(t *testing.T) {
	check := func(p string, tab *unicode.RangeTable) {
		t.Helper()
		re, err := Compile(`^` + p + `$`)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return
		}
		lo := rune(-1)
		if len(tab.R16) > 0 {
			lo = rune(tab.R16[0].Lo)
		} else if len(tab.R32) > 0 {
			lo = rune(tab.R32[0].Lo)
		}
		if lo >= 0 && lo < 0xd800 || lo > 0xdfff {
			if !re.MatchString(string(lo)) {
				t.Errorf("%s does not match %U", p, lo)
			}
		}
	}
	for name, tab := range unicode.Categories {
		check(`\p{`+name+`}`, tab)
		check(`\p{gc=`+name+`}`, tab)
	}
	for alias, name := range unicode.CategoryAliases {
		check(`\p{`+alias+`}`, unicode.Categories[name])
		check(`\p{General_Category=`+alias+`}`, unicode.Categories[name])
	}
	n := 0
	for name, tab := range unicode.Scripts {
		if !strings.Contains(name, "_") && name != "SignWriting" {
			check(`\p{Script=`+name+`}`, tab)
			n++
		}
	}
	if n < 100 {
		t.Errorf("only %d scripts translate", n)
	}
}

// TestOutputBound: the longest expansions stay within the bound the fuzz
// test holds every translation to.
func TestOutputBound(t *testing.T) {
	for _, p := range []string{`[\S]`, `\S`, `\s`, `.`, `[]`, `[^]`, `\u{10FFFF}`, `\uD83D\uDE00`, "\u0080", `\x00`} {
		s, err := Translate(p)
		if err != nil {
			t.Fatalf("%q: %v", p, err)
		}
		if len(s) > outputBound(p) {
			t.Errorf("%q: %d bytes (%q), more than %d", p, len(s), s, outputBound(p))
		}
		if _, err := regexp.Compile(s); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}

// outputBound is the most Translate writes for p (doc.go).
func outputBound(p string) int { return 96*len(p) + 32 }

// TestNesting: groups nest as deep as RE2 allows; deeper is unsupported,
// and a hostile depth is refused without recursion.
func TestNesting(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("(", n) + "a" + strings.Repeat(")", n) }
	if re, err := Compile(deep(maxDepth)); err != nil || !re.MatchString("a") {
		t.Errorf("%d groups: %v", maxDepth, err)
	}
	var e *Error
	if _, err := Translate(deep(maxDepth + 1)); !errors.As(err, &e) || e.Kind != Unsupported || !strings.Contains(e.Construct, "deeper") {
		t.Errorf("%d groups: %v", maxDepth+1, err)
	}
	if _, err := Translate(strings.Repeat("(", 1<<20)); !errors.As(err, &e) || e.Kind != Syntax || e.Offset != 1<<20-1 {
		t.Errorf("1 Mi open groups: %v", err)
	}
}
