package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/internal/testkit/helptext"
)

func TestRunWritesFiles(t *testing.T) {
	dir := t.TempDir()
	md, js := filepath.Join(dir, "out.md"), filepath.Join(dir, "out.json")
	base := []string{"run", "--seed", "5", "--track", "single", "--trials", "10", "--honest", "10"}
	if code := run(context.Background(), append(base, "--out", md)); code != 0 {
		t.Fatalf("md run exited %d", code)
	}
	if code := run(context.Background(), append(base, "--format", "json", "--out", js)); code != 0 {
		t.Fatalf("json run exited %d", code)
	}
	b, _ := os.ReadFile(md)
	if !bytes.Contains(b, []byte("| resolver |")) || !bytes.Contains(b, []byte("## single")) {
		t.Errorf("markdown lacks the table:\n%s", b)
	}
	var rep struct {
		Seed   uint64
		Tracks []struct {
			Trials map[string]int
		}
	}
	b, _ = os.ReadFile(js)
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Seed != 5 || len(rep.Tracks) != 1 || rep.Tracks[0].Trials["H1"] != 10 {
		t.Errorf("json: %+v", rep)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--track", "nope"},
		{"run", "--format", "xml"},
		{"run", "--trials", "0"},
		{"run", "extra"},
		{},
	} {
		if code := run(context.Background(), args); code != 2 {
			t.Errorf("htb %s exited %d, want 2", strings.Join(args, " "), code)
		}
	}
	if code := run(context.Background(), []string{"run", "--help"}); code != 0 {
		t.Errorf("--help exited %d", code)
	}
	if code := run(context.Background(), []string{"run", "--track", "bfcl", "--corpus", t.TempDir()}); code != 1 {
		t.Errorf("missing corpus exited %d, want 1", code)
	}
}

func TestEventsCommand(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if code := run(context.Background(), []string{"events", "--out", dir, "--trials", "5", "--honest", "5"}); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	for _, f := range []string{"listings.jsonl", "calls.jsonl", "expected.jsonl"} {
		x, err := os.ReadFile(filepath.Join(a, f))
		if err != nil || len(x) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		y, _ := os.ReadFile(filepath.Join(b, f))
		if !bytes.Equal(x, y) {
			t.Fatalf("%s differs between runs with the same seed", f)
		}
	}
	calls, _ := os.ReadFile(filepath.Join(a, "calls.jsonl"))
	exp, _ := os.ReadFile(filepath.Join(a, "expected.jsonl"))
	if bytes.Count(calls, []byte("\n")) != bytes.Count(exp, []byte("\n")) {
		t.Fatal("one label per call")
	}
	if code := run(context.Background(), []string{"events"}); code != 2 {
		t.Fatalf("events without --out: exit %d", code)
	}
}

// TestHelpPlaceholders: every flag shows its default or an upper-case
// placeholder in --help, as resolverd's and ingest's do.
func TestHelpPlaceholders(t *testing.T) {
	for _, c := range rootCommand().Subcommands {
		for _, bad := range helptext.Ambiguous(c.FlagSet) {
			t.Errorf("htb %s %s", c.Name, bad)
		}
	}
}
