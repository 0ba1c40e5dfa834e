package jsontape

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// toAny converts v as encoding/json decodes into any, numbers as float64.
func toAny(v Value) any {
	switch v.Kind() {
	case Null:
		return nil
	case True:
		return true
	case False:
		return false
	case Number:
		return v.Float64()
	case String:
		return string(v.Str())
	case Array:
		out := []any{}
		for it := v.Items(); it.Next(); {
			out = append(out, toAny(it.Value()))
		}
		return out
	case Object:
		out := map[string]any{}
		for m := v.Members(); m.Next(); {
			out[string(m.Name())] = toAny(m.Value())
		}
		return out
	}
	panic("no value")
}

func mustParse(t testing.TB, s string) Value {
	t.Helper()
	var tp Tape
	if err := tp.Parse([]byte(s)); err != nil {
		t.Fatalf("Parse(%q): %v", s, err)
	}
	return tp.Root()
}

func TestParseValid(t *testing.T) {
	for _, s := range []string{
		`0`, `-0`, `1.5e+3`, `-12.25E-2`, `true`, `false`, `null`, `""`, `"x"`,
		`  {"a" : [1, 2, {"b":null}], "c":"d"}  `, "\t\n\r[]", `{}`, `[[[]]]`, `[{},{}]`,
		`"\"\\\/\b\f\n\r\t"`, `"\u00e9\u20ac\ud83d\ude00"`, `"é€😀"`, `{"a\u0062":1,"ab\u0000":2}`,
		`[123456789012345678901234567890, 0.1, -9007199254740993]`,
		`{"k\"ey":{"\u00fc":[true,false,null]}}`,
	} {
		var want any
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatalf("encoding/json rejects %q: %v", s, err)
		}
		v := mustParse(t, s)
		if got := toAny(v); !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %#v, want %#v", s, got, want)
		}
		if got := string(v.Raw()); got != strings.TrimSpace(s) {
			t.Errorf("Raw(%q) = %q", s, got)
		}
	}
}

