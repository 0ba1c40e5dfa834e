package ecmare

import "strconv"

// Kind says why a pattern was not translated.
type Kind uint8

const (
	// Syntax: the pattern is not one of the accepted dialect (doc.go).
	Syntax Kind = 1 + iota
	// Unsupported: the pattern is valid ECMA-262 but uses a construct RE2
	// cannot express (lookaround, backreferences, ...).
	Unsupported
)

func (k Kind) String() string {
	switch k {
	case Syntax:
		return "syntax"
	case Unsupported:
		return "unsupported"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is the reason a pattern was not translated.
type Error struct {
	Kind Kind
	// Construct names what was found, with the pattern's text of it
	// quoted where it helps: `lookahead "(?="`, `escape "\\Z"`.
	Construct string
	// Offset is the byte offset of the construct in the pattern.
	Offset int
}

func (e *Error) Error() string {
	s := "ecmare: " + e.Construct + " at offset " + strconv.Itoa(e.Offset)
	if e.Kind == Unsupported {
		return s + ": valid ECMA-262 that RE2 cannot express"
	}
	return s + ": not an ECMA-262 pattern"
}

// maxQuote bounds the text an Error quotes from the pattern.
const maxQuote = 32

// quote is the pattern's text src[i:j], quoted and cut to maxQuote bytes
// at a rune boundary.
func quote(src string, i, j int) string {
	if j > len(src) {
		j = len(src)
	}
	if j-i > maxQuote {
		j = i + maxQuote
		for j > i && !runeStart(src[j]) {
			j--
		}
	}
	return strconv.Quote(src[i:j])
}

func runeStart(b byte) bool { return b&0xC0 != 0x80 }
