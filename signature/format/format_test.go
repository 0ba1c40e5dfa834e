package format

import (
	"strings"
	"testing"
)

// The cases are written from the RFCs each checker cites (and, where the
// RFC leaves a choice, from what JSON Schema's test suite expects: leap
// seconds, IPv4 leading zeros, "webarena.pdf" not a uri).
var formatCases = []struct {
	format       string
	valid, wrong []string
}{
	{"date", []string{
		"1963-06-19", "2020-01-31", "2021-02-28", "2020-02-29", "2000-02-29",
		"2021-04-30", "0000-01-01", "9999-12-31",
	}, []string{
		"", "2020-01-32", "2021-02-29", "1900-02-29", "2021-04-31", "2021-06-31",
		"2021-09-31", "2021-11-31", "2021-00-10", "2021-13-10", "2021-01-00",
		"1998-1-20", "1998-01-2", "98-01-20", "2013-350", "2013-W01", "20130101",
		"2020-01-01T", "1963-06-1\u09ea", "2020/01/01", " 2020-01-01", "2020-01-01 ",
	}},
	{"time", []string{
		"08:30:06Z", "08:30:06z", "08:30:06.283185Z", "08:30:06+01:00", "08:30:06-08:00",
		"00:00:00-00:00", "23:59:59+23:59", "23:59:60Z", "23:59:60+00:00",
		"01:29:60+01:30", "15:59:60-08:00", "00:29:60-23:30", "23:29:60+23:30",
		"12:00:00.5Z",
	}, []string{
		"", "08:30:06", "12:00:00.52", "24:00:00Z", "23:60:00Z", "23:59:61Z",
		"22:59:60Z", "23:58:60Z", "23:59:60+01:00", "23:59:60-00:01", "01:02:03+24:00",
		"01:02:03+00:60", "08:30:06 PST", "08:30:06#00:00", "01:01:01,1111Z",
		"08:30:06.Z", "8:30:06Z", "08:3:06Z", "08:30:6Z", "ab:cd:efZ",
		"1\u09e8:00:00Z", "08:30:06+0100", "08:30:06+01", "08:30:06ZZ", "08:30:06+01:00Z",
		"08:30:06+01:00 ",
	}},
	{"date-time", []string{
		"1963-06-19T08:30:06.283185Z", "1963-06-19T08:30:06Z", "1963-06-19t08:30:06.283185z",
		"1937-01-01T12:00:27.87+00:20", "1990-12-31T15:59:50.123-08:00",
		"1998-12-31T23:59:60Z", "1998-12-31T15:59:60.123-08:00", "2020-02-29T00:00:00Z",
	}, []string{
		"", "1998-12-31T23:59:61Z", "1998-12-31T23:58:60Z", "1998-12-31T22:59:60Z",
		"1990-02-31T15:59:59.123-08:00", "1990-12-31T15:59:59-24:00",
		"1963-06-19 08:30:06Z", "1963-06-19T08:30:06", "06/19/1963 08:30:06 PST",
		"2013-350T01:01:01", "1963-06-1\u09eaT00:00:00Z", "1963-06-11T0\u09ea:00:00Z",
		"1963-06-19T", "1963-06-19T08:30:06+01:00:00",
	}},
	{"uuid", []string{
		"2EB8AA08-AA98-11EA-B4AA-73B441D16380", "2eb8aa08-aa98-11ea-b4aa-73b441d16380",
		"2eb8aa08-AA98-11ea-B4Aa-73B441D16380", "00000000-0000-0000-0000-000000000000",
		"98d80576-482e-427f-8434-7f86890ab222", "99c17cbb-656f-564a-940f-1a4568f03487",
		"99c17cbb-656f-664a-940f-1a4568f03487", "99c17cbb-656f-f64a-940f-1a4568f03487",
	}, []string{
		"", "2eb8aa08-aa98-11ea-b4aa-73b441d1638", "2eb8aa08-aa98-11ea-73b441d16380",
		"2eb8aa08-aa98-11ea-b4ga-73b441d16380", "2eb8aa08aa9811eab4aa73b441d16380",
		"2eb8aa08aa98-11ea-b4aa73b441d16380", "2eb8-aa08-aa98-11ea-b4aa73b44-1d16380",
		"2eb8aa08aa9811eab4aa73b441d16380----", "{2eb8aa08-aa98-11ea-b4aa-73b441d16380}",
		"urn:uuid:2eb8aa08-aa98-11ea-b4aa-73b441d16380",
	}},
	{"ipv4", []string{
		"192.168.0.1", "0.0.0.0", "255.255.255.255", "87.10.0.1", "1.2.3.4",
	}, []string{
		"", "127.0.0.0.1", "256.256.256.256", "127.0", "127.0.0", "0x7f000001",
		"2130706433", "087.10.0.1", "87.10.0.01", "00.0.0.0", "1\u09e87.0.0.1",
		"192.168.1.0/24", " 1.2.3.4", "1.2.3.4 ", "1.2.3.", ".1.2.3", "1..2.3",
		"1.2.3.1000", "::ffff:1.2.3.4",
	}},
	{"ipv6", []string{
		"::1", "::", "::abef", "::42:ff:1", "d6::", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7::",
		"::2:3:4:5:6:7:8", "1::d6:192.168.0.1", "1:2::192.168.0.1", "::ffff:192.168.0.1",
		"1000:1000:1000:1000:1000:1000:255.255.255.255", "2001:0db8:0000:0000:0000:ff00:0042:8329",
		"FE80::A", "fe80::a",
	}, []string{
		"", "12345::", "::laptop", ":2:3:4:5:6:7:8", "1:2:3:4:5:6:7:", ":2:3:4::8",
		"1::d6::42", "1::2:192.168.256.1", "1::2:192.168.ff.1", "1:2:3:4:5:::8",
		"1:2:3:4:5:6:7", "1:2:3:4:5:6:7:8:9", "1", "127.0.0.1", "1:2:3:4:1.2.3",
		"  ::1", "::1  ", "fe80::/64", "fe80::a%eth1", "[::1]",
		"100:100:100:100:100:100:255.255.255.255.255",
		"100:100:100:100:100:100:100:255.255.255.255", "1:2:3:4:5:6:7:\u09ea",
		"1:2::192.16\u09ea.0.1", "::ffff:192.168.0.01", "1:2:3:4:5:6:7:88888",
	}},
	{"hostname", []string{
		"www.example.com", "hostname", "host-name", "h0stn4me", "1host", "hostnam3",
		"example.com.", "xn--4gbwdl.xn--wgbh1c", "xn--ll-0ea", "xn--bung-zra", "xn--w6j", "xn--zca", // l·l übung 〇 ß
		"xn--bcher-kva.example", "XN--BCHER-KVA.example",
		strings.Repeat("a", 63) + ".com",
		strings.Repeat(strings.Repeat("a", 62)+".", 4) + "a", // 253
	}, []string{
		"", ".", "..", ".example", "example..com", "-a-host-name-that-starts-with--",
		"not_a_valid_host_name", "hostname-", "-hostname", "_hostname", "hostname_",
		"host name", "example\uff0ecom", "\u00e9xample.com", strings.Repeat("a", 64) + ".com",
		strings.Repeat(strings.Repeat("a", 62)+".", 4) + "ab", // 254
		"xn--X", "xn--", "xn---abc", "XN--aa---o47jg78q", "xn--ls8h-", "example.com..",
		"xn--abc", "xn--ls8h", "xn--bung-fna", // C1 controls, an emoji, "Übung": no IDNA2008 letters
		"xn--ab-hvd", // "a", U+0640 ARABIC TATWEEL (RFC 5892 §2.6: DISALLOWED), "b"
	}},
	{"email", []string{
		"joe.bloggs@example.com", "te~st@example.com", "~test@example.com", "test~@example.com",
		"\"joe bloggs\"@example.com", "\"joe..bloggs\"@example.com", "\"joe@bloggs\"@example.com",
		"\"joe\\\"bloggs\"@example.com", "te.s.t@example.com", "joe.bloggs@[127.0.0.1]",
		"joe.bloggs@[IPv6:::1]", "a@localhost", "!#$%&'*+-/=?^_`{|}~@example.com",
		strings.Repeat("a", 64) + "@example.com",
	}, []string{
		"", "2962", "@example.com", "joe@", ".test@example.com", "test.@example.com",
		"te..st@example.com", "joe.bloggs@invalid=domain.com", "joe.bloggs@[127.0.0.300]",
		"joe.bloggs@[::1]", "joe.bloggs@[IPv6:1.2.3.4]", "joe.bloggs@[tag:text]",
		"joe bloggs@example.com", "joe@bloggs@example.com", "\"joe\"bloggs@example.com",
		"\"joe@example.com", "j\u00f6e@example.com", "joe@ex\u00e4mple.com", "joe@example.com.",
		"joe@-example.com", "(comment)joe@example.com", strings.Repeat("a", 65) + "@example.com",
		"joe@" + strings.Repeat(strings.Repeat("a", 62)+".", 4) + "com",
	}},
	{"uri", []string{
		"http://foo.bar/?baz=qux#quux", "http://foo.com/blah_(wikipedia)_blah#cite-1",
		"http://foo.bar/?q=Test%20URL-encoded%20stuff", "http://xn--nw2a.xn--j6w193g/",
		"http://-.~_!$&'()*+,;=:%40:80%2f::::::@example.com", "http://223.255.255.254",
		"ftp://ftp.is.co.za/rfc/rfc1808.txt", "ldap://[2001:db8::7]/c=GB?objectClass?one",
		"mailto:John.Doe@example.com", "news:comp.infosystems.www.servers.unix",
		"tel:+1-816-555-1212", "urn:oasis:names:specification:docbook:dtd:xml:4.1.2",
		"file:///etc/hosts", "http://a:/", "http://[v1.fe80::a+en1]/", "a+b-c.d:",
		"foo://example.com:8042/over/there?name=ferret#nose", "urn:example:animal:ferret:nose",
		"http://example.com/#a?b/c", "http://user@[::1]:8080",
	}, []string{
		"", "webarena.pdf", "//foo.bar/?baz=qux#quux", "/abc", "abc", "\\\\WINDOWS\\fileshare",
		"http:// shouldfail.com", ":// should fail", "bar,baz:foo", "https://[@example.org/test.txt",
		"https://example.org/foobar\\.txt", "1http://example.com", "http://example.com/%",
		"http://example.com/%2", "http://example.com/%zz", "http://ex ample.com",
		"http://example.com/\u00e9", "http://example.com#a#b", "http://[::1", "http://[::1]x",
		"http://[fe80::a%25en1]/", "http://[v.x]/", "http://[vz.x]/", "http://a:80a/",
		"http://a@b@c/", "http://<a>/", "http://a/\"b\"", "http://a/b{c}",
	}},
	{"uri-reference", []string{
		"http://foo.bar/?baz=qux#quux", "//foo.bar/?baz=qux#quux", "/abc", "abc", "#fragment",
		"#", "", "?q", "a/b:c", "./a:b", "../x", "g;x=1/../y", "//[::1]:80",
	}, []string{
		"\\\\WINDOWS\\fileshare", "#frag\\ment", "1a:b", "a b:c", "foo bar", "%",
		"http://a/\u00e9", "//a b/", "#a#b",
	}},
	{"regex", []string{
		"([abc])+\\s+$", "^a(?=b)", "(a)\\1", "\\p{Letter}", "[\\w-.]", "a{",
	}, []string{
		"^(abc]", "\\Z", "(?i)a", "a**", "[z-a]", "\\p{letter}", "(?P<n>a)",
	}},
}

