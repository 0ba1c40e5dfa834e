package ecmare

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

const (
	// maxRepeat is RE2's largest repetition count.
	maxRepeat = 1000
	// maxDepth bounds group nesting: RE2 refuses a parse tree deeper than
	// 1000 anyway.
	maxDepth = 1000
)

// Translate returns the RE2 pattern, for Go's regexp, that matches the
// same strings as the ECMA-262 pattern (doc.go says which dialect), or an
// *Error that says why there is none.
func Translate(pattern string) (string, error) {
	t := translator{src: pattern, out: make([]byte, 0, len(pattern)+len(pattern)/2+8)}
	if err := t.run(); err != nil {
		return "", err
	}
	return string(t.out), nil
}

// Compile translates the pattern and compiles it. A translation RE2
// refuses for its limits on size, depth or nested repetition is an
// Unsupported *Error at offset 0.
func Compile(pattern string) (*regexp.Regexp, error) {
	s, err := Translate(pattern)
	if err != nil {
		return nil, err
	}
	re, err := regexp.Compile(s)
	if err != nil {
		// A translation is well-formed by construction: what RE2 refuses
		// is its size (ErrLarge) or depth (ErrNestingDepth).
		why := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			why = string(se.Code)
		}
		return nil, &Error{Kind: Unsupported, Construct: "pattern beyond RE2's limits (" + why + ")"}
	}
	return re, nil
}

// The kinds of group.
const (
	capture byte = iota
	nonCapture
	lookahead
	lookbehind
)

type group struct {
	off  int
	kind byte
}

type translator struct {
	src   string
	out   []byte
	stack []group
	// atom: the last thing emitted may take a quantifier; quant: it was a
	// quantifier (for the error's name).
	atom, quant bool

	groups      int             // capturing groups
	names       map[string]bool // group names; nil until one
	refs        []nameRef       // \k<name>, checked at the end: a reference may come first
	maxRef      int             // the largest \N
	maxRefOff   int
	unsupported *Error // the first Unsupported; a later Syntax error wins
}

type nameRef struct {
	name string
	off  int
}

func (t *translator) syntaxErr(construct string, off int) *Error {
	return &Error{Kind: Syntax, Construct: construct, Offset: off}
}

// unsupport records the first construct RE2 cannot express; translation
// goes on so that a syntax error after it still makes the pattern invalid.
func (t *translator) unsupport(construct string, off int) {
	if t.unsupported == nil {
		t.unsupported = &Error{Kind: Unsupported, Construct: construct, Offset: off}
	}
}

func (t *translator) run() *Error {
	src := t.src
	for i := 0; i < len(src); {
		var err *Error
		switch c := src[i]; c {
		case '|':
			t.out = append(t.out, '|')
			t.atom, t.quant = false, false
			i++
		case '(':
			i, err = t.open(i)
		case ')':
			i, err = t.close(i)
		case '^':
			t.assertion(`\A`)
			i++
		case '$':
			t.assertion(`\z`)
			i++
		case '.':
			t.atomText(dotClass)
			i++
		case '*', '+', '?':
			i, err = t.quantifier(i, i+1, 0, 0)
		case '{':
			// Annex B: a "{" that does not start a quantifier is a literal.
			if j, lo, hi, ok := braced(src, i); ok {
				i, err = t.quantifier(i, j, lo, hi)
			} else {
				t.literal('{')
				i++
			}
		case '[':
			i, err = t.class(i)
		case '\\':
			i, err = t.escape(i)
		default:
			// "}" and "]" alone are literals (Annex B).
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n == 1 {
				return t.syntaxErr("invalid UTF-8", i)
			}
			t.literal(r)
			i += n
		}
		if err != nil {
			return err
		}
	}
	if n := len(t.stack); n > 0 {
		return t.syntaxErr("unterminated group", t.stack[n-1].off)
	}
	if t.maxRef > t.groups {
		return t.syntaxErr("backreference to group "+strconv.Itoa(t.maxRef)+" of "+strconv.Itoa(t.groups), t.maxRefOff)
	}
	for _, r := range t.refs {
		if !t.names[r.name] {
			return t.syntaxErr("backreference to no group named "+strconv.Quote(r.name), r.off)
		}
	}
	return t.unsupported
}

