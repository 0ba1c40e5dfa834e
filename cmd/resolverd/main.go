// Command resolverd audits and enforces LLM-agent tool calls: it resolves
// each call against the registry version current when the call was emitted
// and classifies every failure (wire contract v1).
//
// Subcommands:
//
//	check      resolve a calls file against a listings file (offline)
//	run        consume Kafka, resolve, write decisions to ClickHouse
//	gateway    MCP gateway: merge MCP servers, decide every tools/call
//	reanalyze  decide the calls of a past window again, under a new analysis id
//	diff       the calls whose decision changed between two analyses
//	migrate    create or upgrade the ClickHouse schema
//	report     headline analytics of the decisions, on a terminal or as HTML
//	registry   the registry history (registry diff); approved definitions
//	           (registry pending, approve, reject, revoke, lock)
//	stack      run only the embedded Kafka broker and ClickHouse engine
//	proxy      model API proxy: decide every tool call a model returns
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/peterbourgon/ff/v3/ffcli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], stdio{os.Stdin, os.Stdout, os.Stderr}))
}

// stdio are the process's streams, passed explicitly so tests can run
// commands in-process.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// run returns the process exit code: 0 (--help included), 1 for unusable
// input or a failed run, 2 for a usage error (a command group without its
// subcommand, an unknown subcommand at any level), or the code of an
// exitError (diff's gate).
func run(ctx context.Context, args []string, std stdio) int {
	root := rootCommand(std)
	err := root.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(std.err, "resolverd:", err)
		return 2
	}
	if err != nil {
		return 0 // --help asked for: ffcli has printed the usage
	}
	err = root.Run(ctx)
	var (
		ue usageError
		ee exitError
	)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 2 // a command group without its subcommand: ffcli has printed the usage
	case errors.As(err, &ue):
		fmt.Fprintln(std.err, "resolverd:", err)
		return 2
	case errors.As(err, &ee):
		fmt.Fprintln(std.err, "resolverd:", err)
		return ee.code
	default:
		fmt.Fprintln(std.err, "resolverd:", err)
		return 1
	}
}

// rootCommand is resolverd and its subcommands.
func rootCommand(std stdio) *ffcli.Command {
	rootFlags := flag.NewFlagSet("resolverd", flag.ContinueOnError)
	rootFlags.SetOutput(std.err)
	root := &ffcli.Command{
		Name:       "resolverd",
		ShortUsage: "resolverd <subcommand> [flags]",
		LongHelp: `resolverd resolves LLM-agent tool calls against the registry version that
was current when each call was emitted, and classifies every failure
(OK, H1-H5, M1-M5, MALFORMED; see README.md).`,
		FlagSet: rootFlags,
		Subcommands: []*ffcli.Command{checkCommand(std), runCommand(std), gatewayCommand(std), reanalyzeCommand(std), diffCommand(std),
			migrateCommand(std), reportCommand(std), registryCommand(std), stackCommand(std), proxyCommand(std)},
	}
	root.Exec = commandGroup(root)
	return root
}

// commandGroup is the Exec of a command that only holds subcommands: with
// no argument it prints the help (ffcli's flag.ErrHelp, exit 2 at the
// root); an argument that names no subcommand (a typo: "resolverd dif",
// "resolverd registry bogus") is a usage error naming those that exist, so
// that a mistyped CI gate fails instead of printing the help and passing.
func commandGroup(c *ffcli.Command) func(context.Context, []string) error {
	return func(_ context.Context, args []string) error {
		if len(args) == 0 {
			return flag.ErrHelp
		}
		names := make([]string, len(c.Subcommands))
		for i, s := range c.Subcommands {
			names[i] = s.Name
		}
		return usageError{fmt.Errorf("%s: unknown command %q; the commands are: %s (%s --help)",
			c.Name, args[0], strings.Join(names, ", "), c.Name)}
	}
}

type usageError struct{ error }

// exitError ends the process with its code (a command's documented
// status other than 1 and 2).
type exitError struct {
	code int
	error
}