// TestStringSpecialAtEveryOffset puts each kind of byte that ends the
// fast scan of a string (quote, escape, control character, UTF-8 lead,
// invalid byte) at every offset of the first two 8-byte words, after
// plain ASCII and after another special byte, and checks the verdict and
// the value against encoding/json: the scan jumps to the first flagged
// byte of a word, which must be the first special one.
func TestStringSpecialAtEveryOffset(t *testing.T) {
	specials := []string{`"`, `\n`, `\u00e9`, "\x01", "\x1f", "é", "€", "\xff", "\xc3"}
	var tp Tape
	for _, before := range []string{"", "\x1f", "é", `\t`} {
		for _, sp := range specials {
			for pos := 0; pos < 18; pos++ {
				in := []byte(`["` + strings.Repeat("a", pos) + before + sp + " ab" + `"]`)
				err := tp.Parse(in)
				valid := json.Valid(in) && utf8.Valid(in) // encoding/json replaces bad UTF-8
				if (err == nil) != valid {
					t.Fatalf("Parse(%q): err %v, valid JSON and UTF-8 %v", in, err, valid)
				}
				if err != nil {
					continue
				}
				var want any
				if err := json.Unmarshal(in, &want); err != nil {
					t.Fatal(err)
				}
				if got := toAny(tp.Root()); !reflect.DeepEqual(got, want) {
					t.Fatalf("Parse(%q) = %#v, encoding/json %#v", in, got, want)
				}
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	tests := []struct {
		in   string
		kind ErrorKind
		msg  string
	}{
		{``, ErrSyntax, "not valid JSON: unexpected end of input at byte 0"},
		{`  `, ErrSyntax, "not valid JSON: unexpected end of input at byte 2"},
		{`{"a":1,}`, ErrSyntax, "not valid JSON: expected a member name at byte 7"},
		{`[1,]`, ErrSyntax, "not valid JSON: unexpected character \"]\" at byte 3"},
		{`{"a" 1}`, ErrSyntax, "not valid JSON: expected ':' at byte 5"},
		{`{"a":1 "b":2}`, ErrSyntax, "not valid JSON: expected ',' or '}' at byte 7"},
		{`[1 2]`, ErrSyntax, "not valid JSON: expected ',' or ']' at byte 3"},
		{`{"a":NaN}`, ErrSyntax, "not valid JSON: unexpected character \"N\" at byte 5"},
		{`01`, ErrSyntax, "not valid JSON: data after the JSON value at byte 1"},
		{`1.`, ErrSyntax, "not valid JSON: invalid number at byte 0"},
		{`-`, ErrSyntax, "not valid JSON: invalid number at byte 0"},
		{`1e+`, ErrSyntax, "not valid JSON: invalid number at byte 0"},
		{`.5`, ErrSyntax, "not valid JSON: unexpected character \".\" at byte 0"},
		{`"\q"`, ErrSyntax, "not valid JSON: invalid escape at byte 1"},
		{`"\u00g9"`, ErrSyntax, "not valid JSON: invalid \\u escape at byte 1"},
		{"\"a\x01\"", ErrSyntax, "not valid JSON: control character in a string at byte 2"},
		{`"abc`, ErrSyntax, "not valid JSON: unexpected end of input in a string at byte 4"},
		{`nul`, ErrSyntax, "not valid JSON: invalid literal at byte 0"},
		{`true false`, ErrSyntax, "not valid JSON: data after the JSON value at byte 5"},
		{"\xef\xbb\xbf{}", ErrSyntax, "not valid JSON: unexpected character \"\\xef\" at byte 0"},
		{"\"\xff\"", ErrUTF8, "invalid UTF-8 at byte 1"},
		{`{"event_id":"` + "c\xfe" + `"}`, ErrUTF8, "invalid UTF-8 at byte 14"},
		{"\"ok \\n \xc0\xaf\"", ErrUTF8, "invalid UTF-8 at byte 7"},                          // overlong, after an escape
		{"\"\xed\xa0\x80\"", ErrUTF8, "invalid UTF-8 at byte 1"},                             // encoded surrogate
		{"\"" + strings.Repeat("a", 20) + "\xe2\x82\"", ErrUTF8, "invalid UTF-8 at byte 21"}, // truncated
		{deep, ErrDepth, "nesting deeper than 128 levels at byte 128"},
		{`{"a":1,"a":2}`, ErrRepeated, "repeated member name at /a"},
		{`{"a":1,"\u0061":2}`, ErrRepeated, "repeated member name at /a"},
		{`{"x":[0,{"q":{"a":1,"a~/b":1,"a~/b":2}}]}`, ErrRepeated, "repeated member name at /x/1/q/a~0~1b"},
		{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k5":10}`, ErrRepeated, "repeated member name at /k5"},
		{`{"\ud800":1,"\udc00":2}`, ErrRepeated, "repeated member name at /\ufffd"}, // both U+FFFD
	}
	for _, tt := range tests {
		var tp Tape
		err := tp.Parse([]byte(tt.in))
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Parse(%q) = %v, want an *Error", tt.in, err)
			continue
		}
		if e.Kind != tt.kind || e.Error() != tt.msg {
			t.Errorf("Parse(%q) = kind %d %q, want kind %d %q", tt.in, e.Kind, e.Error(), tt.kind, tt.msg)
		}
		if tp.Root().Exists() != (tt.kind == ErrRepeated) {
			t.Errorf("Parse(%q) failed: Root exists %v", tt.in, tp.Root().Exists())
		}
	}
}

// TestRepeatedKeepsTape: after a repeated name the parse goes on: a later
// syntax error wins, and a valid rest leaves the tape readable.
func TestRepeatedKeepsTape(t *testing.T) {
	var tp Tape
	err := tp.Parse([]byte(`{"id":"c","a":{"x":1,"x":2},"b":{"y":1,"y":2}}`))
	if e, ok := err.(*Error); !ok || e.Kind != ErrRepeated || e.Ptr != "/a/x" {
		t.Fatalf("err = %v", err)
	}
	if !tp.Root().Get("id").StrIs("c") || tp.Root().Len() != 3 {
		t.Fatal("the tape is not readable")
	}
	err = tp.Parse([]byte(`{"a":1,"a":2,"b":tru}`))
	if e, ok := err.(*Error); !ok || e.Kind != ErrSyntax || tp.Root().Exists() {
		t.Fatalf("err = %v", err)
	}
	if err := tp.Parse([]byte(`{"a":1}`)); err != nil {
		t.Fatalf("the next parse: %v", err)
	}
}

func TestDepthLimit(t *testing.T) {
	ok := strings.Repeat(`{"a":`, MaxDepth-1) + `[]` + strings.Repeat("}", MaxDepth-1)
	mustParse(t, ok)
	var tp Tape
	err := tp.Parse([]byte(`[` + ok + `]`))
	if err == nil || err.(*Error).Kind != ErrDepth || !strings.Contains(err.Error(), "nesting deeper than 128 levels") {
		t.Fatalf("one level deeper: %v", err)
	}
	if tp.Parse([]byte(strings.Repeat("[", 1<<20))).(*Error).Kind != ErrDepth {
		t.Fatal("a million open brackets")
	}
}

func TestSurrogates(t *testing.T) {
	for in, want := range map[string]string{
		`"\ud83d\ude00"`:  "😀",
		`"\ud83d"`:        "\ufffd",
		`"\ude00"`:        "\ufffd",
		`"\ud83dx"`:       "\ufffdx",
		`"\ud83d\u0041"`:  "\ufffdA",
		`"\ud83d\ud83d"`:  "\ufffd\ufffd",
		`"a\u0000b\/c"`:   "a\x00b/c",
		`"\u00e9t\u00e9"`: "été",
	} {
		if got := string(mustParse(t, in).Str()); got != want {
			t.Errorf("%s = %q, want %q", in, got, want)
		}
		var std string
		if err := json.Unmarshal([]byte(in), &std); err != nil || std != want {
			t.Errorf("encoding/json reads %s as %q", in, std)
		}
	}
}

func TestNavigation(t *testing.T) {
	v := mustParse(t, `{"a":{"b":[1,{"c":"d"},[]],"e":{}},"f":"g\n","h":2.50}`)
	if v.Kind() != Object || v.Len() != 3 {
		t.Fatalf("root %v %d", v.Kind(), v.Len())
	}
	var names []string
	for m := v.Members(); m.Next(); {
		names = append(names, string(m.Name()))
	}
	if strings.Join(names, ",") != "a,f,h" {
		t.Fatalf("members %v", names)
	}
	b := v.Get("a").Get("b")
	if b.Kind() != Array || b.Len() != 3 {
		t.Fatalf("b = %v", b.Kind())
	}
	var kinds []string
	for it := b.Items(); it.Next(); {
		kinds = append(kinds, it.Value().Kind().String())
	}
	if strings.Join(kinds, ",") != "number,object,array" {
		t.Fatalf("items %v", kinds)
	}
	if !v.Get("f").StrIs("g\n") || v.Get("h").Float64() != 2.5 || string(v.Get("h").Raw()) != "2.50" {
		t.Fatal("scalars")
	}
	if v.Get("zz").Exists() || v.Get("zz").Kind() != Invalid || !v.Get("zz").IsNull() || v.Get("f").Get("x").Exists() {
		t.Fatal("absent members")
	}
	if v.Get("f").Len() != 0 || v.Get("f").Float64() != 0 || v.Get("h").Str() != nil {
		t.Fatal("wrong-kind accessors")
	}
	if (Value{}).Kind() != Invalid || (Value{}).Raw() != nil {
		t.Fatal("zero value")
	}
}

func TestAppendCompact(t *testing.T) {
	for in, want := range map[string]string{
		"{ \"q\" : \"x y\" ,\n \"n\" : [ 1 , 2 ] }": `{"q":"x y","n":[1,2]}`,
		`{"s":"a \" b\\", "t" : "\u0020 "}`:         `{"s":"a \" b\\","t":"\u0020 "}`,
		` "  spaced  " `:                            `"  spaced  "`,
		`[ ]`:                                       `[]`,
		` 1.50 `:                                    `1.50`,
		`{"q":"x y","n":[1,2]}`:                     `{"q":"x y","n":[1,2]}`, // copied as is
	} {
		if got := string(mustParse(t, in).AppendCompact(nil)); got != want {
			t.Errorf("AppendCompact(%q) = %s, want %s", in, got, want)
		}
	}
	// A value without whitespace inside a text with some: the text's
	// whitespace decides, not the value's.
	if got := string(mustParse(t, `{"a":{"b" : 1}, "c":2}`).Get("a").AppendCompact(nil)); got != `{"b":1}` {
		t.Errorf("inner value: %s", got)
	}
	// A tape reused for a compact text after a spaced one copies it as is.
	var tp Tape
	for _, in := range []string{`{ "a" : 1 }`, `{"a":[1,2]}`} {
		if err := tp.Parse([]byte(in)); err != nil {
			t.Fatal(err)
		}
		if got := string(tp.Root().AppendCompact(nil)); strings.ContainsRune(got, ' ') {
			t.Errorf("reused tape: %s", got)
		}
	}
}

// TestAppendCompactStrings puts a quote, an escape or a multi-byte
// character at every offset of a string's first two words, in a spaced
// text, and checks AppendCompact against encoding/json.Compact: the scan
// of a string skips a word at a time to its first quote or backslash.
func TestAppendCompactStrings(t *testing.T) {
	var tp Tape
	for _, sp := range []string{`\"`, `\\`, `\u0022`, `\n`, "é", "€ ", ` `} {
		for pos := 0; pos < 18; pos++ {
			str := strings.Repeat("a", pos) + sp + " x\\\" y "
			in := []byte(`{ "k" : "` + str + `" , "n" : [ 1 , "` + str + `" ] , "e" : "" }`)
			if err := tp.Parse(in); err != nil {
				t.Fatalf("Parse(%s): %v", in, err)
			}
			var want bytes.Buffer
			if err := json.Compact(&want, in); err != nil {
				t.Fatal(err)
			}
			if got := tp.Root().AppendCompact(nil); !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("AppendCompact(%s) = %s, want %s", in, got, want.Bytes())
			}
		}
	}
}

func TestEqualAndHash(t *testing.T) {
	big := func(order []int) string {
		var b strings.Builder
		b.WriteString("{")
		for i, k := range order {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"k` + string(rune('a'+k)) + `":[` + string(rune('0'+k%10)) + `]`)
		}
		b.WriteString("}")
		return b.String()
	}
	tests := []struct {
		a, b string
		eq   bool
	}{
		{`1`, `1.0`, true},
		{`1`, `1e0`, true},
		{`-0`, `0`, true},
		{`1`, `"1"`, false},
		{`"a"`, `"\u0061"`, true},
		{`[1,2]`, `[2,1]`, false},
		{`[1,[2]]`, `[1.0,[2.0]]`, true},
		{`{"a":1,"b":2}`, `{"b":2,"a":1}`, true},
		{`{"a":1,"b":2}`, `{"a":1,"c":2}`, false},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`null`, `null`, true},
		{`true`, `false`, false},
		{`{}`, `[]`, false},
		{big([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), big([]int{11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}), true},
		{big([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}), big([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12}), false},
	}
	for _, tt := range tests {
		a, b := mustParse(t, tt.a), mustParse(t, tt.b)
		if Equal(a, b) != tt.eq || Equal(b, a) != tt.eq {
			t.Errorf("Equal(%s, %s) != %v", tt.a, tt.b, tt.eq)
		}
		if tt.eq && Hash(a) != Hash(b) {
			t.Errorf("equal %s and %s hash differently", tt.a, tt.b)
		}
		if !tt.eq && Hash(a) == Hash(b) {
			t.Errorf("%s and %s collide", tt.a, tt.b)
		}
	}
}

// TestParseReusesBuffers: once grown, parsing an event allocates nothing.
func TestParseReusesBuffers(t *testing.T) {
	line := []byte(`{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:05.250Z","registry":"fleet-a","tool":"create_issue","arguments":{"owner":"o\u00e9","repo":"r","labels":["a","b"],"n":3,"meta":{"x":null}},"visible":["create_issue"]}`)
	var tp Tape
	if n := testing.AllocsPerRun(100, func() {
		if err := tp.Parse(line); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("Parse allocates %.1f times per event", n)
	}
}

// TestMemoryBound: the tape of the worst shape, one value per two bytes,
// is 8 bytes per input byte, allocated once.
func TestMemoryBound(t *testing.T) {
	for _, shape := range []string{"[1,1]", "[{},{}]", `{"a":1,"b":2}`, `["","\n"]`} {
		in := adversarial(shape, 1<<20)
		var tp Tape
		if err := tp.Parse(in); err != nil {
			t.Fatalf("%s: %v", shape, err)
		}
		tape := cap(tp.ents) * int(16)
		if tape > 8*len(in)+64 || cap(tp.strs) > len(in) {
			t.Errorf("%s: tape %d bytes, strings %d for %d bytes of input", shape, tape, cap(tp.strs), len(in))
		}
		if n := testing.AllocsPerRun(3, func() { _ = tp.Parse(in) }); n != 0 {
			t.Errorf("%s: a second parse of the same size allocates %.0f times", shape, n)
		}
	}
}

func TestTooLarge(t *testing.T) {
	var tp Tape
	err := tp.Parse(make([]byte, MaxSize))
	if err == nil || err.(*Error).Kind != ErrTooLarge {
		t.Fatalf("err = %v", err)
	}
}

// adversarial repeats the inner part of shape (shape minus its brackets)
// until the text is about n bytes: "[1,1]" gives [1,1,1,...].
func adversarial(shape string, n int) []byte {
	open, close := shape[:1], shape[len(shape)-1:]
	inner := shape[1 : len(shape)-1]
	items := strings.Split(inner, ",")
	var b bytes.Buffer
	b.WriteString(open)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		item := items[i%len(items)]
		if strings.HasPrefix(item, `"`) && strings.Contains(item, `":`) { // an object member: unique names
			item = `"k` + itoa(i) + `":` + strings.SplitN(item, ":", 2)[1]
		}
		b.WriteString(item)
	}
	b.WriteString(close)
	return b.Bytes()
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// FuzzParse: Parse accepts exactly what encoding/json.Valid accepts, except
// invalid UTF-8 (rejected here) and repeated names (rejected here, with the
// repeat found by encoding/json's decoder too); accepted text reads as
// encoding/json reads it.
func FuzzParse(f *testing.F) {
	for _, s := range []string{``, ` `, `0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-2`, `-`, `"\u00e9"`, `"\u00g9"`, `"\q"`, "\"\x01\"",
		`[1,]`, `{"a":1,}`, `{"a" 1}`, `[[[]]]`, `nul`, `true false`, `"\/"`, "\"\xff\"", `{"a":NaN}`, `{"a":1,"a":2}`,
		`{"a":{"b":[1,{"c":2,"\u0063":3}]}}`, `"\ud800\udc00"`, `"\ud800"`, "\"\xed\xa0\x80\"", `[1e400]`,
		`{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"axb":9,"ayb":0}`, `{"prefix__x":1,"prefix__y":2}`, `{"prefix__x":1,"prefix__x":2}`, `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"\u0061":0}`} {
		f.Add([]byte(s))
	}
	for _, p := range []string{"../testdata/corpus/sample/calls.jsonl", "../testdata/corpus/sample/listings.jsonl"} {
		b, err := os.ReadFile(filepath.FromSlash(p))
		if err != nil {
			f.Fatal(err)
		}
		for i, l := range bytes.Split(b, []byte("\n")) {
			if i < 20 {
				f.Add(l)
			}
		}
	}
	var tp Tape
	f.Fuzz(func(t *testing.T, b []byte) {
		err := tp.Parse(b)
		valid := json.Valid(b)
		if err == nil {
			if !valid {
				t.Fatalf("Parse accepts %q, encoding/json.Valid does not", b)
			}
			if !utf8.Valid(b) {
				t.Fatalf("Parse accepts invalid UTF-8 %q", b)
			}
			var want any
			if err := json.Unmarshal(b, &want); err != nil {
				var ue *json.UnmarshalTypeError
				if errors.As(err, &ue) && ue.Value == "number "+ue.Value[7:] {
					return // beyond float64: encoding/json fails, Float64 is ±Inf
				}
				t.Fatal(err)
			}
			if got := toAny(tp.Root()); !equalAny(got, want) {
				t.Fatalf("Parse(%q) = %#v, encoding/json %#v", b, got, want)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, b); err != nil {
				t.Fatal(err)
			}
			if got := tp.Root().AppendCompact(nil); !bytes.Equal(got, compact.Bytes()) {
				t.Fatalf("AppendCompact(%q) = %q, encoding/json.Compact %q", b, got, compact.Bytes())
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || e.Error() == "" {
			t.Fatalf("error %v is not an *Error", err)
		}
		switch e.Kind {
		case ErrSyntax:
			if valid && utf8.Valid(b) {
				t.Fatalf("Parse rejects valid %q: %v", b, err)
			}
		case ErrUTF8:
			if utf8.Valid(b) {
				t.Fatalf("UTF-8 error for valid UTF-8 %q", b)
			}
		case ErrRepeated:
			if !repeatedName(b) { // found before any later syntax error
				t.Fatalf("repeated name reported for %q", b)
			}
		case ErrDepth:
			if bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) <= MaxDepth {
				t.Fatalf("depth error for %q", b)
			}
		default:
			t.Fatalf("kind %d for %q", e.Kind, b)
		}
	})
}

func equalAny(a, b any) bool {
	return reflect.DeepEqual(a, b)
}

// repeatedName reports whether encoding/json's tokenizer sees an object
// repeat a name (names compared unescaped).
func repeatedName(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	var walk func() bool
	walk = func() bool {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for d.More() {
				k, _ := d.Token()
				ks, _ := k.(string)
				if seen[ks] {
					return true
				}
				seen[ks] = true
				if walk() {
					return true
				}
			}
			_, _ = d.Token()
		case json.Delim('['):
			for d.More() {
				if walk() {
					return true
				}
			}
			_, _ = d.Token()
		}
		return false
	}
	return walk()
}

// TestSpecialFirstFlag checks the word scan's mask against a byte-by-byte
// reading: every byte value at every position of a word, after plain
// ASCII, with every byte value after it, and random words. The lowest
// flagged byte must be the first special one, and no flag means none.
func TestSpecialFirstFlag(t *testing.T) {
	isSpecial := func(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c >= 0x80 }
	first := func(w [8]byte) int {
		for i, c := range w {
			if isSpecial(c) {
				return i
			}
		}
		return 8
	}
	check := func(w [8]byte) {
		m := special(binary.LittleEndian.Uint64(w[:])) & highs
		got := 8
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if want := first(w); got != want {
			t.Fatalf("word %q: first flagged byte %d, first special %d", w[:], got, want)
		}
	}
	for pos := 0; pos < 8; pos++ {
		for v := 0; v < 256; v++ {
			for after := 0; after < 256; after++ {
				var w [8]byte
				for i := range w {
					w[i] = 'a' + byte(i)
				}
				w[pos] = byte(v)
				for i := pos + 1; i < 8; i++ {
					w[i] = byte(after + i)
				}
				check(w)
			}
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], r.Uint64()&0x7f7f7f7f7f7f7f7f|r.Uint64()&r.Uint64()&r.Uint64()&highs)
		check(w)
	}
}

// TestStringEndsAtEveryOffset: strings and names of every length up to
// three words, ending at every distance from the end of the input (the
// word scans stop 8 bytes before it and go on byte by byte), and cut off
// before their closing quote.
func TestStringEndsAtEveryOffset(t *testing.T) {
	var tp Tape
	for n := 0; n <= 24; n++ {
		s := strings.Repeat("a", n)
		for pad := 0; pad <= 9; pad++ {
			sp := strings.Repeat(" ", pad)
			for _, in := range []string{`"` + s + `"` + sp, `{"` + s + `":"` + s + "é" + `"` + sp + `}` + sp} {
				var want any
				if err := json.Unmarshal([]byte(in), &want); err != nil {
					t.Fatal(err)
				}
				if err := tp.Parse([]byte(in)); err != nil {
					t.Fatalf("Parse(%q): %v", in, err)
				}
				if got := toAny(tp.Root()); !reflect.DeepEqual(got, want) {
					t.Fatalf("Parse(%q) = %#v, want %#v", in, got, want)
				}
			}
		}
		for _, tt := range []struct {
			in   string
			kind ErrorKind
			back int // the error's offset before the end of the input
		}{
			{`"` + s, ErrSyntax, 0}, {`{"` + s, ErrSyntax, 0}, {`{"k":"` + s, ErrSyntax, 0},
			{`"` + s + `\`, ErrSyntax, 1}, {`"` + s + "\xc3", ErrUTF8, 1}, {`{"` + s + "\xff\":1}", ErrUTF8, 5},
		} {
			err := tp.Parse([]byte(tt.in))
			var e *Error
			if !errors.As(err, &e) || e.Kind != tt.kind || e.Offset != len(tt.in)-tt.back {
				t.Fatalf("Parse(%q) = %v, want kind %d at byte %d", tt.in, err, tt.kind, len(tt.in)-tt.back)
			}
		}
	}
}

// TestRepeatedInLargeObjects: objects past smallObject members go
// through the hash table, whose hash reads names of up to 16 bytes as two
// overlapping words: two names of every length that differ in any one
// byte are distinct, a name written twice (once escaped) is repeated.
func TestRepeatedInLargeObjects(t *testing.T) {
	var fill strings.Builder
	for i := range smallObject + 1 {
		fill.WriteString(`"f` + itoa(i) + `":0,`)
	}
	var tp Tape
	for n := 1; n <= 24; n++ {
		for p := 0; p < n; p++ {
			a := []byte(strings.Repeat("n", n))
			b := bytes.Clone(a)
			b[p] = 'm'
			in := `{` + fill.String() + `"` + string(a) + `":1,"` + string(b) + `":2}`
			if err := tp.Parse([]byte(in)); err != nil {
				t.Fatalf("Parse(%q): %v", in, err)
			}
			esc := string(a[:p]) + `\u006e` + string(a[p+1:])
			in = `{"` + string(a) + `":1,` + fill.String() + `"` + esc + `":2}`
			var e *Error
			if err := tp.Parse([]byte(in)); !errors.As(err, &e) || e.Kind != ErrRepeated || e.Ptr != "/"+string(a) {
				t.Fatalf("Parse(%q) = %v, want the repeat of %q", in, err, a)
			}
		}
	}
}

// TestDistinctBits: the members of a call event (wire contract v1.2)
// take distinct bits, so that a call's repeated-name check is skipped;
// names that share a bit go to the check (pairwise up to smallObject
// members, the table beyond), which tells repeats from names that only
// look alike.
func TestDistinctBits(t *testing.T) {
	call := `{"type":"call","event_id":"c","emitted_at":"t","registry":"r","agent_id":"a","session_id":"s","model":"m",` +
		`"provider":"p","surface":"s","tool":"t","server":"s","seen_digest":"d","arguments":{},"arguments_raw":"{}","visible":[]}`
	var tp Tape
	if err := tp.Parse([]byte(call)); err != nil {
		t.Fatal(err)
	}
	if !distinctBits(&tp) {
		t.Error("the members of a call event share a bit")
	}
	// Names of one length that share their first 8 bytes share a bit.
	for _, alike := range []string{`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"prefix__x":8,"prefix__y":9}`,
		`{"prefix__x":8,"prefix__y":9}`, `{"a\u0062":1,"ac":2}`} {
		if err := tp.Parse([]byte(alike)); err != nil {
			t.Fatalf("Parse(%s): %v", alike, err)
		}
		if distinctBits(&tp) {
			t.Errorf("%s: distinct bits", alike)
		}
		var e *Error
		if err := tp.Parse([]byte(strings.Replace(alike, "prefix__y", "prefix__x", 1))); strings.Contains(alike, "prefix__y") && (!errors.As(err, &e) || e.Ptr != "/prefix__x") {
			t.Errorf("a repeat among names that share a bit: %v", err)
		}
	}
	if err := tp.Parse([]byte(`{"ab":1,"a\u0062":2}`)); err == nil {
		t.Error("an escaped repeat in a small object accepted")
	}
}

// distinctBits reports whether the root object's member names take
// distinct bits of nameBit's set.
func distinctBits(tp *Tape) bool {
	var set [4]uint64
	for m := tp.Root().Members(); m.Next(); {
		var first [8]byte
		name := m.Name()
		copy(first[:], name)
		b := nameBit(binary.LittleEndian.Uint64(first[:]), len(name))
		if m.NameValue().e().tag&escBit != 0 || set[b>>6]&(1<<(b&63)) != 0 {
			return false
		}
		set[b>>6] |= 1 << (b & 63)
	}
	return true
}

// TestPlain: Plain word by word is the byte loop it stands for, for every
// byte value at every position of texts of 0 to 20 bytes.
func TestPlain(t *testing.T) {
	plain := func(k []byte) bool {
		for _, c := range k {
			if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	}
	for n := 0; n <= 20; n++ {
		k := []byte(strings.Repeat("a", n))
		for i := range n {
			for c := range 256 {
				k[i] = byte(c)
				if got, want := Plain(k), plain(k); got != want {
					t.Fatalf("Plain(%q) = %v, want %v", k, got, want)
				}
				k[i] = 'a'
			}
		}
		if n >= 2 { // a special byte next to another, which a borrow could hide
			for c := range 256 {
				for d := range 256 {
					k[0], k[n-1] = byte(c), byte(d)
					if got, want := Plain(k), plain(k); got != want {
						t.Fatalf("Plain(%q) = %v, want %v", k, got, want)
					}
				}
			}
		}
	}
}