func (t *translator) assertion(s string) {
	t.out = append(t.out, s...)
	t.atom, t.quant = false, false
}

func (t *translator) atomText(s string) {
	t.out = append(t.out, s...)
	t.atom, t.quant = true, false
}

func (t *translator) literal(r rune) {
	t.out = appendLiteral(t.out, r)
	t.atom, t.quant = true, false
}

// appendLiteral writes r as an RE2 atom outside a class.
func appendLiteral(b []byte, r rune) []byte {
	if r >= 0x20 && r < 0x7f {
		switch r {
		case '\\', '.', '+', '*', '?', '(', ')', '|', '[', ']', '{', '}', '^', '$':
			b = append(b, '\\')
		}
		return append(b, byte(r))
	}
	return appendHex(b, r)
}

// appendClassChar writes r as an item of an RE2 class.
func appendClassChar(b []byte, r rune) []byte {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == ' ':
		return append(b, byte(r))
	case r > 0x20 && r < 0x7f:
		// RE2 reads a backslash before punctuation as the punctuation,
		// so "[", "]", "^", "-" and "\" stay literal and "[:" opens no
		// POSIX class.
		return append(b, '\\', byte(r))
	}
	return appendHex(b, r)
}

// quantifier emits the quantifier src[i:j] (lo and hi from braced for a
// "{"), with a lazy "?" after it.
func (t *translator) quantifier(i, j, lo, hi int) (int, *Error) {
	src := t.src
	if !t.atom {
		switch {
		case t.quant && src[i] == '+':
			return 0, t.syntaxErr("possessive quantifier "+quote(src, i-1, j), i)
		case t.quant:
			return 0, t.syntaxErr("quantifier after a quantifier "+quote(src, i, j), i)
		}
		return 0, t.syntaxErr("quantifier with nothing to repeat "+quote(src, i, j), i)
	}
	if src[i] == '{' {
		if hi >= 0 && lo > hi {
			return 0, t.syntaxErr("quantifier out of order "+quote(src, i, j), i)
		}
		if lo > maxRepeat || hi > maxRepeat {
			t.unsupport("repetition count above 1000 "+quote(src, i, j), i)
			lo, hi = 0, min(hi, 0)
		}
		t.out = append(t.out, '{')
		t.out = strconv.AppendInt(t.out, int64(lo), 10)
		if hi != lo {
			t.out = append(t.out, ',')
			if hi >= 0 {
				t.out = strconv.AppendInt(t.out, int64(hi), 10)
			}
		}
		t.out = append(t.out, '}')
	} else {
		t.out = append(t.out, src[i])
	}
	if j < len(src) && src[j] == '?' {
		t.out = append(t.out, '?')
		j++
	}
	t.atom, t.quant = false, true
	return j, nil
}

// braced parses the quantifier {n}, {n,} or {n,m} at src[i]: its end, n
// and m (-1 for none; both saturate above maxRepeat).
func braced(src string, i int) (j, lo, hi int, ok bool) {
	j = i + 1
	lo, j, ok = decimal(src, j)
	if !ok {
		return 0, 0, 0, false
	}
	hi = lo
	if j < len(src) && src[j] == ',' {
		j++
		hi = -1
		if j < len(src) && isDigit(src[j]) {
			hi, j, _ = decimal(src, j)
		}
	}
	if j >= len(src) || src[j] != '}' {
		return 0, 0, 0, false
	}
	return j + 1, lo, hi, true
}

// decimal reads the digits at src[i:], saturating at maxRepeat+1.
func decimal(src string, i int) (v, j int, ok bool) {
	for j = i; j < len(src) && isDigit(src[j]); j++ {
		if v <= maxRepeat {
			v = v*10 + int(src[j]-'0')
		}
	}
	return min(v, maxRepeat+1), j, j > i
}

