package audit

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

func sampleRecord(call string) Record {
	return Record{
		Source: schema.SourceAPI, Action: schema.ActionEnforced, Call: []byte(call), Key: "s-1",
		Decision: schema.Decision{EventID: "c-1", Verdict: schema.Reject, Class: schema.H3, Reason: `wrong type: want "integer"`,
			Path: "/n", Coercible: true, ResolvedServer: "srv", ResolvedTool: "t", RegistryVersion: "rv-1", Drift: true,
			SeenDigest: "sha256:aa", CurrentDigest: "sha256:bb"},
		SuggestedTool: "", ResolverBuild: "v1+abc", PolicyVersion: "strict",
		DecidedAt: time.Date(2026, 11, 29, 10, 0, 5, 251e6, time.UTC),
	}
}

// TestRoundTrip: what AppendJSON writes, Decode reads back whole, for
// calls that are JSON, not JSON, not UTF-8, and JSON with a repeated key
// (written as call_base64: the record itself repeats no member name).
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, call string
		base64     bool
	}{
		{"call", `{"type":"call","event_id":"c-1","emitted_at":"2026-01-01T00:00:00Z","registry":"r","tool":"t","arguments":{"n":"5"}}`, false},
		{"repeated key in the call", `{"event_id":"c-1","tool":"t","tool":"wipe_disk"}`, true},
		{"not JSON", `{"event_id":"c-1",`, true},
		{"not UTF-8", "{\"event_id\":\"c-\xff\"}", true},
		{"empty", ``, true},
		{"surrounding space", ` {"event_id":"c-1"}` + "\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := sampleRecord(tc.call)
			b := in.AppendJSON(nil)
			if got := bytes.Contains(b, []byte(`"call_base64":`)); got != tc.base64 {
				t.Fatalf("call_base64 %v, want %v: %s", got, tc.base64, b)
			}
			var out Record
			if err := Decode(b, &out); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			in.Key = "" // not encoded
			if !reflect.DeepEqual(in, out) {
				t.Fatalf("round trip:\n in %+v\nout %+v", in, out)
			}
		})
	}
}

// TestDecisionMatchesAnswerEncoder: the record's decision object starts
// with the members of the check line (schema.Decision.AppendJSON), so a
// reader of either finds the same names.
func TestDecisionMatchesAnswerEncoder(t *testing.T) {
	r := sampleRecord(`{}`)
	check := r.Decision.AppendJSON(nil)
	dec := r.AppendDecision(nil)
	if !bytes.HasPrefix(dec, check[:len(check)-1]) {
		t.Fatalf("decision %s does not extend %s", dec, check)
	}
}

// TestDecisionColumns: every member of the decision is a column of the
// row, of a type the decoder reads.
func TestDecisionColumns(t *testing.T) {
	for _, n := range decisionColumns {
		c := columns[n]
		if c.Str == nil && c.Bool == nil && c.Time == nil {
			t.Errorf("column %s has a type the record cannot carry", n)
		}
	}
	var row schema.Row
	r := sampleRecord(`{}`)
	r.Fill(&row)
	var back Record
	if err := Decode(r.AppendJSON(nil), &back); err != nil {
		t.Fatal(err)
	}
	var row2 schema.Row
	back.Fill(&row2)
	if !reflect.DeepEqual(row, row2) {
		t.Fatalf("rows differ:\n%+v\n%+v", row, row2)
	}
	if row.Source != schema.SourceAPI || row.Action != schema.ActionEnforced || row.DecidedAt != r.DecidedAt || row.ResolverBuild != "v1+abc" {
		t.Fatalf("Fill: %+v", row)
	}
}

func TestDecodeGood(t *testing.T) {
	b, err := os.ReadFile("testdata/good.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var r Record
		if err := Decode(l, &r); err != nil {
			t.Errorf("%v: %s", err, l)
		}
	}
}

// TestDecodeBad: each record of testdata/bad.txt is refused with the
// reason its line names.
func TestDecodeBad(t *testing.T) {
	f, err := os.Open("testdata/bad.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		want, rec, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("bad fixture line %q", sc.Text())
		}
		n++
		var r Record
		err := Decode([]byte(rec), &r)
		if err == nil || !errors.Is(err, ErrRecord) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", rec, err, want)
		}
	}
	if n < 20 {
		t.Fatalf("only %d bad records", n)
	}
}

func TestParseAction(t *testing.T) {
	for _, s := range []string{"", "enforced", "observed"} {
		if a, err := ParseAction(s); err != nil || string(a) != s {
			t.Errorf("ParseAction(%q) = %q, %v", s, a, err)
		}
	}
	if _, err := ParseAction("Enforced"); err == nil {
		t.Error("ParseAction accepted Enforced")
	}
}

func FuzzDecode(f *testing.F) {
	b, _ := os.ReadFile("testdata/good.jsonl")
	for _, l := range bytes.Split(b, []byte("\n")) {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if Decode(b, &r) != nil {
			return
		}
		// What decodes re-encodes to a record that decodes the same.
		var again Record
		if err := Decode(r.AppendJSON(nil), &again); err != nil {
			t.Fatalf("re-encoded record refused: %v", err)
		}
		if !reflect.DeepEqual(r, again) {
			t.Fatalf("re-encoded record differs:\n%+v\n%+v", r, again)
		}
	})
}
