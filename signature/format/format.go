package format

import (
	"errors"

	"github.com/toolaudit/toolaudit/signature/ecmare"
)

// Checker reports whether a string is valid for one format.
type Checker func(s string) bool

// Lookup returns the checker of a format by its JSON Schema name, and
// false for a name this package does not assert (the caller decides what
// an unknown format means: 2020-12 makes it an annotation).
func Lookup(name string) (Checker, bool) {
	switch name {
	case "date-time":
		return DateTime, true
	case "date":
		return Date, true
	case "time":
		return Time, true
	case "email":
		return Email, true
	case "hostname":
		return Hostname, true
	case "ipv4":
		return IPv4, true
	case "ipv6":
		return IPv6, true
	case "uri":
		return URI, true
	case "uri-reference":
		return URIReference, true
	case "uuid":
		return UUID, true
	case "regex":
		return Regex, true
	}
	return nil, false
}

// Known reports whether Lookup has a checker for the format.
func Known(name string) bool {
	_, ok := Lookup(name)
	return ok
}

// Names are the formats this package asserts, in Lookup's order.
func Names() []string {
	return []string{"date-time", "date", "time", "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference", "uuid", "regex"}
}

// Regex: a valid ECMA-262 regular expression as package ecmare reads one.
// A pattern RE2 cannot run (lookaround, backreferences: ecmare's
// Unsupported) is still valid: the format asks what the pattern is, not
// whether this checker could run it.
func Regex(s string) bool {
	_, err := ecmare.Translate(s)
	var e *ecmare.Error
	return err == nil || errors.As(err, &e) && e.Kind == ecmare.Unsupported
}

// UUID: RFC 9562 §4 (RFC 4122 §3) string form, 8-4-4-4-12 hexadecimal
// digits of either case; any version and variant.
func UUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
func isHex(c byte) bool   { return isDigit(c) || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }
