package schema

import (
	"testing"
	"unsafe"

	"github.com/valyala/fastjson"
)

func TestArgsShape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"q":"x","n":[1,2]}`, `{"n":["number"],"q":"string"}`},
		{`{}`, `{}`},
		{`{"b":true,"a":null,"c":false}`, `{"a":"null","b":"boolean","c":"boolean"}`},
		{`{"z":{"y":1,"x":{"w":"s","v":[]}},"a":[{"k":1},{"k":"s"},{"k":2}]}`,
			`{"a":[{"k":"number"},{"k":"string"}],"z":{"x":{"v":[],"w":"string"},"y":"number"}}`},
		{`{"k\"ey":1,"\u00fc":2}`, `{"k\"ey":"number","ü":"number"}`},
		{`[1,"a",1,null]`, `["null","number","string"]`},
		{`"s"`, `"string"`},
	} {
		v := fastjson.MustParse(tc.in)
		if got := ArgsShape(v); got != tc.want {
			t.Errorf("ArgsShape(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestArgsSummarizer: reused buffers give the same results as fresh ones,
// one string per distinct shape, and a hash that is the SHA-256 of the
// compact JSON whatever the whitespace.
func TestArgsSummarizer(t *testing.T) {
	var s ArgsSummarizer
	a := s.Shape(fastjson.MustParse(`{"q": "x", "n": [1, 2]}`))
	_ = s.Shape(fastjson.MustParse(`{"other":{"deep":[{"x":1}]}}`))
	b := s.Shape(fastjson.MustParse(`{"n":[3],"q":"y"}`))
	if a != `{"n":["number"],"q":"string"}` || a != b {
		t.Fatalf("shapes %s / %s", a, b)
	}
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("the same shape twice made two strings")
	}
	for _, tc := range []struct{ in, want string }{
		{`{"q":"x","n":[1,2]}`, "sha256:e062768ffead304e3399ff34a5fb5529f98e811f86a8b5faebc1090ec7900b58"},
		{"{ \"q\" : \"x\" ,\n \"n\" : [ 1 , 2 ] }", "sha256:e062768ffead304e3399ff34a5fb5529f98e811f86a8b5faebc1090ec7900b58"},
		{`{}`, "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	} {
		if got := s.Hash(fastjson.MustParse(tc.in)); got != tc.want {
			t.Errorf("Hash(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := ArgsHash(fastjson.MustParse(tc.in)); got != tc.want {
			t.Errorf("ArgsHash(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	h1 := s.Hash(fastjson.MustParse(`{"a":1}`))
	_ = s.Hash(fastjson.MustParse(`{"b":2}`))
	if h1 != ArgsHash(fastjson.MustParse(`{"a":1}`)) {
		t.Error("a hash changed when the summarizer was used again")
	}
}

func BenchmarkArgsSummary(b *testing.B) {
	v := fastjson.MustParse(`{"location":"Boston, MA","unit":"celsius","days":[1,2,3],"options":{"detail":true,"lang":"en"}}`)
	b.Run("functions", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ArgsShape(v), ArgsHash(v)
		}
	})
	b.Run("summarizer", func(b *testing.B) {
		b.ReportAllocs()
		var s ArgsSummarizer
		for b.Loop() {
			_, _ = s.Shape(v), s.Hash(v)
		}
	})
}
