package schema

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/jsontape"
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
		} else if c.EventID == "" || c.Tool == "" || c.EmittedAt.IsZero() ||
			(c.ArgsUnrecorded && c.Arguments.Exists()) || (!c.ArgsUnrecorded && c.Arguments.Kind() != jsontape.Object) {
			t.Fatalf("accepted an unusable call: %+v", c)
		}
		valid := schemaAccepts(callS, bytes.TrimSpace(line))
		if (err == nil) != valid && !(valid && decoderOnly(err)) {
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
		if (err == nil) != valid && !(valid && decoderOnly(err)) {
			t.Fatalf("decoder err=%v, JSON Schema valid=%v for %q", err, valid, line)
		}
	})
}

// decoderOnly reports whether err is one of the rules the events' JSON
// Schemas cannot state, which only the decoders enforce: repeated member
// names, repeated tool names, invalid UTF-8 (JSON Schema validators see
// the text after a lenient decoder replaced it), nesting depth and the
// time range.
func decoderOnly(err error) bool {
	var me *MalformedError
	if !errors.As(err, &me) {
		return false
	}
	r := me.Reason
	return strings.HasPrefix(r, "repeated member name") || strings.HasPrefix(r, "invalid UTF-8") ||
		strings.HasPrefix(r, "nesting deeper") || strings.Contains(r, "outside the supported range") ||
		strings.HasSuffix(r, "appears twice")
}
