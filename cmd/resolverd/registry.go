package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals/history"
	"github.com/toolaudit/toolaudit/registry/diff"
	registryhistory "github.com/toolaudit/toolaudit/registry/history"
	"github.com/toolaudit/toolaudit/sink"
)

// registryHistory is run's recorder of the registry history, writing to
// ch; nil when --registry-history is off.
func registryHistory(a daemonArgs, ch *sink.ClickHouse, log *slog.Logger, reg prometheus.Registerer) (*registryhistory.Recorder, error) {
	if !a.history {
		return nil, nil
	}
	return registryhistory.New(ch, registryhistory.Options{Logger: log, Registerer: reg})
}

// approvalHistory is run's copy of the approvals topic into table
// approval_events (the history of the approved baseline beyond the
// topic's compaction), with --registry-history: the one instance that
// writes histories; nil when off.
func approvalHistory(a daemonArgs, opts []kgo.Opt, ch *sink.ClickHouse, log *slog.Logger, reg prometheus.Registerer) (*history.Recorder, error) {
	if !a.history {
		return nil, nil
	}
	return history.New(opts, *a.approvals.topic, ch, history.Options{Logger: log, Registerer: reg})
}

func registryCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd registry", flag.ContinueOnError)
	fs.SetOutput(std.err)
	c := &ffcli.Command{
		Name:        "registry",
		ShortUsage:  "resolverd registry <subcommand> [flags]",
		ShortHelp:   "the registry history (ClickHouse) and the approved definitions (Kafka)",
		FlagSet:     fs,
		Subcommands: append([]*ffcli.Command{registryDiffCommand(std)}, approvalCommands(std)...),
	}
	c.Exec = commandGroup(c)
	return c
}

func registryDiffCommand(std stdio) *ffcli.Command {
	fs := flag.NewFlagSet("resolverd registry diff", flag.ContinueOnError)
	fs.SetOutput(std.err)
	var ch chFlags
	ch.register(fs)
	registry := fs.String("registry", "", "`REGISTRY` whose history to show (required)")
	server := fs.String("server", "", "only this `SERVER`")
	tool := fs.String("tool", "", "only this `TOOL`")
	from := fs.String("from", "", "only changes observed at or after `TIME` (RFC 3339, or a duration before now: -24h)")
	to := fs.String("to", "", "only changes observed at or before `TIME` (RFC 3339, or a duration before now)")
	asJSON := fs.Bool("json", false, "one JSON object per change instead of text")
	limit := fs.Int("limit", 10000, "most changes shown (0: all)")
	return &ffcli.Command{
		Name:       "diff",
		ShortUsage: "resolverd registry diff --registry R [--server S] [--tool T] [--from TIME] [--to TIME] [--json]",
		ShortHelp:  "every listing change of a registry with its structured diff",
		LongHelp: `Prints the registry history that resolverd run records (table
registry_changes): every change a listing made to a tool of a server, in
event time, with a structured diff of the tool's definition: properties
added, removed and retyped, the required set, enum values, other
keywords; and trust changes. Exact: read with FINAL.`,
		FlagSet: fs,
		Options: []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 0 || *registry == "" {
				return usageError{fmt.Errorf("registry diff needs --registry R and no arguments")}
			}
			now := time.Now()
			f := sink.ChangeFilter{Registry: *registry, Server: *server, Tool: *tool}
			var err error
			// Bounds as reanalyze and diff read them; none when empty.
			if *from != "" {
				if f.From, err = parseWhen(*from, "--from", now); err != nil {
					return err
				}
			}
			if *to != "" {
				if f.To, err = parseWhen(*to, "--to", now); err != nil {
					return err
				}
			}
			if *limit < 0 {
				return usageError{fmt.Errorf("--limit %d: want 0 or more", *limit)}
			}
			cfg, err := ch.config(os.Getenv, slog.New(slog.NewTextHandler(std.err, nil)))
			if err != nil {
				return usageError{err}
			}
			c, err := sink.NewClickHouse(ctx, cfg)
			if err != nil {
				return fmt.Errorf("clickhouse: %w", err)
			}
			defer c.Close()
			cs, err := c.RegistryChanges(ctx, f, *limit)
			if err != nil {
				return err
			}
			if *asJSON {
				return writeChangesJSON(std.out, cs)
			}
			writeChanges(std.out, cs)
			return nil
		},
	}
}

// writeChanges prints the history as text: a line per change, then a
// line per entry of its diff. Digests are printed whole, as everywhere a
// person compares two (registry pending, lock --check, the M4 reasons):
// a cut one cannot be compared with a whole one.
func writeChanges(w io.Writer, cs []diff.Change) {
	if len(cs) == 0 {
		fmt.Fprintln(w, "no changes")
		return
	}
	for _, c := range cs {
		server := c.Server
		if server == "" {
			server = `""`
		}
		fmt.Fprintf(w, "%s  %s  %s  %s", c.ObservedAt.Format("2006-01-02T15:04:05.000Z"), server, c.Tool, c.Kind)
		switch c.Kind {
		case diff.Trust:
			fmt.Fprintf(w, "  trust %d -> %d", c.TrustBefore, c.TrustAfter)
		case diff.Changed:
			fmt.Fprintf(w, "  %s -> %s", c.DigestBefore, c.DigestAfter)
			if c.TrustBefore != c.TrustAfter {
				fmt.Fprintf(w, ", trust %d -> %d", c.TrustBefore, c.TrustAfter)
			}
		case diff.Added:
			fmt.Fprintf(w, "  %s", c.DigestAfter)
		case diff.Removed:
			fmt.Fprintf(w, "  %s", c.DigestBefore)
		}
		fmt.Fprintf(w, "  (listing %s)\n", c.EventID)
		writeDiff(w, &c.Diff)
	}
}

// writeDiff prints a structured diff, a line per entry.
func writeDiff(w io.Writer, d *diff.SchemaDiff) {
	for _, l := range []struct {
		mark  string
		items []string
	}{
		{"+ ", d.PropsAdded}, {"- ", d.PropsRemoved}, {"~ ", d.PropsRetyped},
		{"required + ", d.RequiredAdded}, {"required - ", d.RequiredRemoved},
		{"enum + ", d.EnumAdded}, {"enum - ", d.EnumRemoved}, {"", d.Other},
	} {
		for _, it := range l.items {
			fmt.Fprintf(w, "    %s%s\n", l.mark, it)
		}
	}
}

// changeJSON is a change as `registry diff --json` prints it.
type changeJSON struct {
	Registry     string    `json:"registry"`
	Server       string    `json:"server"`
	Tool         string    `json:"tool"`
	ObservedAt   time.Time `json:"observed_at"`
	EventID      string    `json:"event_id"`
	Change       string    `json:"change"`
	TrustBefore  int       `json:"trust_before"`
	TrustAfter   int       `json:"trust_after"`
	DigestBefore string    `json:"digest_before,omitempty"`
	DigestAfter  string    `json:"digest_after,omitempty"`

	// The diff's members, as registry pending --json prints them.
	diff.SchemaDiff
}

func writeChangesJSON(w io.Writer, cs []diff.Change) error {
	enc := json.NewEncoder(w)
	for _, c := range cs {
		if err := enc.Encode(changeJSON{c.Registry, c.Server, c.Tool, c.ObservedAt.UTC(), c.EventID, string(c.Kind),
			c.TrustBefore, c.TrustAfter, c.DigestBefore, c.DigestAfter, c.Diff}); err != nil {
			return err
		}
	}
	return nil
}
