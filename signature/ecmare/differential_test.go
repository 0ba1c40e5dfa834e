package ecmare

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

// TestRandomAgainstNode: random patterns of the constructs whose meaning
// differs between ECMA-262 and RE2 (classes, the dot, anchors, escapes,
// astral characters, properties), each matched against random strings of
// the characters that tell them apart, here and on node's RegExp (u flag);
// every answer must agree.
func TestRandomAgainstNode(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2020))
	const patterns, strs = 1500, 16
	var cases []testCase
	for range patterns {
		names := 0
		c := testCase{Pattern: genPattern(rng, 2, &names)}
		for range strs {
			c.Match = append(c.Match, genString(rng))
		}
		cases = append(cases, c)
	}
	res := runNode(t, cases)
	checked := 0
	for i, c := range cases {
		re, err := Compile(c.Pattern)
		if (err == nil) != res[i].Compiled {
			t.Errorf("%q: here %v, node %s", c.Pattern, err, res[i].Error)
		}
		if err != nil {
			// Both refuse it ("\0" then "1" is a legacy octal escape).
			continue
		}
		for j, s := range c.Match {
			// V8 tries a match at the middle of a surrogate pair, where
			// \B holds; ES2020 §21.2.5.2.2 advances by code point in
			// unicode mode (AdvanceStringIndex), as RE2 does.
			if strings.Contains(c.Pattern, `\B`) && hasAstral(s) {
				continue
			}
			if got := re.MatchString(s); got != res[i].Match[j] {
				t.Errorf("%q (RE2 %q) on %+q: %v, node %v", c.Pattern, re, s, got, res[i].Match[j])
			}
			checked++
		}
	}
	t.Logf("%d patterns, %d matches compared", len(cases), checked)
}

func hasAstral(s string) bool {
	for _, r := range s {
		if r > 0xffff {
			return true
		}
	}
	return false
}

// nodeResult is what testdata/oracle.mjs says of a case.
type nodeResult struct {
	Compiled bool   `json:"compiled"`
	Error    string `json:"error"`
	Match    []bool `json:"match"`
	NoMatch  []bool `json:"nomatch"`
}

// runNode runs the cases on node's RegExp (testdata/oracle.mjs), or skips
// the test without node (fails it where node is required).
func runNode(t *testing.T, cases []testCase) []nodeResult {
	t.Helper()
	node := findNode(t)
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, "testdata/oracle.mjs")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v: %s", err, stderr.Bytes())
	}
	var res []nodeResult
	if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cases) {
		t.Fatalf("node's answer: %v (%d results for %d cases)", err, len(res), len(cases))
	}
	return res
}

func findNode(t *testing.T) string {
	t.Helper()
	return need.Tool(t, "node", "no ECMA-262 engine to compare with: install node >= 20 (scripts/install-node.sh)")
}

var (
	genAtoms = []string{`a`, `b`, `1`, `.`, `\s`, `\S`, `\d`, `\D`, `\w`, `\W`,
		`[a-c]`, `[^a\s]`, `[\S]`, `[^\S]`, `[\s\d]`, `[^\w\u00a0]`, `\u00a0`, `\uFEFF`,
		`\uD83D\uDE00`, `\u{1F600}`, `😀`, `é`, `\p{L}`, `\P{Nd}`, `[\p{Lu}\d]`, `[^\P{L}]`,
		`\p{Zs}`, `\p{Script=Latin}`, `\n`, `\r`, `\u2028`, `\t`, `\x41`, `\cJ`, `[]`, `[^]`,
		`[\uD83D\uDE00-\uD83D\uDE4F]`, `[\-]`, `\.`, `\/`, `[\x41-\x5a]`, `[\cJ\0]`,
		`[\u{1F600}-\u{1F64F}]`, `[^\uFEFF\u2028]`, `[.$^*(]`, `\0`, `[\b]`, `[^-a]`}
	genAsserts = []string{`^`, `$`, `\b`, `\B`}
	genQuants  = []string{`*`, `+`, `?`, `{0,2}`, `{2}`, `*?`, `{1,}`}
	genChars   = []string{"a", "b", "c", "A", "1", "_", "-", ".", "/", " ", "\t", "\n", "\r",
		"\u00a0", "\ufeff", "\u2028", "\u2029", "\u0085", "\u200b", "\u3000", "é", "É",
		"\u0661", "😀", "🙏", "\U0001F680", "\u000b", "\x00", "\b", "Z", "$", "*", "("}
)

