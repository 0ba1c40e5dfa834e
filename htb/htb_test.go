package htb

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const corpus = "../testdata/corpus"

// TestGolden pins the exact tables of a small run: seed 7, 20 trials per
// class, 20 honest per kind, every track.
func TestGolden(t *testing.T) {
	rep, err := Run(Config{Seed: 7, Trials: 20, Honest: 20, Corpus: corpus})
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Markdown()
	path := filepath.Join("testdata", "golden_seed7.md")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./htb -run TestGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("markdown differs from %s (go test ./htb -run TestGolden -update to accept):\n%s", path, got)
	}
}

// TestSameSeedSameBytes runs twice with one seed: markdown and JSON must be
// byte-identical; another seed must give other trials.
func TestSameSeedSameBytes(t *testing.T) {
	cfg := Config{Seed: 42, Trials: 40, Honest: 40, Corpus: corpus}
	a, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Markdown(), b.Markdown()) {
		t.Error("two runs with the same seed differ (markdown)")
	}
	if !bytes.Equal(a.JSON(), b.JSON()) {
		t.Error("two runs with the same seed differ (json)")
	}
	cfg.Seed = 43
	c, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.JSON(), c.JSON()) {
		t.Error("seeds 42 and 43 gave the same report")
	}
	// The trials themselves, not only the aggregates, are reproducible.
	ta, _ := Build(Config{Seed: 42, Trials: 40, Honest: 40, Tracks: []string{TrackSingle, TrackMCP}})
	tb, _ := Build(Config{Seed: 42, Trials: 40, Honest: 40, Tracks: []string{TrackMCP}})
	if len(ta[1].Trials) != len(tb[0].Trials) {
		t.Fatal("the mcp track depends on which other tracks run")
	}
	for i := range tb[0].Trials {
		if !bytes.Equal(ta[1].Trials[i].Line, tb[0].Trials[i].Line) {
			t.Fatalf("trial %d of the mcp track depends on which other tracks run", i)
		}
	}
}