func (t *translator) open(i int) (int, *Error) {
	src := t.src
	kind, j := capture, i+1
	if j < len(src) && src[j] == '?' {
		next := byte(0)
		if j+1 < len(src) {
			next = src[j+1]
		}
		switch {
		case next == ':':
			kind, j = nonCapture, j+2
		case next == '=' || next == '!':
			kind, j = lookahead, j+2
			t.unsupport("lookahead "+quote(src, i, j), i)
		case next == '<' && j+2 < len(src) && (src[j+2] == '=' || src[j+2] == '!'):
			kind, j = lookbehind, j+3
			t.unsupport("lookbehind "+quote(src, i, j), i)
		case next == '<':
			name, k, err := t.groupName(j + 2)
			if err != nil {
				return 0, err
			}
			if t.names == nil {
				t.names = map[string]bool{}
			}
			if t.names[name] {
				return 0, t.syntaxErr("second group named "+strconv.Quote(name), i)
			}
			t.names[name] = true
			j = k
		default:
			// (?i) (?i:..) (?P<n>..) (?>..) (?#..) and the like.
			return 0, t.syntaxErr("group "+quote(src, i, j+2)+" (ECMA-262 has (?: (?= (?! (?<= (?<! (?<name> only)", i)
		}
	}
	if kind == capture {
		t.groups++
	}
	if len(t.stack) == maxDepth {
		t.unsupport("groups nested deeper than 1000", i)
	}
	t.stack = append(t.stack, group{off: i, kind: kind})
	// Captures are of no use to a match: every group is non-capturing,
	// which spares RE2 two instructions each.
	t.out = append(t.out, "(?:"...)
	t.atom, t.quant = false, false
	return j, nil
}

func (t *translator) close(i int) (int, *Error) {
	n := len(t.stack)
	if n == 0 {
		return 0, t.syntaxErr(`unmatched ")"`, i)
	}
	g := t.stack[n-1]
	t.stack = t.stack[:n-1]
	t.out = append(t.out, ')')
	// Annex B lets a lookahead take a quantifier, never a lookbehind.
	t.atom, t.quant = g.kind != lookbehind, false
	return i + 1, nil
}

// groupName reads a group name up to ">" from src[i:]: its text and the
// index after the ">".
func (t *translator) groupName(i int) (string, int, *Error) {
	src := t.src
	for k := i; k < len(src); {
		r, n := utf8.DecodeRuneInString(src[k:])
		switch {
		case r == '>' && k > i:
			return src[i:k], k + 1, nil
		case r == '\\':
			// \uXXXX in a name is ES2020 syntax, rare enough to refuse.
			t.unsupport("escape in a group name", k)
			n = 1
			if k+1 < len(src) {
				_, m := utf8.DecodeRuneInString(src[k+1:])
				n += m
			}
		case k == i && !idStart(r), k > i && !idContinue(r):
			return "", 0, t.syntaxErr("group name character "+quote(src, k, k+n), k)
		}
		k += n
	}
	return "", 0, t.syntaxErr("unterminated group name", i)
}

// idStart and idContinue are ECMA-262's RegExpIdentifierStart and Part
// for a code point (ID_Start and ID_Continue, "$", "_", ZWNJ, ZWJ).
func idStart(r rune) bool {
	return r == '$' || r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_ID_Start, r)
}

func idContinue(r rune) bool {
	return idStart(r) || r == 0x200c || r == 0x200d ||
		unicode.In(r, unicode.Mn, unicode.Mc, unicode.Nd, unicode.Pc, unicode.Other_ID_Continue)
}

// escape translates the escape at src[i] outside a class.
func (t *translator) escape(i int) (int, *Error) {
	src := t.src
	if i+1 >= len(src) {
		return 0, t.syntaxErr(`"\" at the end`, i)
	}
	switch c := src[i+1]; c {
	case 'd', 'D', 'w', 'W':
		// RE2's are ASCII, as ECMA-262's.
		t.atomText(src[i : i+2])
		return i + 2, nil
	case 's':
		t.atomText(spaceClass)
		return i + 2, nil
	case 'S':
		t.atomText(notSpaceClass)
		return i + 2, nil
	case 'b', 'B':
		// Word boundaries on ASCII \w in both.
		t.assertion(src[i : i+2])
		return i + 2, nil
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		n, j, _ := decimal(src, i+1)
		t.unsupport("backreference "+quote(src, i, j), i)
		if n > t.maxRef {
			t.maxRef, t.maxRefOff = n, i
		}
		t.atomText("(?:)")
		return j, nil
	case 'k':
		if i+2 >= len(src) || src[i+2] != '<' {
			return 0, t.syntaxErr(`"\k" without <name>`, i)
		}
		name, j, err := t.groupName(i + 3)
		if err != nil {
			return 0, err
		}
		t.refs = append(t.refs, nameRef{name, i})
		t.unsupport("backreference "+quote(src, i, j), i)
		t.atomText("(?:)")
		return j, nil
	case 'p', 'P':
		text, j, err := t.property(i)
		if err != nil {
			return 0, err
		}
		t.atomText(text)
		return j, nil
	}
	r, j, err := t.charEscape(i, false)
	if err != nil {
		return 0, err
	}
	t.literal(r)
	return j, nil
}

