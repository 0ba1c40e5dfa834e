package ecmare

import (
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// spaceRanges are ECMA-262's WhiteSpace and LineTerminator code points
// (ES2020 §11.2, §11.3: TAB VT FF SP NBSP ZWNBSP, every Zs, LF CR LS PS),
// sorted.
var spaceRanges = [][2]rune{
	{0x09, 0x0d}, {0x20, 0x20}, {0xa0, 0xa0}, {0x1680, 0x1680},
	{0x2000, 0x200a}, {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f},
	{0x3000, 0x3000}, {0xfeff, 0xfeff},
}

// The texts of \s and \S as class contents, and the dot.
var (
	spaceItems    = rangeItems(spaceRanges)
	notSpaceItems = rangeItems(complement(spaceRanges))
	spaceClass    = "[" + spaceItems + "]"
	notSpaceClass = "[^" + spaceItems + "]"
	// dotClass: ECMA-262's "." without the s flag excludes the four
	// line terminators; RE2's only \n.
	dotClass = `[^\n\r\x{2028}\x{2029}]`
	// The classes ECMA-262's [] and [^] are: nothing, and any code point.
	emptyClass = `[^\x{0}-\x{10ffff}]`
	anyClass   = `[\x{0}-\x{10ffff}]`
)

func complement(rs [][2]rune) [][2]rune {
	var out [][2]rune
	next := rune(0)
	for _, r := range rs {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = r[1] + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, [2]rune{next, unicode.MaxRune})
	}
	return out
}

func rangeItems(rs [][2]rune) string {
	var b []byte
	for _, r := range rs {
		b = appendHex(b, r[0])
		if r[1] != r[0] {
			b = append(b, '-')
			b = appendHex(b, r[1])
		}
	}
	return string(b)
}

func appendHex(b []byte, r rune) []byte {
	b = append(b, `\x{`...)
	b = strconv.AppendUint(b, uint64(r), 16)
	return append(b, '}')
}

// ecmaBinary are ECMA-262's binary properties and their aliases (ES2020
// table 54) RE2 has no table for; Any, ASCII and Assigned it has.
var ecmaBinary = setOf(`ASCII_Hex_Digit AHex Alphabetic Alpha
		Bidi_Control Bidi_C Bidi_Mirrored Bidi_M Case_Ignorable CI Cased
		Changes_When_Casefolded CWCF Changes_When_Casemapped CWCM
		Changes_When_Lowercased CWL Changes_When_NFKC_Casefolded CWKCF
		Changes_When_Titlecased CWT Changes_When_Uppercased CWU Dash
		Default_Ignorable_Code_Point DI Deprecated Dep Diacritic Dia Emoji
		Emoji_Component EComp Emoji_Modifier EMod Emoji_Modifier_Base EBase
		Emoji_Presentation EPres Extended_Pictographic ExtPict Extender Ext
		Grapheme_Base Gr_Base Grapheme_Extend Gr_Ext Hex_Digit Hex
		IDS_Binary_Operator IDSB IDS_Trinary_Operator IDST ID_Continue IDC
		ID_Start IDS Ideographic Ideo Join_Control Join_C
		Logical_Order_Exception LOE Lowercase Lower Math
		Noncharacter_Code_Point NChar Pattern_Syntax Pat_Syn
		Pattern_White_Space Pat_WS Quotation_Mark QMark Radical
		Regional_Indicator RI Sentence_Terminal STerm Soft_Dotted SD
		Terminal_Punctuation Term Unified_Ideograph UIdeo Uppercase Upper
		Variation_Selector VS White_Space space XID_Continue XIDC XID_Start
		XIDS`)

func setOf(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

// generalCategory is the RE2 name of an ECMA-262 General_Category value or
// alias (Go's tables are Unicode's PropertyValueAliases for gc, as
// ECMA-262's table 55 is), or "".
func generalCategory(v string) string {
	if _, ok := unicode.Categories[v]; ok {
		return v
	}
	return unicode.CategoryAliases[v]
}

// re2Scripts are the script names Go's regexp accepts in \p{..}: not all
// of unicode.Scripts (doc.go).
var re2Scripts = sync.OnceValue(func() map[string]bool {
	m := make(map[string]bool, len(unicode.Scripts))
	for name := range unicode.Scripts {
		if _, err := syntax.Parse(`\p{`+name+`}`, syntax.Perl); err == nil {
			m[name] = true
		}
	}
	return m
})

// property resolves the body of \p{body} to the RE2 name to put in \p{..},
// or the Kind and construct of why not.
func property(body string) (name string, k Kind, why string) {
	key, val, hasVal := strings.Cut(body, "=")
	if !hasVal {
		if gc := generalCategory(body); gc != "" {
			return gc, 0, ""
		}
		switch body {
		case "Any", "ASCII", "Assigned":
			return body, 0, ""
		}
		if ecmaBinary[body] {
			return "", Unsupported, "binary property RE2 has no table for"
		}
		return "", Syntax, "unknown Unicode property"
	}
	switch key {
	case "General_Category", "gc":
		if gc := generalCategory(val); gc != "" {
			return gc, 0, ""
		}
		return "", Syntax, "unknown General_Category value"
	case "Script", "sc":
		if re2Scripts()[val] {
			return val, 0, ""
		}
		// Without Unicode's alias table a short alias (Grek) or a script
		// newer than Go's tables cannot be told from a misspelling: both
		// are refused, as unsupported.
		return "", Unsupported, "script RE2 does not know by this name"
	case "Script_Extensions", "scx":
		return "", Unsupported, "Script_Extensions"
	}
	return "", Syntax, "unknown Unicode property"
}