// TestLabelsAgree: across seeds, every generated trial has the class the
// strict resolver gives it (the generator's labels follow the contract),
// and the resolver never lets H1-H4 or M1-M5 through.
func TestLabelsAgree(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		rep, err := Run(Config{Seed: seed, Trials: 40, Honest: 40, Corpus: corpus,
			Tracks: []string{TrackSingle, TrackMCP, TrackRealMCP, TrackAPIBank}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range rep.Tracks {
			if tr.Agreement.Agree != tr.Agreement.Total {
				t.Errorf("seed %d track %s: %d of %d labels agree: %+v", seed, tr.Name, tr.Agreement.Agree, tr.Agreement.Total, tr.Agreement.Disagreements)
			}
			for _, p := range tr.Pipelines {
				if p.Name != "resolver" && p.Name != "full" {
					continue
				}
				for cl, asr := range p.ASR {
					if cl != "H5" && asr != 0 {
						t.Errorf("seed %d track %s: %s executes %s at %.4f", seed, tr.Name, p.Name, cl, asr)
					}
				}
			}
		}
	}
}

// TestDefaultRun is the full default run: every track, 400 trials per
// class. It checks the counts and the published reference points that hold
// by construction.
func TestDefaultRun(t *testing.T) {
	if testing.Short() {
		t.Skip("full run skipped in -short")
	}
	rep, err := Run(Config{Seed: 1, Corpus: corpus})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tracks) != 5 {
		t.Fatalf("%d tracks", len(rep.Tracks))
	}
	byName := map[string]TrackResult{}
	for _, tr := range rep.Tracks {
		byName[tr.Name] = tr
		for _, cl := range tr.Classes {
			if tr.Trials[cl] != DefaultTrials {
				t.Errorf("track %s class %s: %d trials", tr.Name, cl, tr.Trials[cl])
			}
		}
	}
	if n := byName[TrackSingle].Trials[Honest]; n != DefaultHonest {
		t.Errorf("single: %d honest", n)
	}
	if n := byName[TrackMCP].Trials[Honest]; n != 3*DefaultHonest {
		t.Errorf("mcp: %d honest", n)
	}
	if n := byName[TrackBFCL].Trials[Honest]; n != 3129 {
		t.Errorf("bfcl: %d honest", n)
	}
	pipe := func(track, name string) PipelineResult {
		for _, p := range byName[track].Pipelines {
			if p.Name == name {
				return p
			}
		}
		t.Fatalf("no pipeline %s in %s", name, track)
		return PipelineResult{}
	}
	for _, cl := range []string{"H1", "H2", "H3"} {
		if a := pipe(TrackSingle, "gate").ASR[cl]; a != 1 {
			t.Errorf("gate %s ASR %.4f, want 1", cl, a)
		}
	}
	for _, tr := range []string{TrackMCP, TrackRealMCP} {
		for _, cl := range []string{"M2", "M3", "M4", "M5"} {
			if a := pipe(tr, "first-provider").ASR[cl]; a != 1 {
				t.Errorf("%s first-provider %s ASR %.4f, want 1", tr, cl, a)
			}
		}
		if f := *pipe(tr, "resolver").FlatOverRejection; f != 1 {
			t.Errorf("%s strict flat over-rejection %.4f, want 1", tr, f)
		}
		if f := *pipe(tr, "resolver-pin").FlatOverRejection; f != 0 {
			t.Errorf("%s pin-assisted flat over-rejection %.4f, want 0", tr, f)
		}
	}
	if h := pipe(TrackSingle, "full+select").ASR["H5"]; h >= pipe(TrackSingle, "full").ASR["H5"] {
		t.Errorf("selection does not lower the H5 residue: %.4f", h)
	}
	if o := pipe(TrackBFCL, "resolver").OverRejection; o != 0 {
		t.Errorf("resolver over-rejects BFCL at %.4f", o)
	}
	// Contract v1.2: sibling-drawn arguments without a key T does not
	// declare are labelled H2/H3 (no-borrowed-key), agree with the
	// resolver, and are rejected like the H5 ones.
	for _, tr := range []string{TrackSingle, TrackAPIBank} {
		if a := byName[tr].Agreement; a.Agree != a.Total {
			t.Errorf("%s: %d of %d labels agree: %+v", tr, a.Agree, a.Total, a.Disagreements)
		}
		n := 0
		for _, v := range pipe(tr, "resolver").Variants {
			if v.Kind == "H5" && v.Variant == "no-borrowed-key" {
				n = v.Trials
				if v.Executed != 0 {
					t.Errorf("%s: resolver executes %d no-borrowed-key trials", tr, v.Executed)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no H5 trial without a borrowed key: the v1.2 labels are not exercised", tr)
		}
	}
}

// TestBorrowedKey: HTB's own reading of contract v1.2's evidence for H5,
// a key the schema does not declare where rule 3 closes an object.
func TestBorrowedKey(t *testing.T) {
	const s = `{"type":"object","properties":{"path":{"type":"string"},"opts":{"type":"object","properties":{"a":{"type":"string"}}},` +
		`"meta":{"type":"object"},"tags":{"type":"array","items":{"type":"object","properties":{"k":{"type":"string"}}}},` +
		`"env":{"type":"object","properties":{},"additionalProperties":{"type":"object","properties":{"v":{"type":"string"}}}}}}`
	for _, tc := range []struct {
		schema, args string
		found, ok    bool
	}{
		{s, `{"path":1}`, false, true},
		{s, `{"path":"p","content":"c"}`, true, true},
		{s, `{"opts":{"b":1}}`, true, true},
		{s, `{"meta":{"anything":1}}`, false, true},
		{s, `{"tags":[{"k":"x"},{"j":"y"}]}`, true, true},
		{s, `{"env":{"HOME":{"v":"x"}}}`, false, true},
		{s, `{"env":{"HOME":{"w":"x"}}}`, true, true},
		{`{"type":"object","additionalProperties":true}`, `{"x":1}`, false, true},
		{`{"type":"object"}`, `{"x":1}`, true, true},
		{`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}`, `{"a":"x"}`, false, false},
	} {
		sch, err := decodeObj([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		a, err := decodeObj([]byte(tc.args))
		if err != nil {
			t.Fatal(err)
		}
		if found, ok := borrowedKey(sch, a, true); found != tc.found || ok != tc.ok {
			t.Errorf("%s against %s: %v %v, want %v %v", tc.args, tc.schema, found, ok, tc.found, tc.ok)
		}
	}
}

func TestParseTracks(t *testing.T) {
	for in, n := range map[string]int{"single": 1, "mcp": 1, "real": 3, "all": 5, "bfcl": 1} {
		got, err := ParseTracks(in)
		if err != nil || len(got) != n {
			t.Errorf("ParseTracks(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseTracks("nope"); err == nil {
		t.Error("ParseTracks accepted an unknown track")
	}
	if _, err := Build(Config{Tracks: []string{TrackBFCL}, Corpus: t.TempDir()}); err == nil {
		t.Error("bfcl track without a corpus did not fail")
	}
}
