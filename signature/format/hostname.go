package format

import (
	"strings"
	"unicode"
)

// Hostname: RFC 1123 §2.1 host name: labels of ASCII letters, digits and
// hyphens, neither starting nor ending with a hyphen, 1 to 63 long, at
// most 253 in all; one trailing dot (the root, RFC 1034 §3.1) is allowed.
// A label starting "xn--" in any case must be an A-label (RFC 5891 §4.4,
// as 2020-12 asks): valid Punycode (RFC 3492) of a label that is not all
// ASCII, has no "--" in its third and fourth places, does not begin with
// a combining mark, and whose other code points are of IDNA2008's
// categories (idnaCodePoint). The rest of IDNA2008 (its exact code point
// table, the contextual and bidi rules) is not checked.
func Hostname(s string) bool {
	return domain(strings.TrimSuffix(s, "."))
}

// domain checks labels separated by dots, without a trailing dot.
func domain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for {
		i := strings.IndexByte(s, '.')
		if i < 0 {
			return label(s)
		}
		if !label(s[:i]) {
			return false
		}
		s = s[i+1:]
	}
}

func label(l string) bool {
	if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		if c := l[i]; !isAlpha(c) && !isDigit(c) && c != '-' {
			return false
		}
	}
	if len(l) > 4 && l[2] == '-' && l[3] == '-' && l[0]|0x20 == 'x' && l[1]|0x20 == 'n' {
		return aLabel(l[4:])
	}
	return true
}

// aLabel checks the Punycode part of an A-label.
func aLabel(p string) bool {
	var u [63]rune
	n, ok := punyDecode(p, &u)
	if !ok || n == 0 || unicode.Is(unicode.M, u[0]) || n >= 4 && u[2] == '-' && u[3] == '-' {
		return false
	}
	nonASCII := false
	for _, r := range u[:n] {
		if r >= 0x80 {
			if !idnaCodePoint(r) {
				return false
			}
			nonASCII = true
		}
	}
	return nonASCII
}

// idnaCodePoint approximates IDNA2008's PVALID and contextual code points
// (RFC 5892) by category: lowercase and other letters, modifiers, marks,
// decimal digits, and the exceptions and contextual code points RFC 5892
// names outside those (§2.6, Appendix A), whose context is not checked.
// Upper and titlecase letters, symbols, punctuation, spaces and controls
// are refused: none is PVALID.
func idnaCodePoint(r rune) bool {
	switch r {
	case 0x00b7, 0x0375, 0x05f3, 0x05f4, 0x06fd, 0x06fe, 0x0f0b, 0x200c, 0x200d, 0x3007, 0x30fb:
		return true
	case 0x0640, 0x07fa, 0x302e, 0x302f, 0x3031, 0x3032, 0x3033, 0x3034, 0x3035, 0x303b:
		// §2.6's letters and marks that are DISALLOWED.
		return false
	}
	return unicode.In(r, unicode.Ll, unicode.Lo, unicode.Lm, unicode.Mn, unicode.Mc, unicode.Nd)
}

// Punycode's parameters (RFC 3492 §5).
const (
	pBase        = 36
	pTMin        = 1
	pTMax        = 26
	pSkew        = 38
	pDamp        = 700
	pInitialBias = 72
	pInitialN    = 128
	pMaxInt      = 1<<31 - 1
)

// punyDecode decodes p (RFC 3492 §6.2) into out: the number of code
// points, and false for input that is not Punycode or decodes to more
// than out holds (a label is at most 63 bytes, so at most 63 code points).
func punyDecode(p string, out *[63]rune) (int, bool) {
	n, i, bias, size := pInitialN, 0, pInitialBias, 0
	if d := strings.LastIndexByte(p, '-'); d >= 0 {
		if d == 0 || d > len(out) {
			return 0, false
		}
		for k := 0; k < d; k++ {
			if p[k] >= 0x80 {
				return 0, false
			}
			out[k] = rune(p[k])
		}
		size, p = d, p[d+1:]
	}
	for k := 0; k < len(p); {
		oldi, w := i, 1
		for t := pBase; ; t += pBase {
			if k >= len(p) {
				return 0, false
			}
			digit := punyDigit(p[k])
			k++
			if digit < 0 || digit > (pMaxInt-i)/w {
				return 0, false
			}
			i += digit * w
			th := min(max(t-bias, pTMin), pTMax)
			if digit < th {
				break
			}
			if w > pMaxInt/(pBase-th) {
				return 0, false
			}
			w *= pBase - th
		}
		size++
		bias = punyAdapt(i-oldi, size, oldi == 0)
		if i/size > pMaxInt-n {
			return 0, false
		}
		n += i / size
		i %= size
		if n > unicode.MaxRune || 0xd800 <= n && n <= 0xdfff || size > len(out) {
			return 0, false
		}
		copy(out[i+1:size], out[i:size-1])
		out[i] = rune(n)
		i++
	}
	return size, true
}

func punyDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c-'0') + 26
	case 'A' <= c && c <= 'Z':
		return int(c - 'A')
	case 'a' <= c && c <= 'z':
		return int(c - 'a')
	}
	return -1
}

func punyAdapt(delta, points int, first bool) int {
	if first {
		delta /= pDamp
	} else {
		delta /= 2
	}
	delta += delta / points
	k := 0
	for delta > (pBase-pTMin)*pTMax/2 {
		delta /= pBase - pTMin
		k += pBase
	}
	return k + (pBase-pTMin+1)*delta/(delta+pSkew)
}
