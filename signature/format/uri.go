package format

import "strings"

// The character sets of RFC 3986's ABNF (§2.2, §2.3, §3.3 to §3.5); "%"
// followed by two hex digits is allowed wherever pct-encoded is.
const (
	unreserved = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~"
	subDelims  = "!$&'()*+,;="
)

var (
	regNameChars  = table(unreserved + subDelims)
	userinfoChars = table(unreserved + subDelims + ":")
	pathChars     = table(unreserved + subDelims + ":@/")  // pchar and "/"
	queryChars    = table(unreserved + subDelims + ":@/?") // query and fragment
	noColonChars  = table(unreserved + subDelims + "@")    // segment-nz-nc
	futureChars   = table(unreserved + subDelims + ":")    // IPvFuture after "."
	schemeChars   = table(unreserved[:62] + "+-.")         // after the first letter
)

// URI: RFC 3986 §3 URI, scheme ":" hier-part ["?" query] ["#" fragment]:
// an absolute reference ("webarena.pdf" is not one), ASCII only (an IRI
// is not a URI), hosts as §3.2.2 (IP-literal with an IPv6 address or
// IPvFuture, else a reg-name, which an IPv4 address also is), the port
// digits only.
func URI(s string) bool {
	c := scheme(s)
	return c > 0 && hierPart(s[c+1:], false)
}

// URIReference: RFC 3986 §4.1 URI-reference, a URI or a relative
// reference, whose first path segment holds no ":" (§4.2).
func URIReference(s string) bool {
	if c := scheme(s); c > 0 {
		return hierPart(s[c+1:], false)
	}
	return hierPart(s, true)
}

// scheme returns the index of the ":" that ends a scheme at the start of
// s, or -1.
func scheme(s string) int {
	if len(s) == 0 || !isAlpha(s[0]) {
		return -1
	}
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == ':':
			return i
		case !schemeChars[s[i]]:
			return -1
		}
	}
	return -1
}

// hierPart checks what follows the scheme's ":" (a relative reference:
// the whole of it): [ "//" authority ] path [ "?" query ] [ "#" fragment ].
func hierPart(s string, relative bool) bool {
	if h := strings.IndexByte(s, '#'); h >= 0 {
		if !chars(s[h+1:], queryChars) {
			return false
		}
		s = s[:h]
	}
	if q := strings.IndexByte(s, '?'); q >= 0 {
		if !chars(s[q+1:], queryChars) {
			return false
		}
		s = s[:q]
	}
	if strings.HasPrefix(s, "//") {
		s = s[2:]
		end := strings.IndexByte(s, '/')
		if end < 0 {
			end = len(s)
		}
		// path-abempty: nothing, or "/" and segments.
		return authority(s[:end]) && chars(s[end:], pathChars)
	}
	if relative {
		// path-noscheme: a first segment without ":", which would read
		// as a scheme.
		first := s
		if i := strings.IndexByte(s, '/'); i >= 0 {
			first = s[:i]
		}
		if !chars(first, noColonChars) {
			return false
		}
	}
	// path-absolute, path-rootless, path-noscheme or path-empty: with no
	// authority a path cannot start "//", which the branch above took.
	return chars(s, pathChars)
}

// authority: [ userinfo "@" ] host [ ":" port ].
func authority(a string) bool {
	if at := strings.IndexByte(a, '@'); at >= 0 {
		if !chars(a[:at], userinfoChars) {
			return false
		}
		a = a[at+1:]
	}
	port := ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 || !ipLiteral(a[1:end]) {
			return false
		}
		if a = a[end+1:]; a != "" {
			if a[0] != ':' {
				return false
			}
			port = a[1:]
		}
	} else {
		host := a
		if c := strings.IndexByte(a, ':'); c >= 0 {
			host, port = a[:c], a[c+1:]
		}
		if !chars(host, regNameChars) {
			return false
		}
	}
	for i := 0; i < len(port); i++ {
		if !isDigit(port[i]) {
			return false
		}
	}
	return true
}

// ipLiteral: IPv6address / IPvFuture ("v" 1*HEXDIG "." 1*( unreserved /
// sub-delims / ":" )).
func ipLiteral(s string) bool {
	if len(s) > 0 && s[0]|0x20 == 'v' {
		dot := strings.IndexByte(s, '.')
		if dot < 2 || dot == len(s)-1 {
			return false
		}
		for i := 1; i < dot; i++ {
			if !isHex(s[i]) {
				return false
			}
		}
		return chars(s[dot+1:], futureChars)
	}
	return IPv6(s)
}

// chars reports whether s is made of the set's bytes and pct-encoded
// octets.
func chars(s string, set *[256]bool) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
				return false
			}
			i += 2
			continue
		}
		if !set[s[i]] {
			return false
		}
	}
	return true
}
