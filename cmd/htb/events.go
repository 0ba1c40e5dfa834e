package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/toolaudit/toolaudit/htb"
)

// eventsCommand writes a track's trials as contract events: a simulated
// fleet for the streaming demo and for load tests, with the labels to
// score the decisions.
func eventsCommand() *ffcli.Command {
	fs := flag.NewFlagSet("htb events", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "generator `seed`")
	track := fs.String("track", "single,mcp", "comma-separated `tracks` (single, mcp, real-mcp, apibank)")
	trials := fs.Int("trials", htb.DefaultTrials, "hostile trials per class")
	honest := fs.Int("honest", htb.DefaultHonest, "honest trials per honest kind")
	corpus := fs.String("corpus", htb.DefaultCorpus, "corpus `DIR` (real-mcp)")
	out := fs.String("out", "", "output `DIR`: listings.jsonl, calls.jsonl, expected.jsonl (required)")
	return &ffcli.Command{
		Name:       "events",
		ShortUsage: "htb events --out DIR [--seed N] [--track single,mcp] [--trials N] [--honest N]",
		ShortHelp:  "write the trials as listing and call events (a simulated fleet)",
		LongHelp: `Writes the chosen tracks' listings and trials as wire-contract events:
DIR/listings.jsonl, DIR/calls.jsonl and DIR/expected.jsonl (each call's
class under the contract, scoreable with testdata/corpus/score.py). The
same seed gives the same bytes. Feed them to resolverd check, or to Kafka
with cmd/ingest.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("HTB")},
		Exec: func(ctx context.Context, args []string) error {
			if *out == "" || len(args) > 0 {
				return usageError{fmt.Errorf("events needs --out DIR and no arguments")}
			}
			var tracks []string
			for _, t := range splitComma(*track) {
				ts, err := htb.ParseTracks(t)
				if err != nil {
					return usageError{err}
				}
				tracks = append(tracks, ts...)
			}
			built, err := htb.Build(htb.Config{Seed: *seed, Tracks: tracks, Trials: *trials, Honest: *honest, Corpus: *corpus})
			if err != nil {
				return err
			}
			if err := os.MkdirAll(*out, 0o755); err != nil {
				return err
			}
			return writeEvents(*out, built)
		},
	}
}

func writeEvents(dir string, tracks []*htb.Track) error {
	files := map[string]*bufio.Writer{}
	for _, name := range []string{"listings.jsonl", "calls.jsonl", "expected.jsonl"} {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		defer f.Close()
		files[name] = bufio.NewWriter(f)
	}
	for _, t := range tracks {
		for _, l := range t.Listings {
			files["listings.jsonl"].Write(append(l, '\n'))
		}
		for _, tr := range t.Trials {
			files["calls.jsonl"].Write(append(tr.Line, '\n'))
			verdict := "reject"
			if tr.Expect == "OK" {
				verdict = "allow"
			}
			fmt.Fprintf(files["expected.jsonl"], `{"event_id":%q,"class":%q,"verdict":%q}`+"\n", tr.ID, tr.Expect, verdict)
		}
	}
	for _, w := range files {
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
