package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	listingstopic "github.com/toolaudit/toolaudit/registry/topic"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/approvals/review"
	"github.com/toolaudit/toolaudit/approvals/topic"
	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
)

// exitDrift is `registry lock --check`'s exit status when a current
// definition is not approved by the lockfile.
const exitDrift = 3

func approvalCommands(std stdio) []*ffcli.Command {
	return []*ffcli.Command{
		registryLockCommand(std),
		registryPendingCommand(std),
		registryVerdictCommand(std, approvals.Approve),
		registryVerdictCommand(std, approvals.Reject),
		registryVerdictCommand(std, approvals.Revoke),
		registryPinCommand(std),
	}
}

// approvalFlags are the Kafka flags of the approval commands.
type approvalFlags struct {
	brokers kafkaconf.Brokers
	kafka   kafkaconf.Config
	topic   *string
	timeout *time.Duration
}

func (a *approvalFlags) register(fs *flag.FlagSet) {
	a.brokers.Register(fs, kafkaconf.DefaultBrokers, "")
	a.kafka.Register(fs)
	a.topic = fs.String("approvals-topic", topic.Default, "approvals `topic` (one partition, compacted)")
	a.timeout = fs.Duration("timeout", time.Minute, "give up after `DURATION`")
}

// start returns the Kafka options and the command's context, bounded by
// --timeout.
func (a *approvalFlags) start(ctx context.Context) ([]kgo.Opt, context.Context, context.CancelFunc, error) {
	o, err := a.kafka.Opts(os.Getenv)
	if err != nil {
		return nil, nil, nil, usageError{err}
	}
	ctx, cancel := context.WithTimeout(ctx, *a.timeout)
	return append([]kgo.Opt{kgo.SeedBrokers(a.brokers.List()...), kgo.ClientID("resolverd-registry")}, o...), ctx, cancel, nil
}

// listingSource is where the review commands read the current
// definitions: a listings file, else the listings topic.
type listingSource struct {
	file, topic, registries *string
}

func (l *listingSource) register(fs *flag.FlagSet) {
	l.file = fs.String("listings", "", "read the listings from this JSONL `FILE` instead of the listings topic")
	l.topic = fs.String("listings-topic", schema.TopicListings, "listings `topic` (read whole)")
	l.registries = fs.String("registry", "", "only these `REGISTRIES`, comma-separated (default: every registry listed)")
}

func (l *listingSource) load(ctx context.Context, opts []kgo.Opt, log *slog.Logger) (*review.Catalog, error) {
	cat := review.New()
	if *l.file != "" {
		st, err := check.LoadListingsFile(*l.file, cat, log)
		if err != nil {
			return nil, fmt.Errorf("listings: %w", err)
		}
		if st.Bad > 0 {
			return nil, fmt.Errorf("listings: %d bad listings in %s (logged): the current definitions are not known", st.Bad, *l.file)
		}
		return cat, nil
	}
	st, err := listingstopic.LoadListings(ctx, opts, *l.topic, cat, log)
	if err != nil {
		return nil, err
	}
	if bad := st.Bad; bad > 0 {
		log.Warn("bad listings skipped", "count", bad)
	}
	return cat, nil
}

// approvalFlagSet is the flag set of an approvals subcommand that reads
// the current listings: the approvals topic's flags and the listings'.
func approvalFlagSet(std stdio, name string) (*flag.FlagSet, *approvalFlags, *listingSource) {
	fs := flag.NewFlagSet("resolverd registry "+name, flag.ContinueOnError)
	fs.SetOutput(std.err)
	a, src := new(approvalFlags), new(listingSource)
	a.register(fs)
	src.register(fs)
	return fs, a, src
}