func TestFormats(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range formatCases {
		check, ok := Lookup(c.format)
		if !ok || !Known(c.format) {
			t.Fatalf("%s: not known", c.format)
		}
		seen[c.format] = true
		for _, s := range c.valid {
			if !check(s) {
				t.Errorf("%s: %+q is valid", c.format, s)
			}
		}
		for _, s := range c.wrong {
			if check(s) {
				t.Errorf("%s: %+q is not valid", c.format, s)
			}
		}
	}
	for _, n := range Names() {
		if !seen[n] {
			t.Errorf("%s: no cases", n)
		}
	}
	for _, n := range []string{"idn-email", "iri", "duration", "json-pointer", "Date", "uri "} {
		if Known(n) {
			t.Errorf("%s: known", n)
		}
	}
}

// TestPunycode: RFC 3492 §7.1's samples (A), (B) and (L), and the ones
// of the hostname cases, decode to the text node's url.domainToUnicode
// gives for them.
func TestPunycode(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"egbpdaj6bu4bxfgehfvwxn", "ليهمابتكلموشعربي؟"},
		{"ihqwcrb4cv8a8dqg056pqjye", "他们为什么不说中文"},
		{"3B-ww4c5e180e575a65lsy2b", "3年B組金八先生"},
		{"4gbwdl", "علوم"},
		{"bcher-kva", "bücher"},
		{"aa---o47jg78q", "aa--點看"},
	} {
		var out [63]rune
		n, ok := punyDecode(c.in, &out)
		if got := string(out[:n]); !ok || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.in, got, ok, c.want)
		}
	}
	for _, in := range []string{"X", "-abc", "abc-\u00e9", "99999999999", strings.Repeat("a", 64) + "-"} {
		var out [63]rune
		if n, ok := punyDecode(in, &out); ok {
			t.Errorf("%q decodes to %q", in, string(out[:n]))
		}
	}
}

// TestNoAllocs: a valid value costs no allocation (regex aside: its
// check translates the pattern).
func TestNoAllocs(t *testing.T) {
	for _, c := range formatCases {
		if c.format == "regex" {
			continue
		}
		check, _ := Lookup(c.format)
		for _, s := range c.valid {
			if n := testing.AllocsPerRun(10, func() { check(s) }); n != 0 {
				t.Errorf("%s %q: %v allocations", c.format, s, n)
			}
		}
	}
}
