package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/toolaudit/toolaudit/internal/oracle"
)

func addSeeds(f *testing.F, files ...string) {
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for i, l := range bytes.Split(b, []byte("\n")) {
			if i < 50 {
				f.Add(l)
			}
		}
	}
}

func FuzzDecodeCall(f *testing.F) {
	addSeeds(f, "../testdata/corpus/sample/calls.jsonl", "testdata/bad_calls.jsonl", "testdata/good_calls.jsonl")
	callS, _, _ := compileSchemas(f)
	var d CallDecoder
	f.Fuzz(func(t *testing.T, line []byte) {
		var c Call
		err := d.Decode(line, &c)
		if err != nil {
			var me *MalformedError
			if !errors.As(err, &me) || me.Reason == "" {
				t.Fatalf("error %v is not a classified MalformedError", err)
			}
		} else if c.EventID == "" || c.Tool == "" || c.Arguments == nil || c.EmittedAt.IsZero() {
			t.Fatalf("accepted an unusable call: %+v", c)
		}
		valid := schemaAccepts(callS, bytes.TrimSpace(line))
		if (err == nil) != valid && !(valid && oracle.RepeatedKey(line)) {
			t.Fatalf("decoder err=%v, JSON Schema valid=%v for %q", err, valid, line)
		}
	})
}

func FuzzDecodeListing(f *testing.F) {
	addSeeds(f, "../testdata/corpus/sample/listings.jsonl", "testdata/bad_listings.jsonl", "testdata/good_listings.jsonl")
	_, listingS, _ := compileSchemas(f)
	f.Fuzz(func(t *testing.T, line []byte) {
		l, err := DecodeListing(line)
		if err == nil && (l.EventID == "" || (l.Op != OpSnapshot && l.Op != OpRemove)) {
			t.Fatalf("accepted an unusable listing: %+v", l)
		}
		valid := schemaAccepts(listingS, bytes.TrimSpace(line))
		if (err == nil) != valid && !(valid && oracle.RepeatedKey(line)) {
			t.Fatalf("decoder err=%v, JSON Schema valid=%v for %q", err, valid, line)
		}
	})
}

// FuzzValidJSON: validJSON and encoding/json.Valid agree on every input.
func FuzzValidJSON(f *testing.F) {
	addSeeds(f, "../testdata/corpus/sample/calls.jsonl", "testdata/bad_calls.jsonl")
	for _, s := range []string{``, ` `, `0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+`, `1E-2`, `-`, `"\u00e9"`, `"\u00g9"`, `"\q"`, "\"\x01\"", `[1,]`, `{"a":1,}`, `{"a" 1}`, `[[[]]]`, `nul`, `true false`, `"\/"`, "\"\xff\"", `{"a":NaN}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := validJSON(b), json.Valid(b); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json.Valid = %v", b, got, want)
		}
	})
}

// BenchmarkValidJSON: the strict pre-pass over the corpus calls (sample and
// BFCL), the shape of the pipeline's input.
func BenchmarkValidJSON(b *testing.B) {
	var lines [][]byte
	for _, p := range []string{"../testdata/corpus/sample/calls.jsonl", "../testdata/corpus/bfcl/calls.jsonl"} {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(l) > 0 {
				lines = append(lines, l)
			}
		}
	}
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	for b.Loop() {
		for _, l := range lines {
			validJSON(l)
		}
	}
}
