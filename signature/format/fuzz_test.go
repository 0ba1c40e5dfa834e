package format

import (
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"
)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// FuzzFormats: no checker panics on any input, and where the standard
// library has a strict second reading of a format, both agree: an IPv4
// address is valid exactly when netip reads it and writes it back the
// same (no leading zeros), a date exactly when time.Parse reads it, a
// UUID exactly when the plain expression of its form matches.
func FuzzFormats(f *testing.F) {
	for _, c := range formatCases {
		for _, s := range append(c.valid, c.wrong...) {
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, n := range Names() {
			check, _ := Lookup(n)
			check(s)
		}
		a, err := netip.ParseAddr(s)
		if want := err == nil && a.Is4() && a.String() == s; IPv4(s) != want {
			t.Errorf("IPv4(%q) = %v, netip says %v", s, !want, want)
		}
		_, err = time.Parse("2006-01-02", s)
		if want := err == nil; Date(s) != want {
			t.Errorf("Date(%q) = %v, time.Parse says %v", s, !want, want)
		}
		if want := uuidRE.MatchString(s); UUID(s) != want {
			t.Errorf("UUID(%q) = %v, want %v", s, !want, want)
		}
		if URI(s) && !URIReference(s) {
			t.Errorf("%q: a URI but not a URI reference", s)
		}
		if DateTime(s) && !(Date(s[:10]) && Time(s[11:])) {
			t.Errorf("%q: a date-time of no date and time", s)
		}
		if Hostname(s) && (len(s) > 254 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != "") {
			t.Errorf("%q: a hostname", s)
		}
		if Email(s) && (len(s) > 254 || !strings.Contains(s, "@")) {
			t.Errorf("%q: an email address", s)
		}
	})
}
