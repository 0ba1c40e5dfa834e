package format

import (
	"net/netip"
	"strings"
)

// IPv4: RFC 2673 §3.2 dotted-quad, four decimals 0-255 of ASCII digits
// without leading zeros (an "010" is octal to some parsers, decimal to
// others).
func IPv4(s string) bool {
	for i, parts := 0, 0; ; {
		j, v := i, 0
		for j < len(s) && j-i < 3 && isDigit(s[j]) {
			v = v*10 + int(s[j]-'0')
			j++
		}
		if j == i || v > 255 || j-i > 1 && s[i] == '0' {
			return false
		}
		if parts++; parts == 4 {
			return j == len(s)
		}
		if j >= len(s) || s[j] != '.' {
			return false
		}
		i = j + 1
	}
}

// IPv6: RFC 4291 §2.2 text forms, "::" compression and a trailing dotted
// IPv4 included; no zone ("%eth0"), prefix length or brackets.
func IPv6(s string) bool {
	if strings.IndexByte(s, ':') < 0 || strings.IndexByte(s, '%') >= 0 {
		return false
	}
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6()
}
