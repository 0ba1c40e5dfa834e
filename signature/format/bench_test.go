package format

import "testing"

// BenchmarkFormats: each checker on a typical valid value.
func BenchmarkFormats(b *testing.B) {
	for _, c := range []struct{ format, s string }{
		{"date-time", "2026-12-01T10:30:06.283185+01:00"},
		{"date", "2026-12-01"},
		{"time", "10:30:06Z"},
		{"email", "joe.bloggs@mail.example.com"},
		{"hostname", "api.xn--bcher-kva.example.com"},
		{"ipv4", "192.168.100.200"},
		{"ipv6", "2001:db8::ff00:42:8329"},
		{"uri", "https://user@example.com:8443/a/b/c.pdf?x=1&y=%20z#frag"},
		{"uri-reference", "../docs/webarena.pdf"},
		{"uuid", "2eb8aa08-aa98-11ea-b4aa-73b441d16380"},
		{"regex", `^[\w.+-]+@[\w-]+(\.[\w-]+)+$`},
	} {
		check, _ := Lookup(c.format)
		b.Run(c.format, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				if !check(c.s) {
					b.Fatal(c.s)
				}
			}
		})
	}
}
