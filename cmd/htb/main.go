// Command htb runs the Hallucinated-Tools Benchmark: a seeded,
// deterministic generator of hostile and honest tool calls, and a runner
// that scores toolaudit's resolver and the common alternatives on the same
// trials. See docs/benchmark.md.
//
//	htb run [--seed N] [--track single|mcp|real|all] [--format md|json] [--out FILE]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/peterbourgon/ff/v3/ffcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

// run returns the exit code: 0, 1 for a failed run, 2 for a usage error.
func run(ctx context.Context, args []string) int {
	root := rootCommand()
	err := root.ParseAndRun(ctx, args)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		if len(args) == 0 {
			fmt.Fprintln(os.Stderr, ffcli.DefaultUsageFunc(root))
			return 2
		}
		return 0
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "htb:", err)
		return 2
	default:
		fmt.Fprintln(os.Stderr, "htb:", err)
		return 1
	}
}

// rootCommand is htb and its subcommands.
func rootCommand() *ffcli.Command {
	return &ffcli.Command{
		Name:        "htb",
		ShortUsage:  "htb <subcommand> [flags]",
		LongHelp:    "htb scores defences against hallucinated tool calls (see htb run --help).",
		Subcommands: []*ffcli.Command{runCommand(), eventsCommand()},
		Exec: func(context.Context, []string) error {
			return flag.ErrHelp
		},
	}
}

type usageError struct{ error }
