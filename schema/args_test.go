package schema

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/toolaudit/toolaudit/jsontape"
)

func parse(t testing.TB, s string) jsontape.Value {
	t.Helper()
	var tp jsontape.Tape
	if err := tp.Parse([]byte(s)); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return tp.Root()
}

func TestArgsShape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"q":"x","n":[1,2]}`, `{"n":["number"],"q":"string"}`},
		{`{}`, `{}`},
		{`{"b":true,"a":null,"c":false}`, `{"a":"null","b":"boolean","c":"boolean"}`},
		{`{"z":{"y":1,"x":{"w":"s","v":[]}},"a":[{"k":1},{"k":"s"},{"k":2}]}`,
			`{"a":[{"k":"number"},{"k":"string"}],"z":{"x":{"v":[],"w":"string"},"y":"number"}}`},
		{`{"k\"ey":1,"\u00fc":2}`, `{"k\"ey":"number","ü":"number"}`},
		{`[1,"a",1,null]`, `["null","number","string"]`},
		{`[[1,"a"],["b",2],[true]]`, `[["boolean"],["number","string"]]`},
		{`[{"a":1},{"b":1},{"c":1},{"d":1},{"e":1},{"f":1},{"g":1},{"h":1},{"i":1},{"a":2},{"j":[]}]`,
			`[{"a":"number"},{"b":"number"},{"c":"number"},{"d":"number"},{"e":"number"},{"f":"number"},{"g":"number"},{"h":"number"},{"i":"number"},{"j":[]}]`},
		{`"s"`, `"string"`},
		{`{"abc":1,"a":2,"ab":3,"":4}`, `{"":"number","a":"number","ab":"number","abc":"number"}`},
		// More members than the insertion sort takes, objects nested in
		// them sorting their own members meanwhile.
		{`{"m":1,"l":{"z":1,"y":{"b":1,"a":2}},"k":1,"j":1,"i":1,"h":1,"g":1,"f":1,"e":1,"d":1,"c":1,"b":1,"a":[{"q":1,"p":2}]}`,
			`{"a":[{"p":"number","q":"number"}],"b":"number","c":"number","d":"number","e":"number","f":"number","g":"number","h":"number","i":"number","j":"number","k":"number","l":{"y":{"a":"number","b":"number"},"z":"number"},"m":"number"}`},
	} {
		if got := ArgsShape(parse(t, tc.in)); got != tc.want {
			t.Errorf("ArgsShape(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestArgsSummarizer: reused buffers give the same results as fresh ones,
// one string per distinct shape, and a hash that is the SHA-256 of the
// compact JSON whatever the whitespace.
func TestArgsSummarizer(t *testing.T) {
	var s ArgsSummarizer
	a := s.Shape(parse(t, `{"q": "x", "n": [1, 2]}`))
	_ = s.Shape(parse(t, `{"other":{"deep":[{"x":1}]}}`))
	b := s.Shape(parse(t, `{"n":[3],"q":"y"}`))
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
		if got := s.Hash(parse(t, tc.in)); got != tc.want {
			t.Errorf("Hash(%q) = %s, want %s", tc.in, got, tc.want)
		}
		if got := ArgsHash(parse(t, tc.in)); got != tc.want {
			t.Errorf("ArgsHash(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	h1 := s.Hash(parse(t, `{"a":1}`))
	_ = s.Hash(parse(t, `{"b":2}`))
	if h1 != ArgsHash(parse(t, `{"a":1}`)) {
		t.Error("a hash changed when the summarizer was used again")
	}
}

// TestArgsShapeLinear: an array of many distinct item shapes and an
// object of many keys are described in linear time, and a huge shape is
// not remembered.
func TestArgsShapeLinear(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range 50000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"k%d":1}`, i)
	}
	b.WriteString("]")
	var s ArgsSummarizer
	sh := s.Shape(parse(t, b.String()))
	if strings.Count(sh, `"number"`) != 50000 || len(s.shapes) != 0 {
		t.Fatalf("shape of %d bytes, %d remembered", len(sh), len(s.shapes))
	}
}

// TestArgsKeyedHash: with a key, the hash is the HMAC-SHA-256 of the
// compact JSON, prefixed with the key's id; another key gives another id
// and another digest; the secret shows nowhere.
func TestArgsKeyedHash(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	k, err := NewArgsKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	s := NewArgsSummarizer(k)
	got := s.Hash(parse(t, `{ "a" : "hunter2" }`))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(`{"a":"hunter2"}`))
	want := "hmac-sha256:" + k.ID() + ":" + hex.EncodeToString(m.Sum(nil))
	if got != want || len(k.ID()) != 8 {
		t.Fatalf("keyed hash %s, want %s", got, want)
	}
	if got == ArgsHash(parse(t, `{"a":"hunter2"}`)) || strings.Contains(got, "sha256:"+ArgsHash(parse(t, `{"a":"hunter2"}`))[7:]) {
		t.Fatal("the keyed hash is the plain one")
	}
	k2, _ := NewArgsKey([]byte("another key, also 32 bytes long!"))
	s2 := NewArgsSummarizer(k2)
	if h2 := s2.Hash(parse(t, `{"a":"hunter2"}`)); k2.ID() == k.ID() || h2[len(h2)-64:] == got[len(got)-64:] {
		t.Fatalf("two keys, same id or digest: %s %s", got, h2)
	}
	if again := s.Hash(parse(t, `{"a":"hunter2"}`)); again != got {
		t.Fatal("the keyed hash is not stable")
	}
	for _, shown := range []string{fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k)} {
		if strings.Contains(shown, string(secret)) || strings.Contains(shown, "0123") {
			t.Fatalf("the key shows its secret: %s", shown)
		}
	}
	if _, err := NewArgsKey([]byte("short")); err == nil {
		t.Fatal("a 5-byte key accepted")
	}
}

// BenchmarkArgsSummaryCorpus: the shape and hash of the arguments of
// every corpus call (sample and BFCL), as emitted (spaced), per call.
func BenchmarkArgsSummaryCorpus(b *testing.B) {
	var tapes []*jsontape.Tape
	var d CallDecoder
	var c Call
	for _, p := range []string{"../testdata/corpus/sample/calls.jsonl", "../testdata/corpus/bfcl/calls.jsonl"} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if d.Decode(l, &c) != nil {
				continue
			}
			tp := new(jsontape.Tape)
			if err := tp.Parse(bytes.Clone(c.Arguments.Raw())); err != nil {
				b.Fatal(err)
			}
			tapes = append(tapes, tp)
		}
	}
	var s ArgsSummarizer
	b.ReportAllocs()
	for b.Loop() {
		for _, tp := range tapes {
			_, _ = s.Shape(tp.Root()), s.Hash(tp.Root())
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(tapes)), "ns/call")
}

func BenchmarkArgsSummary(b *testing.B) {
	v := parse(b, `{"location":"Boston, MA","unit":"celsius","days":[1,2,3],"options":{"detail":true,"lang":"en"}}`)
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
	b.Run("keyed", func(b *testing.B) {
		b.ReportAllocs()
		k, _ := NewArgsKey([]byte("0123456789abcdef0123456789abcdef"))
		s := NewArgsSummarizer(k)
		for b.Loop() {
			_, _ = s.Shape(v), s.Hash(v)
		}
	})
}
