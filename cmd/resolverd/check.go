package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

func checkCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd check", flag.ContinueOnError)
	fs.SetOutput(std.err)
	listings := fs.String("listings", "", "listing events, JSONL (`FILE`, - for stdin); required")
	calls := fs.String("calls", "", "call events, JSONL (`FILE`, - for stdin); required")
	mode := fs.String("mode", "strict", "resolution `mode`: strict (same-trust collisions are M2) or pin-assisted (resolved deterministically)")
	formats := formatsFlag(fs)
	var gf gateFlags
	gf.registerOffline(fs)
	workers := fs.Int("workers", min(runtime.GOMAXPROCS(0), check.MaxWorkers), "resolver goroutines (1 to "+strconv.Itoa(check.MaxWorkers)+")")
	quiet := fs.Bool("quiet", false, "no summary and no listing warnings on stderr")
	keyFile := argsKeyFlag(fs)
	memLimit := fs.Int64("memory-limit-mb", 256, "soft memory limit of the Go heap in `MiB` (GOMEMLIMIT; 0: none): the collector works harder as the heap nears it")
	return &ffcli.Command{
		Name:       "check",
		ShortUsage: "resolverd check --listings FILE --calls FILE [--mode strict|pin-assisted]",
		ShortHelp:  "resolve a calls file against a listings file, offline",
		LongHelp: `Reads every listing event first (any order: they are applied in event
time), then resolves each call against the registry version current at
its emitted_at. Writes one decision per call, as JSONL, to stdout, in
input order; a summary (count per class and verdict) goes to stderr.

A line that is not a usable call is a MALFORMED decision, not an error;
a bad listing line is reported on stderr and skipped. The exit status is
non-zero only when an input file cannot be read (1) or for a usage
error (2). Flags may also be set as RESOLVERD_CHECK_<FLAG> variables.

With --approvals (and the baseline, --approvals-lock FILE), each decision
of a resolved call carries "approval" and "baseline_version", and under
block a definition the lockfile does not approve is M4: what approvals
would have stopped.

With an args hash key (--args-hash-key-file, or RESOLVERD_ARGS_HASH_KEY),
each decision of a decoded call also carries "args_hash", the keyed hash
resolverd run stores.

Every line gets its decision within bounded memory: a line longer than
16 MiB is MALFORMED unread, at most 32 MiB of input is in flight, and
lines over 1 MiB are decoded one at a time: the heap stays under about
200 MiB plus 6 MiB per worker, whatever the input.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD_CHECK")},
		Exec: func(ctx context.Context, _ []string) error {
			if *listings == "" || *calls == "" {
				return usageError{errors.New("check needs --listings and --calls")}
			}
			if *listings == "-" && *calls == "-" {
				return usageError{errors.New("only one of --listings and --calls can be stdin")}
			}
			m, err := resolve.ParseMode(*mode)
			if err != nil {
				return usageError{err}
			}
			assertFormats, err := parseFormats(*formats)
			if err != nil {
				return usageError{err}
			}
			if *workers < 1 || *workers > check.MaxWorkers {
				return usageError{fmt.Errorf("--workers %d: want 1 to %d (the work is CPU-bound)", *workers, check.MaxWorkers)}
			}
			if *memLimit < 0 {
				return usageError{fmt.Errorf("--memory-limit-mb %d: want 0 (no limit) or more", *memLimit)}
			}
			limitMemory(*memLimit)
			gate, err := gf.gate()
			if err != nil {
				return err
			}
			r := resolve.Resolver{Mode: m, Formats: assertFormats, Approvals: gate}
			return runCheck(ctx, std, checkArgs{*listings, *calls, r, *workers, *quiet, *keyFile})
		},
	}
}

type checkArgs struct {
	listings, calls string
	resolver        resolve.Resolver
	workers         int
	quiet           bool
	keyFile         string
}

func runCheck(ctx context.Context, std stdio, a checkArgs) error {
	log := slog.New(slog.NewTextHandler(std.err, nil))
	if a.quiet {
		log = slog.New(slog.DiscardHandler)
	}
	key, err := loadArgsKey(a.keyFile, log)
	if err != nil {
		return err
	}
	lf, err := open(a.listings, std.in)
	if err != nil {
		return err
	}
	defer lf.Close()
	cf, err := open(a.calls, std.in)
	if err != nil {
		return err
	}
	defer cf.Close()

	start := time.Now()
	store := newStore(a.resolver)
	ls, err := check.LoadListings(lf, store, log)
	if err != nil {
		return err
	}
	snap := store.Snapshot()
	log.Info("listings applied", "lines", ls.Lines, "applied", ls.Applied, "bad", ls.Bad,
		"issues", ls.Issues, "registries", snap.Registries(), "signatures_compiled", store.Compiled())

	out := bufio.NewWriterSize(std.out, 1<<20)
	sum, err := check.Check(ctx, check.Config{Resolver: a.resolver, Workers: a.workers, ArgsKey: key}, snap, cf, out)
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write decisions: %w", ferr)
	}
	if err != nil {
		return err
	}
	if !a.quiet {
		printSummary(std.err, sum, a.resolver, time.Since(start))
	}
	return nil
}

func open(name string, stdin io.Reader) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(stdin), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open input: %w", err)
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("open input: %s is a directory", name)
	}
	return f, nil
}

func printSummary(w io.Writer, s check.Summary, r resolve.Resolver, took time.Duration) {
	printClasses(w, func(c schema.Class) int64 { return int64(s.ByClass[c]) }, int64(s.Calls))
	fmt.Fprintf(w, "mode %s, %d calls in %s\n", r.Policy(), s.Calls, took.Round(time.Millisecond))
}

// printClasses prints the count of calls per class and verdict, with
// their share of total, then the allowed and rejected ones.
func printClasses(w io.Writer, count func(schema.Class) int64, total int64) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	share := func(n int64) float64 { return 100 * float64(n) / float64(max(total, 1)) }
	fmt.Fprintf(tw, "class\tverdict\tcalls\tshare\t\n")
	for _, c := range schema.Classes {
		if n := count(c); n > 0 {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f%%\t\n", c, schema.VerdictOf(c), n, share(n))
		}
	}
	allow := count(schema.OK)
	fmt.Fprintf(tw, "allow\t\t%d\t%.2f%%\t\n", allow, share(allow))
	fmt.Fprintf(tw, "reject\t\t%d\t%.2f%%\t\n", total-allow, share(total-allow))
	fmt.Fprintf(tw, "total\t\t%d\t\t\n", total)
	tw.Flush()
}