func genPattern(rng *rand.Rand, depth int, names *int) string {
	var b strings.Builder
	for range 1 + rng.IntN(4) {
		switch r := rng.IntN(10); {
		case r == 0:
			b.WriteString(genAsserts[rng.IntN(len(genAsserts))])
			continue
		case r == 1 && depth > 0:
			*names++
			open := []string{"(", "(?:", "(?<g" + strconv.Itoa(*names) + ">"}[rng.IntN(3)]
			b.WriteString(open + genPattern(rng, depth-1, names) + "|" + genPattern(rng, depth-1, names) + ")")
		default:
			b.WriteString(genAtoms[rng.IntN(len(genAtoms))])
		}
		if rng.IntN(3) == 0 {
			b.WriteString(genQuants[rng.IntN(len(genQuants))])
		}
	}
	return b.String()
}

func genString(rng *rand.Rand) string {
	var b strings.Builder
	for range rng.IntN(5) {
		b.WriteString(genChars[rng.IntN(len(genChars))])
	}
	return b.String()
}

// TestRandomSyntaxAgainstNode: short random strings of pattern syntax.
// What this package refuses as Syntax node refuses in unicode mode; what
// it calls Unsupported node compiles; what it translates either node
// compiles in unicode mode and matches alike, or it is one of the Annex B
// leniencies (doc.go), which node compiles without the u flag and matches
// alike on ASCII strings.
func TestRandomSyntaxAgainstNode(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 262))
	const patterns, strs = 3000, 8
	// Single characters of pattern syntax, and the multi-character
	// constructs random characters would seldom spell; not \p{..} nor
	// \u{..}, which only unicode mode has: mixed with the Annex B
	// leniencies no mode of node's compiles the pattern
	// (TestRandomAgainstNode covers them).
	syntax := strings.Split(`( ) [ ] { } \ ^ $ . * + ? | - , : = ! < > d D s S w W b B p P k c u x L 0 1 2 9 a A z Z _ `+
		`(?= (?! (?<= (?<! (?<n> \k<n> \1 (?: \uD83D \uDE00 {2} {1,} {0,1} \c \0 [^ \s \S \d`, " ")
	const textChars = "ab-9_:{}[]()\\ \n.*+?"
	var cases []testCase
	for range patterns {
		var p []byte
		for range 1 + rng.IntN(8) {
			p = append(p, syntax[rng.IntN(len(syntax))]...)
		}
		c := testCase{Pattern: string(p)}
		for range strs {
			var s []byte
			for range rng.IntN(6) {
				s = append(s, textChars[rng.IntN(len(textChars))])
			}
			c.Match = append(c.Match, string(s))
		}
		cases = append(cases, c)
		c.AnnexB = true
		cases = append(cases, c)
	}
	res := runNode(t, cases)
	var ok, unsupported, refused, annexB int
	for i := 0; i < len(cases); i += 2 {
		c, u, b := cases[i], res[i], res[i+1]
		re, err := Compile(c.Pattern)
		var e *Error
		switch {
		case errors.As(err, &e) && e.Kind == Syntax:
			refused++
			if u.Compiled {
				t.Errorf("%q: %v, node compiles it", c.Pattern, err)
			}
			continue
		case err != nil:
			unsupported++
			if !u.Compiled && !b.Compiled {
				t.Errorf("%q: %v, node refuses it: %s", c.Pattern, err, u.Error)
			}
			continue
		case u.Compiled:
			ok++
		case b.Compiled:
			annexB++
			u = b
		default:
			t.Errorf("%q translates to %q, node refuses it: %s", c.Pattern, re, u.Error)
			continue
		}
		for j, s := range c.Match {
			if re.MatchString(s) != u.Match[j] {
				t.Errorf("%q (RE2 %q) on %q: %v, node %v", c.Pattern, re, s, !u.Match[j], u.Match[j])
			}
		}
	}
	t.Logf("%d patterns: %d translated, %d of them by Annex B; %d unsupported; %d syntax errors", patterns, ok+annexB, annexB, unsupported, refused)
}
