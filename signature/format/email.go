package format

import "strings"

// Email: RFC 5321 §4.1.2 Mailbox, ASCII only: a Dot-string of atext atoms
// or a Quoted-string as the local part (at most 64 octets, §4.5.3.1.1),
// "@", and a Domain (hostname rules without the trailing dot, at most 255
// octets) or an address literal of an IPv4 address or "IPv6:" and an
// IPv6 address; at most 254 octets in all (§4.5.3.1.3's path of 256 less
// its brackets). General address literals (a registered tag and text)
// are refused: none is registered. RFC 5322's obsolete forms, comments
// and folding white space are not a Mailbox.
func Email(s string) bool {
	if len(s) > 254 {
		return false
	}
	i := localPart(s)
	if i <= 0 || i > 64 || i >= len(s) || s[i] != '@' {
		return false
	}
	d := s[i+1:]
	if len(d) > 0 && d[0] == '[' {
		return addressLiteral(d)
	}
	return len(d) <= 255 && domain(d)
}

// localPart returns the length of the local part at the start of s, or
// -1 when there is none.
func localPart(s string) int {
	if len(s) > 0 && s[0] == '"' {
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '"':
				return i + 1
			case c == '\\':
				// quoted-pairSMTP: a backslash and any printable ASCII.
				if i+1 >= len(s) || s[i+1] < 32 || s[i+1] > 126 {
					return -1
				}
				i++
			case c < 32 || c > 126:
				// qtextSMTP is printable ASCII but '"' and '\'.
				return -1
			}
		}
		return -1
	}
	i := 0
	for ; i < len(s) && s[i] != '@'; i++ {
		if s[i] == '.' {
			if i == 0 || s[i-1] == '.' {
				return -1
			}
		} else if !atext[s[i]] {
			return -1
		}
	}
	if i == 0 || s[i-1] == '.' {
		return -1
	}
	return i
}

// atext: RFC 5321 §4.1.2 (RFC 5322 §3.2.3).
var atext = table("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-/=?^_`{|}~")

func addressLiteral(d string) bool {
	if len(d) < 2 || d[len(d)-1] != ']' {
		return false
	}
	a := d[1 : len(d)-1]
	// ABNF strings are case-insensitive: "IPv6:" or "ipv6:".
	if len(a) > 5 && strings.EqualFold(a[:5], "IPv6:") {
		return IPv6(a[5:])
	}
	return IPv4(a)
}

// table is the set of the bytes of s.
func table(s string) *[256]bool {
	var t [256]bool
	for i := 0; i < len(s); i++ {
		t[s[i]] = true
	}
	return &t
}