func commandLog(std stdio) *slog.Logger {
	return slog.New(slog.NewTextHandler(std.err, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func registryLockCommand(std stdio) *ffcli.Command {
	fs, a, src := approvalFlagSet(std, "lock")
	out := fs.String("out", "", "write the approved baseline to this lockfile `FILE` (- for stdout): the approvals topic's, or with --listings what registry pin would make it")
	check := fs.String("check", "", "exit 3 when a current definition is not approved by this lockfile `FILE`")
	imp := fs.String("import", "", "make the approvals topic's baseline this lockfile `FILE`'s")
	allowNew := fs.Bool("allow-new", false, "--check: let tools no definition of which the lockfile names pass (trust on first use)")
	by := fs.String("by", "", "--import: `WHO` imports (the reviewer of the revocations it writes); --out --listings: who pins")
	reason := fs.String("reason", "pinned on first use", "--out --listings: why: the `TEXT` of the pinned definitions")
	at := fs.String("at", "", "--out --listings: when the definitions are pinned, `TIME` RFC 3339 (default: now)")
	base := fs.String("base", "", "--out --listings: the lockfile `FILE` pinned onto (default: none, an empty baseline)")
	return &ffcli.Command{
		Name:       "lock",
		ShortUsage: "resolverd registry lock (--out FILE [--listings FILE --by WHO [--base FILE]] | --check FILE | --import FILE --by WHO) [flags]",
		ShortHelp:  "export, check or import the approved baseline as a lockfile, or make one offline",
		LongHelp: `The approved baseline (the approvals topic) as a lockfile: one JSON
object per reviewed definition (registry, server, tool, digest, state
approved or rejected, by, at, reason), sorted, so that it can live in a
repository and an approval be reviewed in a pull request.

--out FILE writes the approvals topic's baseline. --out FILE --listings
FILE --by WHO needs no Kafka: it writes the lockfile that registry pin
(by WHO, --reason, at --at) of every current definition of the listings
file (--registry: of those registries) then lock --out would give, on a
topic whose baseline is --base FILE's (default: empty): the offline way
to make or extend a lockfile in a pull request that adds a tool.
--check FILE reads the current definitions (the listings topic, or
--listings FILE) and exits 3, listing each with the approved digests and
the diff, when one is not approved by FILE: rejected, changed since the
approved one, or new (unless --allow-new). --import FILE writes to the
approvals topic the events that make its baseline FILE's: the file's
verdicts as they are, a revocation (by --by) of every definition the
file does not name.

A flag the chosen form does not read is a usage error (exit 2), not
ignored; the environment (RESOLVERD_*) is shared by every command and
is not checked.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			n := 0
			for _, f := range []string{*out, *check, *imp} {
				if f != "" {
					n++
				}
			}
			if len(args) > 0 || n != 1 {
				return usageError{errors.New("registry lock needs one of --out FILE, --check FILE, --import FILE and no arguments")}
			}
			offline := *out != "" && *src.file != ""
			form, uses := lockForm(*out != "", *check != "", offline, *src.file != "")
			if err := unusedFlags(fs, "registry lock "+form, uses); err != nil {
				return err
			}
			if (*imp != "" || offline) && *by == "" {
				return usageError{fmt.Errorf("registry lock %s needs --by WHO", form)}
			}
			log := commandLog(std)
			if offline {
				when := time.Now()
				if *at != "" {
					t, err := time.Parse(time.RFC3339Nano, *at)
					if err != nil {
						return usageError{fmt.Errorf("--at: %w", err)}
					}
					when = t
				}
				if *reason == "" {
					return usageError{errors.New("registry lock --out --listings needs a --reason")}
				}
				return lockOutOffline(std, src, *out, *base, *by, *reason, when.UTC().Truncate(time.Millisecond), log)
			}
			opts, ctx, cancel, err := a.start(ctx)
			if err != nil {
				return err
			}
			defer cancel()
			switch {
			case *out != "":
				return lockOut(ctx, std, opts, *a.topic, *out, log)
			case *check != "":
				return lockCheck(ctx, std, opts, src, *check, *allowNew, log)
			}
			return lockImport(ctx, std, opts, *a.topic, *imp, *by, log)
		},
	}
}

// lockForm names a form of registry lock and the flags it reads (beyond
// --timeout, which bounds every form): the Kafka ones where it reads
// Kafka, the listings' where it reads listings.
func lockForm(out, check, offline, listingsFile bool) (string, func(name string) bool) {
	kafka := func(name string) bool {
		return name == "brokers" || strings.HasPrefix(name, "kafka-")
	}
	in := func(names ...string) func(string) bool {
		return func(name string) bool { return name == "timeout" || slices.Contains(names, name) }
	}
	switch {
	case offline:
		u := in("out", "listings", "registry", "by", "reason", "at", "base")
		return "--out --listings", u
	case out:
		u := in("out", "approvals-topic")
		return "--out", func(n string) bool { return u(n) || kafka(n) }
	case check && listingsFile:
		return "--check --listings", in("check", "listings", "registry", "allow-new")
	case check:
		u := in("check", "listings-topic", "registry", "allow-new")
		return "--check", func(n string) bool { return u(n) || kafka(n) }
	}
	u := in("import", "by", "approvals-topic")
	return "--import", func(n string) bool { return u(n) || kafka(n) }
}

// unusedFlags refuses the flags given on the command line that a command's
// form does not read (uses): a flag silently ignored would let a user
// believe it took effect. A flag whose value is the environment's
// (RESOLVERD_<FLAG>) is not counted: the environment is shared by every
// command.
func unusedFlags(fs *flag.FlagSet, form string, uses func(string) bool) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if uses(f.Name) {
			return
		}
		env := os.Getenv("RESOLVERD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")))
		if env != "" && env == f.Value.String() {
			return
		}
		bad = append(bad, "--"+f.Name)
	})
	if len(bad) > 0 {
		return usageError{fmt.Errorf("%s does not read %s", form, strings.Join(bad, ", "))}
	}
	return nil
}

func loadBaseline(ctx context.Context, opts []kgo.Opt, t string, log *slog.Logger) (*approvals.Baseline, error) {
	set, st, err := topic.Load(ctx, opts, t, log)
	if err != nil {
		return nil, err
	}
	if st.Bad > 0 {
		log.Warn("bad approval events skipped", "count", st.Bad)
	}
	return set.Snapshot(), nil
}

// loadReview reads the approvals topic's baseline and the current
// definitions with their standing in it. A missing approvals topic is the
// empty baseline (before the first approval everything is new), said so
// that a misspelt topic is seen.
func loadReview(ctx context.Context, opts []kgo.Opt, t string, src *listingSource, log *slog.Logger) (*approvals.Baseline, []review.Item, error) {
	b, err := loadBaseline(ctx, opts, t, log)
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		log.Warn("no approvals topic: no definition is approved", "topic", t)
		b, err = nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	cat, err := src.load(ctx, opts, log)
	if err != nil {
		return nil, nil, err
	}
	items, err := cat.Review(b, splitList(*src.registries))
	return b, items, err
}

func readLockFile(path string) ([]*approvals.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return approvals.ReadLock(f)
}

func lockOut(ctx context.Context, std stdio, opts []kgo.Opt, t, path string, log *slog.Logger) error {
	b, err := loadBaseline(ctx, opts, t, log)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := approvals.WriteLock(&buf, b); err != nil {
		return err
	}
	if path == "-" {
		_, err = std.out.Write(buf.Bytes())
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(std.err, "%d definitions at baseline version %d written to %s\n", b.Len(), b.Version(), path)
	return nil
}

func lockCheck(ctx context.Context, std stdio, opts []kgo.Opt, src *listingSource, path string, allowNew bool, log *slog.Logger) error {
	es, err := readLockFile(path)
	if err != nil {
		return usageError{err}
	}
	b, err := approvals.LockBaseline(es)
	if err != nil {
		return usageError{err}
	}
	cat, err := src.load(ctx, opts, log)
	if err != nil {
		return err
	}
	items, err := cat.Review(b, splitList(*src.registries))
	if err != nil {
		return err
	}
	bad := 0
	for i := range items {
		it := &items[i]
		if it.Approval == schema.ApprovalApproved || (allowNew && it.Approval == schema.ApprovalNew) {
			continue
		}
		bad++
		writeItem(std.out, it)
	}
	if bad > 0 {
		return exitError{exitDrift, fmt.Errorf("%d of %d current definitions not approved by %s", bad, len(items), path)}
	}
	fmt.Fprintf(std.err, "all %d current definitions approved by %s\n", len(items), path)
	return nil
}

func lockImport(ctx context.Context, std stdio, opts []kgo.Opt, t, path, by string, log *slog.Logger) error {
	want, err := readLockFile(path)
	if err != nil {
		return usageError{err}
	}
	if err := topic.Ensure(ctx, opts, t); err != nil {
		return err
	}
	cur, err := loadBaseline(ctx, opts, t, log)
	if err != nil {
		return err
	}
	es := approvals.Sync(cur, want, by, time.Now())
	if len(es) == 0 {
		fmt.Fprintf(std.err, "the baseline is already %s's (version %d)\n", path, cur.Version())
		return nil
	}
	v, err := topic.Produce(ctx, opts, t, es...)
	if err != nil {
		return err
	}
	fmt.Fprintf(std.err, "%d approval events written: baseline version %d\n", len(es), v)
	return nil
}

// writeItem prints a definition and its standing, then the diff from the
// approved one.
func writeItem(w io.Writer, it *review.Item) {
	server := it.Server
	if server == "" {
		server = `""`
	}
	fmt.Fprintf(w, "%s  %s  %s  %s  %s", it.Registry, server, it.Tool, it.Approval, it.Digest)
	if len(it.Approved) > 0 {
		// Whole, as the current digest: the two are compared.
		fmt.Fprintf(w, "  (approved: %s)", strings.Join(it.Approved, ", "))
	}
	if it.Approval == schema.ApprovalRejected {
		fmt.Fprintf(w, "  rejected by %s: %s", it.By, it.Reason)
	}
	fmt.Fprintln(w)
	if it.Diff != nil {
		writeDiff(w, it.Diff)
	}
}

// itemJSON is a definition as `registry pending --json` prints it.
type itemJSON struct {
	Registry string   `json:"registry"`
	Server   string   `json:"server"`
	Tool     string   `json:"tool"`
	Digest   string   `json:"digest"`
	Approval string   `json:"approval"`
	Approved []string `json:"approved"`
	Base     string   `json:"diff_from,omitempty"`
	By       string   `json:"by,omitempty"`
	At       string   `json:"at,omitempty"`
	Reason   string   `json:"reason,omitempty"`

	// The diff's members, as registry diff --json prints them; nil: none.
	*diff.SchemaDiff
}

func writeItemJSON(enc *json.Encoder, it *review.Item) error {
	j := itemJSON{Registry: it.Registry, Server: it.Server, Tool: it.Tool, Digest: it.Digest, Approval: string(it.Approval),
		Approved: it.Approved, Base: it.Base, By: it.By, Reason: it.Reason, SchemaDiff: it.Diff}
	if j.Approved == nil {
		j.Approved = []string{}
	}
	if !it.At.IsZero() {
		j.At = it.At.UTC().Format(schema.TimeLayout)
	}
	return enc.Encode(j)
}

func registryPendingCommand(std stdio) *ffcli.Command {
	fs, a, src := approvalFlagSet(std, "pending")
	all := fs.Bool("all", false, "every current definition, approved and rejected ones too")
	asJSON := fs.Bool("json", false, "one JSON object per definition instead of text")
	return &ffcli.Command{
		Name:       "pending",
		ShortUsage: "resolverd registry pending [--registry R,...] [--all] [--json] [flags]",
		ShortHelp:  "current definitions waiting for approval, with the diff from the approved one",
		LongHelp: `Lists the current definitions (the newest listing of every server, from
the listings topic read whole, or --listings FILE) that the approved
baseline (the approvals topic) neither approves nor rejects: unapproved
(another definition of the tool is approved: the structured diff from the
most recently approved one follows) or new (none ever was). Approve or
reject one with resolverd registry approve|reject --digest D.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{errors.New("registry pending takes no arguments")}
			}
			opts, ctx, cancel, err := a.start(ctx)
			if err != nil {
				return err
			}
			defer cancel()
			b, items, err := loadReview(ctx, opts, *a.topic, src, commandLog(std))
			if err != nil {
				return err
			}
			enc, n := json.NewEncoder(std.out), 0
			for i := range items {
				it := &items[i]
				if !*all && !it.Pending() {
					continue
				}
				n++
				if *asJSON {
					if err := writeItemJSON(enc, it); err != nil {
						return err
					}
				} else {
					writeItem(std.out, it)
				}
			}
			if !*asJSON {
				fmt.Fprintf(std.err, "%d of %d current definitions shown, baseline version %d\n", n, len(items), b.Version())
			}
			return nil
		},
	}
}

func registryVerdictCommand(std stdio, verb approvals.Verb) *ffcli.Command {
	name := string(verb)
	fs := flag.NewFlagSet("resolverd registry "+name, flag.ContinueOnError)
	fs.SetOutput(std.err)
	var a approvalFlags
	a.register(fs)
	var e approvals.Event
	fs.StringVar(&e.Registry, "registry", "", "`REGISTRY` of the tool (required)")
	fs.StringVar(&e.Server, "server", "", "`SERVER` of the tool (empty: a single registry)")
	fs.StringVar(&e.Tool, "tool", "", "`TOOL` name (required)")
	fs.StringVar(&e.Digest, "digest", "", "the definition's contract `DIGEST`, sha256:… as registry pending shows it (required)")
	fs.StringVar(&e.DescriptionDigest, "description-digest", "", "also pin the description's `DIGEST` (reported, not enforced)")
	fs.StringVar(&e.By, "by", "", "`WHO` decides (required)")
	fs.StringVar(&e.Reason, "reason", "", "why: a `TEXT` the audit keeps (required)")
	help := map[approvals.Verb]string{
		approvals.Approve: "approve a tool definition: calls to it pass under --approvals block",
		approvals.Reject:  "reject a tool definition: it stops waiting, and stays refused under block",
		approvals.Revoke:  "withdraw the verdict on a tool definition",
	}[verb]
	return &ffcli.Command{
		Name:       name,
		ShortUsage: "resolverd registry " + name + " --registry R [--server S] --tool T --digest D --by WHO --reason TEXT [flags]",
		ShortHelp:  help,
		LongHelp: `Writes one approval event to the approvals topic (created, one partition
and compacted, when missing): every resolverd run, gateway and reanalyze
that reads the topic decides with it. Prints the new baseline version.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("registry %s takes no arguments", name)}
			}
			if e.Reason == "" {
				return usageError{fmt.Errorf("registry %s needs --reason TEXT", name)}
			}
			e.Verb, e.At = verb, time.Now().UTC().Truncate(time.Millisecond)
			e.EventID = fmt.Sprintf("approval-%d", e.At.UnixNano())
			if err := e.Validate(); err != nil {
				return usageError{fmt.Errorf("registry %s: %w", name, err)}
			}
			opts, ctx, cancel, err := a.start(ctx)
			if err != nil {
				return err
			}
			defer cancel()
			if err := topic.Ensure(ctx, opts, *a.topic); err != nil {
				return err
			}
			v, err := topic.Produce(ctx, opts, *a.topic, &e)
			if err != nil {
				return err
			}
			fmt.Fprintf(std.out, "%s %s %s %s %s: baseline version %d\n", verb, e.Registry, e.Server, e.Tool, e.Digest, v)
			return nil
		},
	}
}

func registryPinCommand(std stdio) *ffcli.Command {
	fs, a, src := approvalFlagSet(std, "pin")
	by := fs.String("by", "", "`WHO` pins (required)")
	reason := fs.String("reason", "pinned on first use", "why: a `TEXT` the audit keeps")
	return &ffcli.Command{
		Name:       "pin",
		ShortUsage: "resolverd registry pin --by WHO [--registry R,...] [--reason TEXT] [flags]",
		ShortHelp:  "approve the current definition of every tool never approved (trust on first use, pinned)",
		LongHelp: `Approves, in one approval event each, the current definition of every
tool no definition of which was ever approved or rejected (what registry
pending lists as new): the pin of trust on first use, made explicit, so
that every instance pins the same definitions and a later change of
them is unapproved. Prints each and the new baseline version.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 || *by == "" || *reason == "" {
				return usageError{errors.New("registry pin needs --by WHO, a --reason and no arguments")}
			}
			opts, ctx, cancel, err := a.start(ctx)
			if err != nil {
				return err
			}
			defer cancel()
			if err := topic.Ensure(ctx, opts, *a.topic); err != nil {
				return err
			}
			b, items, err := loadReview(ctx, opts, *a.topic, src, commandLog(std))
			if err != nil {
				return err
			}
			es := pinEvents(b, items, *by, *reason, time.Now().UTC().Truncate(time.Millisecond), func(it *review.Item) { writeItem(std.out, it) })
			if len(es) == 0 {
				fmt.Fprintf(std.err, "nothing new to pin (baseline version %d)\n", b.Version())
				return nil
			}
			v, err := topic.Produce(ctx, opts, *a.topic, es...)
			if err != nil {
				return err
			}
			fmt.Fprintf(std.err, "%d definitions pinned: baseline version %d\n", len(es), v)
			return nil
		},
	}
}