// charEscape reads an escape at src[i] that stands for one code point.
func (t *translator) charEscape(i int, inClass bool) (rune, int, *Error) {
	src := t.src
	switch c := src[i+1]; c {
	case 't':
		return '\t', i + 2, nil
	case 'n':
		return '\n', i + 2, nil
	case 'v':
		return '\v', i + 2, nil
	case 'f':
		return '\f', i + 2, nil
	case 'r':
		return '\r', i + 2, nil
	case 'c':
		if i+2 < len(src) && isLetter(src[i+2]) {
			return rune(src[i+2] % 32), i + 3, nil
		}
		return 0, 0, t.syntaxErr(`"\c" without a letter`, i)
	case '0':
		if i+2 < len(src) && isDigit(src[i+2]) {
			return 0, 0, t.syntaxErr("legacy octal escape "+quote(src, i, i+3), i)
		}
		return 0, i + 2, nil
	case 'x':
		if i+3 < len(src) && isHex(src[i+2]) && isHex(src[i+3]) {
			return rune(unhex(src[i+2])<<4 | unhex(src[i+3])), i + 4, nil
		}
		return 0, 0, t.syntaxErr(`"\x" without two hex digits`, i)
	case 'u':
		return t.unicodeEscape(i)
	default:
		if isLetter(c) || isDigit(c) {
			why := " (ECMA-262 defines no such escape)"
			if inClass && isDigit(c) {
				why = " in a class (a legacy octal escape)"
			}
			return 0, 0, t.syntaxErr("escape "+quote(src, i, i+2)+why, i)
		}
		// Any other character escapes to itself (Annex B's identity
		// escape; unicode mode's for the syntax characters and "/").
		r, n := utf8.DecodeRuneInString(src[i+1:])
		if r == utf8.RuneError && n == 1 {
			return 0, 0, t.syntaxErr("invalid UTF-8", i+1)
		}
		return r, i + 1 + n, nil
	}
}

// unicodeEscape reads \uXXXX, a surrogate pair of two, or \u{X...}.
func (t *translator) unicodeEscape(i int) (rune, int, *Error) {
	src := t.src
	if i+2 < len(src) && src[i+2] == '{' {
		v, k := rune(0), i+3
		for ; k < len(src) && isHex(src[k]); k++ {
			v = v<<4 | unhex(src[k])
			if v > unicode.MaxRune {
				return 0, 0, t.syntaxErr(`"\u{..}" above 10FFFF`, i)
			}
		}
		if k == i+3 || k >= len(src) || src[k] != '}' {
			return 0, 0, t.syntaxErr(`"\u{" without hex digits and "}"`, i)
		}
		return v, k + 1, nil
	}
	v, ok := hex4(src, i+2)
	if !ok {
		return 0, 0, t.syntaxErr(`"\u" without four hex digits`, i)
	}
	j := i + 6
	if utf16.IsSurrogate(v) && v < 0xdc00 && j+1 < len(src) && src[j] == '\\' && src[j+1] == 'u' {
		if w, ok := hex4(src, j+2); ok && 0xdc00 <= w && w <= 0xdfff {
			return utf16.DecodeRune(v, w), j + 6, nil
		}
	}
	// A lone surrogate stays one: no UTF-8 string holds it, so it
	// matches nothing, as in ECMA-262 on a well-formed string.
	return v, j, nil
}

func hex4(src string, i int) (rune, bool) {
	if i+4 > len(src) {
		return 0, false
	}
	var v rune
	for k := i; k < i+4; k++ {
		if !isHex(src[k]) {
			return 0, false
		}
		v = v<<4 | unhex(src[k])
	}
	return v, true
}

