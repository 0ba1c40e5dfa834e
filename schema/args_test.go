package schema

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
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

// corpusArgs returns the arguments of every corpus call (sample and
// BFCL) that decodes, as emitted (spaced).
func corpusArgs(tb testing.TB) [][]byte {
	var raws [][]byte
	var d CallDecoder
	var c Call
	for _, p := range []string{"../testdata/corpus/sample/calls.jsonl", "../testdata/corpus/bfcl/calls.jsonl"} {
		data, err := os.ReadFile(p)
		if err != nil {
			tb.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if d.Decode(l, &c) == nil {
				raws = append(raws, bytes.Clone(c.Arguments.Raw()))
			}
		}
	}
	return raws
}

// BenchmarkArgsSummaryCorpus: the shape and hash of the arguments of
// every corpus call, per call.
func BenchmarkArgsSummaryCorpus(b *testing.B) {
	var tapes []*jsontape.Tape
	for _, raw := range corpusArgs(b) {
		tp := new(jsontape.Tape)
		if err := tp.Parse(raw); err != nil {
			b.Fatal(err)
		}
		tapes = append(tapes, tp)
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

// refShape is ArgsShape written plainly: the reference the summarizer's
// buffers, stack arrays and fast paths are compared with.
func refShape(v jsontape.Value, depth int) string {
	if depth > 32 {
		return `"…"`
	}
	switch v.Kind() {
	case jsontape.Object:
		type kv struct {
			k string
			v jsontape.Value
		}
		var kvs []kv
		for m := v.Members(); m.Next(); {
			kvs = append(kvs, kv{string(m.Name()), m.Value()})
		}
		sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
		var parts []string
		for _, e := range kvs {
			parts = append(parts, string(AppendString(nil, e.k))+":"+refShape(e.v, depth+1))
		}
		return "{" + strings.Join(parts, ",") + "}"
	case jsontape.Array:
		seen := map[string]bool{}
		var parts []string
		for it := v.Items(); it.Next(); {
			if sh := refShape(it.Value(), depth+1); !seen[sh] {
				seen[sh] = true
				parts = append(parts, sh)
			}
		}
		sort.Strings(parts)
		return "[" + strings.Join(parts, ",") + "]"
	case jsontape.String:
		return `"string"`
	case jsontape.Number:
		return `"number"`
	case jsontape.True, jsontape.False:
		return `"boolean"`
	}
	return `"null"`
}

// corpusArgsDigest is the SHA-256 of every corpus call's args_shape and
// args_hash, one line each, as the summarizer computed them at 15dd263:
// both are stored and compared across runs, so no change of the
// summarizer may move a byte of them.
const corpusArgsDigest = "ccbc2535ad6073b5542aa243889d59177f8900584ea26025c26fffbcc0284a4f"

// TestArgsSummaryCorpus: on every corpus call's arguments (and on
// objects of every size around the summarizer's small-object limit, with
// names that need escaping), the shape is the reference's and the hash
// the SHA-256 of encoding/json's compact text; and the whole corpus's
// shapes and hashes are those stored by earlier builds.
func TestArgsSummaryCorpus(t *testing.T) {
	raws := corpusArgs(t)
	if len(raws) < 3000 {
		t.Fatalf("%d corpus calls", len(raws))
	}
	all := sha256.New()
	var s ArgsSummarizer
	check := func(raw []byte, golden bool) string {
		t.Helper()
		v := parse(t, string(raw))
		sh, h := s.Shape(v), s.Hash(v)
		if want := refShape(v, 0); sh != want {
			t.Fatalf("shape of %s:\n got %s\nwant %s", raw, sh, want)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(compact.Bytes()); h != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Fatalf("hash of %s: %s", raw, h)
		}
		if golden {
			fmt.Fprintf(all, "%s\t%s\n", sh, h)
		}
		return h
	}
	var hashes []string
	for _, raw := range raws {
		hashes = append(hashes, check(raw, true))
	}
	// Hashes are cut from shared blocks: none changed as later ones were made.
	for i, raw := range raws {
		if h := ArgsHash(parse(t, string(raw))); hashes[i] != h {
			t.Fatalf("hash %d changed to %s, want %s", i, hashes[i], h)
		}
	}
	if got := hex.EncodeToString(all.Sum(nil)); got != corpusArgsDigest {
		t.Errorf("the corpus's shapes and hashes changed: digest %s, want %s", got, corpusArgsDigest)
	}
	names := []string{"b", "a", "é", "k\"q", "tab\t", "u\x1f", "\x7f", "a b", "A", "aa", "", "z", "y\\", "m", "\u2028"}
	for n := range len(names) + 1 {
		var b strings.Builder
		b.WriteString("{")
		for i, k := range names[:n] {
			if i > 0 {
				b.WriteString(", ")
			}
			js, _ := json.Marshal(k)
			fmt.Fprintf(&b, `%s: {"x%d": [%d, "s", {"b": null, "a": true}]}`, js, i%3, i)
		}
		b.WriteString("}")
		check([]byte(b.String()), false)
	}
}

// FuzzArgsSummary: for any JSON text the tape accepts, one summarizer
// kept across inputs gives the reference's shape (refShape) and the
// SHA-256 of encoding/json's compact text, as TestArgsSummaryCorpus
// checks on the corpus: names with bytes to escape, any nesting, any
// layout.
func FuzzArgsSummary(f *testing.F) {
	for _, raw := range corpusArgs(f)[:200] {
		f.Add(raw)
	}
	for _, s := range []string{`{"a\"b":1,"\u00e9t\u00e9":[1,"x",{"\\":null}]}`, `{"k\u0001":{}, "k": [ ] }`, "{\"\x7f\":true,\"caf\xc3\xa9\":false}", `[{"b":1,"a":2},{"a":3,"b":4}]`} {
		f.Add([]byte(s))
	}
	var s ArgsSummarizer
	var tp jsontape.Tape
	f.Fuzz(func(t *testing.T, raw []byte) {
		if tp.Parse(raw) != nil {
			return
		}
		v := tp.Root()
		if sh, want := s.Shape(v), refShape(v, 0); sh != want {
			t.Fatalf("shape of %q:\n got %s\nwant %s", raw, sh, want)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, raw); err != nil {
			t.Fatalf("the tape accepted %q, encoding/json did not: %v", raw, err)
		}
		if sum := sha256.Sum256(compact.Bytes()); s.Hash(v) != "sha256:"+hex.EncodeToString(sum[:]) {
			t.Fatalf("hash of %q: %s", raw, s.Hash(v))
		}
	})
}