// pinEvents returns the approval, by by at at, of the current definition
// of every tool of items never reviewed in b (what registry pending lists
// as new), calling pinned for each: registry pin's events, and the offline
// lockfile's.
func pinEvents(b *approvals.Baseline, items []review.Item, by, reason string, at time.Time, pinned func(*review.Item)) []*approvals.Event {
	var es []*approvals.Event
	for i := range items {
		it := &items[i]
		if it.Approval != schema.ApprovalNew || len(b.Tool(it.Registry, it.Server, it.Tool)) > 0 {
			continue // reviewed before, either way
		}
		es = append(es, &approvals.Event{EventID: fmt.Sprintf("pin-%d-%d", at.UnixNano(), len(es)), Registry: it.Registry, Server: it.Server,
			Tool: it.Tool, Digest: it.Digest, Verb: approvals.Approve, By: by, At: at, Reason: reason})
		pinned(it)
	}
	return es
}

// lockOutOffline writes, with no Kafka, the lockfile that registry pin of
// the listings file's current definitions onto base's baseline (a
// lockfile; "": empty), then lock --out, would give.
func lockOutOffline(std stdio, src *listingSource, path, base, by, reason string, at time.Time, log *slog.Logger) error {
	var es []*approvals.Event
	if base != "" {
		var err error
		if es, err = readLockFile(base); err != nil {
			return usageError{fmt.Errorf("--base: %w", err)}
		}
	}
	var set approvals.Set
	apply := func(es []*approvals.Event) error {
		for _, e := range es {
			if err := set.Apply(e, set.Version()+1); err != nil {
				return fmt.Errorf("approval of %s %s %s: %w", e.Registry, e.Server, e.Tool, err)
			}
		}
		return nil
	}
	if err := apply(es); err != nil {
		return usageError{fmt.Errorf("--base %s: %w", base, err)}
	}
	cat, err := src.load(context.Background(), nil, log)
	if err != nil {
		return err
	}
	b := set.Snapshot()
	items, err := cat.Review(b, splitList(*src.registries))
	if err != nil {
		return err
	}
	pins := pinEvents(b, items, by, reason, at, func(*review.Item) {})
	if err := apply(pins); err != nil {
		return err
	}
	b = set.Snapshot()
	var buf bytes.Buffer
	if err := approvals.WriteLock(&buf, b); err != nil {
		return err
	}
	if path == "-" {
		_, err = std.out.Write(buf.Bytes())
	} else {
		err = os.WriteFile(path, buf.Bytes(), 0o644)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(std.err, "%d definitions pinned, %d in all, written to %s\n", len(pins), b.Len(), path)
	return nil
}