// property reads \p{..} or \P{..} at src[i] and returns its RE2 text.
func (t *translator) property(i int) (string, int, *Error) {
	src := t.src
	if i+2 >= len(src) || src[i+2] != '{' {
		return "", 0, t.syntaxErr("escape "+quote(src, i, i+2)+` without "{name}"`, i)
	}
	k := i + 3
	for k < len(src) && (isLetter(src[k]) || isDigit(src[k]) || src[k] == '_' || src[k] == '=') {
		k++
	}
	if k >= len(src) || src[k] != '}' || k == i+3 {
		return "", 0, t.syntaxErr("malformed property escape "+quote(src, i, k+1), i)
	}
	name, kind, why := property(src[i+3 : k])
	switch kind {
	case Syntax:
		return "", 0, t.syntaxErr(why+" "+quote(src, i, k+1), i)
	case Unsupported:
		t.unsupport(why+" "+quote(src, i, k+1), i)
		name = "Any"
	}
	return `\` + src[i+1:i+2] + "{" + name + "}", k + 1, nil
}

// classItem is a class atom: a code point, or a set (its RE2 class text).
type classItem struct {
	r   rune
	set string
}

func (t *translator) class(i int) (int, *Error) {
	src := t.src
	j := i + 1
	neg := j < len(src) && src[j] == '^'
	if neg {
		j++
	}
	if j < len(src) && src[j] == ']' {
		// RE2 would read this "]" as a literal.
		if neg {
			t.atomText(anyClass)
		} else {
			t.atomText(emptyClass)
		}
		return j + 1, nil
	}
	t.out = append(t.out, '[')
	if neg {
		t.out = append(t.out, '^')
	}
	for {
		if j >= len(src) {
			return 0, t.syntaxErr("unterminated class", i)
		}
		if src[j] == ']' {
			break
		}
		a, k, err := t.classAtom(j)
		if err != nil {
			return 0, err
		}
		if k+1 < len(src) && src[k] == '-' && src[k+1] != ']' {
			b, k2, err := t.classAtom(k + 1)
			if err != nil {
				return 0, err
			}
			switch {
			case a.set != "" || b.set != "":
				// Annex B: a class escape at either end makes "-" a literal.
				t.appendItem(a)
				t.out = append(t.out, `\-`...)
				t.appendItem(b)
			case a.r > b.r:
				return 0, t.syntaxErr("class range out of order "+quote(src, j, k2), j)
			default:
				t.out = appendClassChar(t.out, a.r)
				t.out = append(t.out, '-')
				t.out = appendClassChar(t.out, b.r)
			}
			j = k2
			continue
		}
		t.appendItem(a)
		j = k
	}
	t.out = append(t.out, ']')
	t.atom, t.quant = true, false
	return j + 1, nil
}

func (t *translator) appendItem(a classItem) {
	if a.set != "" {
		t.out = append(t.out, a.set...)
		return
	}
	t.out = appendClassChar(t.out, a.r)
}

func (t *translator) classAtom(j int) (classItem, int, *Error) {
	src := t.src
	if src[j] != '\\' {
		r, n := utf8.DecodeRuneInString(src[j:])
		if r == utf8.RuneError && n == 1 {
			return classItem{}, 0, t.syntaxErr("invalid UTF-8", j)
		}
		return classItem{r: r}, j + n, nil
	}
	if j+1 >= len(src) {
		return classItem{}, 0, t.syntaxErr(`"\" at the end`, j)
	}
	switch src[j+1] {
	case 'd', 'D', 'w', 'W':
		return classItem{set: src[j : j+2]}, j + 2, nil
	case 's':
		return classItem{set: spaceItems}, j + 2, nil
	case 'S':
		return classItem{set: notSpaceItems}, j + 2, nil
	case 'p', 'P':
		text, k, err := t.property(j)
		return classItem{set: text}, k, err
	case 'b':
		return classItem{r: '\b'}, j + 2, nil
	case '-':
		return classItem{r: '-'}, j + 2, nil
	}
	r, k, err := t.charEscape(j, true)
	return classItem{r: r}, k, err
}

func isDigit(c byte) bool  { return '0' <= c && c <= '9' }
func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isHex(c byte) bool    { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

func unhex(c byte) rune {
	switch {
	case c <= '9':
		return rune(c - '0')
	case c <= 'F':
		return rune(c - 'A' + 10)
	}
	return rune(c - 'a' + 10)
}
