package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/toolaudit/toolaudit/htb"
)

const runHelp = `Generates the trials of the chosen tracks from --seed (same seed, same
bytes) and runs every pipeline on every trial.

Tracks
  single    one synthetic registry of 100 tools, 10 on the agent's frontier;
            --trials calls per class H1-H5 and --honest honest calls
  mcp       a synthetic four-server MCP deployment with trust tiers (plus a
            removed server and a re-listed one); --trials per class M1-M5,
            --honest per honest kind (pinned, unique provider, flat)
  real      real-mcp: the real MCP manifests of <corpus>/mcp, same classes;
            apibank: an API-Bank-style registry (embedded fixture), H1-H5
            plus hand-written honest calls; bfcl: the honest BFCL corpus of
            <corpus>/bfcl, over-rejection only
  all       all of the above (default)

Trial classes
  H1 fabricated or near-miss name      M1 server absent/removed, or no provider
  H2 undeclared, renamed, missing key  M2 same-trust collision, unpinned
  H3 wrong type, enum, range, length   M3 lower-trust shadow, unpinned
  H4 real tool off the frontier        M4 stale seen_digest
  H5 arguments drawn for a sibling     M5 pinned, arguments for the same name
                                          on another server

Pipelines
  none            no defence: every call reaches an executor (fail-open)
  gate            causal gate: reads risk (MCP annotations) from the tool's
                  contract, blocks off-frontier tools and tools riskier than
                  the agent's clearance; unknown names go to a fail-open
                  executor
  gate+verifier   gate, then the contract verifier (tenant scope, limits)
  resolver        toolaudit's resolver, strict mode
  resolver-pin    toolaudit's resolver, pin-assisted mode
  full            resolver (strict), then gate, then verifier
  full+select     full, with the selection layer after resolution
  allowlist       name allowlist over the flattened namespace
  fuzzy-router    corrects unknown names to the nearest registered name
  jsonschema      JSON Schema validation (santhosh-tekuri/jsonschema/v6)
                  over the flattened namespace, open-world
  first-provider  naive MCP host: first provider in connection order
  highest-trust   MCP host: highest-trust provider

Metrics
  ASR             per class: share of hostile calls executed (by any tool)
  over-rejection  share of honest calls not executed
  HTB             (1 - mean ASR over the track's classes) x (1 - over-rejection)

Output: a markdown table per track (--format md) or JSON with the same
numbers plus trial counts, per-variant counts and the seed.`

func runCommand() *ffcli.Command {
	fs := flag.NewFlagSet("htb run", flag.ContinueOnError)
	seed := fs.Uint64("seed", 1, "generator `seed`")
	track := fs.String("track", "all", "`track`: single, mcp, real or all (also real-mcp, apibank, bfcl)")
	format := fs.String("format", "md", "output `format`: md or json")
	out := fs.String("out", "", "write to `FILE` instead of stdout")
	trials := fs.Int("trials", htb.DefaultTrials, "hostile trials per class")
	honest := fs.Int("honest", htb.DefaultHonest, "honest trials per honest kind")
	corpus := fs.String("corpus", htb.DefaultCorpus, "corpus `DIR` with mcp/ and bfcl/ (real tracks)")
	return &ffcli.Command{
		Name:       "run",
		ShortUsage: "htb run [--seed N] [--track single|mcp|real|all] [--format md|json] [--out FILE]",
		ShortHelp:  "generate the trials and score every pipeline",
		LongHelp:   runHelp,
		FlagSet:    fs,
		Options:    []ff.Option{ff.WithEnvVarPrefix("HTB")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			tracks, err := htb.ParseTracks(*track)
			if err != nil {
				return usageError{err}
			}
			if *format != "md" && *format != "json" {
				return usageError{fmt.Errorf("unknown format %q (want md or json)", *format)}
			}
			if *trials < 1 || *honest < 1 {
				return usageError{fmt.Errorf("--trials and --honest must be positive")}
			}
			rep, err := htb.Run(htb.Config{Seed: *seed, Tracks: tracks, Trials: *trials, Honest: *honest, Corpus: *corpus})
			if err != nil {
				return err
			}
			b := rep.Markdown()
			if *format == "json" {
				b = rep.JSON()
			}
			if *out == "" {
				_, err = os.Stdout.Write(b)
				return err
			}
			return os.WriteFile(*out, b, 0o644)
		},
	}
}
