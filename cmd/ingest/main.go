// Command ingest turns agent logs into toolaudit's contract events and
// produces them to Kafka (or writes them as JSONL with --dry-run / --out).
// Run ingest --help for the flags and the envelope format; the conversion
// itself lives in package ingest.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/toolaudit/toolaudit/ingest"
	"github.com/toolaudit/toolaudit/kafkaconf"
	"github.com/toolaudit/toolaudit/schema"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, term.IsTerminal(int(os.Stderr.Fd())))
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // a file could not be read, or Kafka/output failed
	exitUsage   = 2
)

// longHelp follows the USAGE line of --help, laid out by ffcli as
// resolverd's and htb's are.
const longHelp = `Reads agent logs (FILE, or standard input when none or "-") one JSON object
per line, converts tool calls and tool listings to toolaudit's contract
events and produces them to Kafka: calls to --calls-topic keyed by session_id
(else agent_id), listings to --listings-topic keyed by "registry/server",
each record stamped with the event's own time (a contract event whose
time is unusable: that of the event before it in its file, else the
time of ingestion). The producer is idempotent
with acks=all. --dry-run (or --out) writes the events as JSONL instead.

Formats, detected per line unless --format forces one:
  event      the contract's own call/listing events, passed through unchanged
  openai     Chat Completions responses (choices[].message.tool_calls) or
             assistant messages; arguments that are not valid JSON go to
             arguments_raw
  anthropic  Messages responses, messages or tool_use / mcp_tool_use blocks
  bedrock    Converse responses (output.message.content[].toolUse), messages
             or {"toolUse":...} blocks
  mcp        JSON-RPC tools/call requests (calls) and tools/list results
             (snapshot listings; pages chained by nextCursor for the same
             registry/server are merged; an unfinished chain is an error)
  otel       OTLP/JSON exports, traces or logs: the tool calls a model
             returned (gen_ai.output.messages, gen_ai.choice events,
             OpenInference llm.output_messages), execute_tool and MCP
             tools/call spans (one call for a model's call and its
             execute_tool span); tool definitions (gen_ai.tool.definitions,
             llm.tools) become a listing of their own registry
             (REGISTRY:tools-HEX), MCP tools/list spans listings; calls
             without recorded arguments say so (arguments_recorded false)

Envelope: a provider object may be wrapped to give the context it lacks:
  {"emitted_at":"2026-11-29T10:00:05.250Z", "registry":"fleet-a",
   "agent_id":"a-7", "session_id":"s-19", "model":"gpt-4o",
   "provider":"openai", "surface":"raw_json", "server":"github", "trust":1,
   "visible":["create_issue"], "seen_digests":{"create_issue":"sha256:..."},
   "openai": {...provider object...}}
The provider key is one of openai, anthropic, bedrock, mcp, otel; all other
fields are optional ("observed_at" is an alias of "emitted_at", used for
listings; "" means not given). Each field comes from the envelope, else the
provider object (OpenAI created/model, Anthropic model, OTel attributes and
span start), else the flags below, else the format's fallback (provider
openai/anthropic/bedrock; surface mcp for MCP, raw_json otherwise). A call
with no time at all is an error: give emitted_at or --emitted-at.

Event ids are deterministic and never shared by two calls: a call's is a
hash of (source name, line number, index in the line, the line's text),
led by the provider's tool-call id when there is one ("call_abc~" and 16
hex digits; else "c-" and 20), so re-ingesting a file under the same name
gives the same events, and two calls never share an id even where the
provider's ids repeat. The source name is FILE as given (cleaned), or
--stdin-name. Contract events keep their own event_id.

An event_id repeated in a run is counted: with the same content, it is
the same event twice (the store keeps one); with other content, it is
reported as FILE:LINE (the store keeps one decision per id: one call
would be lost) and the exit status is 1.

Bad lines are reported as FILE:LINE: reason, counted and skipped. The exit
status is 1 when a file cannot be read, Kafka (or --out) fails, or an
event_id was repeated with other content, and 2 for bad flags. Every flag can also be set through the environment as
INGEST_<FLAG> (upper case, "-" as "_"), e.g. INGEST_BROKERS.

Secured Kafka: --kafka-tls (with --kafka-tls-ca, --kafka-tls-cert and
--kafka-tls-key for a private CA or client certificates) and
--kafka-sasl-mechanism: plain and SCRAM with --kafka-sasl-user and a
password from --kafka-sasl-password-file or the
TOOLAUDIT_KAFKA_SASL_PASSWORD variable; oauthbearer with
--kafka-sasl-oauth-token-url, --kafka-sasl-oauth-client-id and a client
secret from --kafka-sasl-oauth-client-secret-file or the
TOOLAUDIT_KAFKA_SASL_OAUTH_CLIENT_SECRET variable; aws-msk-iam with the
AWS credential chain (static AWS_* variables, web identity, container or
instance role). Secrets never come from a flag (ps shows them); prefer
the files: a process's environment can be read in /proc/PID/environ by
the same user's other processes and by root. resolverd takes the same
flags.`

// config is what the flags say.
type config struct {
	brokers         kafkaconf.Brokers
	callsTopic      string
	listingsTopic   string
	format          string
	dryRun          bool
	out             string
	registry        string
	agent           string
	session         string
	model           string
	provider        string
	surface         string
	server          string
	trust           int
	emittedAt       string
	visible         string
	stdinName       string
	progress        bool
	connectTimeout  time.Duration
	deliveryTimeout time.Duration
	maxLineBytes    int
	maxTrackedIDs   int
	kafka           kafkaconf.Config
}

func newFlagSet(stderr io.Writer) (*flag.FlagSet, *config) {
	c := &config{}
	fs := flag.NewFlagSet("ingest", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.brokers.Register(fs, "", "required unless --dry-run or --out")
	fs.StringVar(&c.callsTopic, "calls-topic", schema.TopicCalls, "`topic` of call events")
	fs.StringVar(&c.listingsTopic, "listings-topic", schema.TopicListings, "`topic` of listing events")
	fs.StringVar(&c.format, "format", "auto", "input `format`: auto (detect per line), event, openai, anthropic, bedrock, mcp, otel")
	fs.BoolVar(&c.dryRun, "dry-run", false, "write the events as JSONL to standard output instead of Kafka (same as --out -)")
	fs.StringVar(&c.out, "out", "", `write the events as JSONL to `+"`FILE`"+` ("-" = standard output) instead of Kafka`)
	fs.StringVar(&c.registry, "registry", "", "`REGISTRY` of provider-format events that carry none")
	fs.StringVar(&c.agent, "agent", "", "agent_id (`ID`) of calls that carry none")
	fs.StringVar(&c.session, "session", "", "session_id (`ID`) of calls that carry none")
	fs.StringVar(&c.model, "model", "", "`MODEL` of calls that carry none")
	fs.StringVar(&c.provider, "provider", "", "`PROVIDER` of calls that carry none (else the format's: openai, anthropic, bedrock)")
	fs.StringVar(&c.surface, "surface", "", "`SURFACE` of calls that carry none (else mcp for MCP, raw_json for the others)")
	fs.StringVar(&c.server, "server", "", "`SERVER` of calls and MCP tools/list listings that carry none (none: a single registry)")
	fs.IntVar(&c.trust, "trust", 0, "trust `tier` of MCP listings that carry none")
	fs.StringVar(&c.emittedAt, "emitted-at", "", "`TIME` (RFC 3339, or \"now\") of provider objects that carry none")
	fs.StringVar(&c.visible, "visible", "", "visible tool `NAMES`, comma-separated, of calls that carry none")
	fs.StringVar(&c.stdinName, "stdin-name", "stdin", "source `name` of standard input in hashed event ids and messages")
	fs.BoolVar(&c.progress, "progress", false, "show a progress bar even when standard error is not a terminal")
	fs.DurationVar(&c.connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for a Kafka broker to answer at start (a refused TLS handshake or SASL authentication fails at once)")
	fs.DurationVar(&c.deliveryTimeout, "delivery-timeout", 60*time.Second, "how long a record may take, retries included, before it fails")
	fs.IntVar(&c.maxLineBytes, "max-line-bytes", ingest.DefaultMaxLineBytes, "longest input line in `bytes`; longer lines are errors")
	fs.IntVar(&c.maxTrackedIDs, "max-tracked-ids", ingest.DefaultMaxTrackedIDs, "most event `ids` remembered to find repeats (about 40 bytes each); later ones are counted, not checked")
	c.kafka.Register(fs)
	cmd := &ffcli.Command{
		Name:       "ingest",
		ShortUsage: "ingest [flags] [FILE ...]",
		ShortHelp:  "turn agent logs into contract events and produce them to Kafka",
		LongHelp:   longHelp,
		FlagSet:    fs,
	}
	fs.Usage = func() { fmt.Fprint(stderr, ffcli.DefaultUsageFunc(cmd)) }
	return fs, c
}

// run is the whole command; isTerm tells whether stderr is a terminal.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, isTerm bool) int {
	fs, c := newFlagSet(stderr)
	if err := ff.Parse(fs, args, ff.WithEnvVarPrefix("INGEST")); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		return exitUsage
	}
	format, err := ingest.ParseFormat(c.format)
	if err != nil {
		fmt.Fprintf(stderr, "ingest: --format: %v\n", err)
		return exitUsage
	}
	defaults, err := c.defaults()
	if err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		return exitUsage
	}
	if c.dryRun && c.out == "" {
		c.out = "-"
	}
	files := fs.Args()
	if len(files) == 0 {
		files = []string{"-"}
	}

	sink, finish, err := c.openSink(ctx, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		if errors.Is(err, errUsage) {
			return exitUsage
		}
		return exitFailure
	}

	var bar *progressbar.ProgressBar
	report := func(kind string, e *ingest.LineError) {
		if bar != nil {
			_ = bar.Clear()
		}
		fmt.Fprintf(stderr, "%s%v\n", kind, e)
	}
	in := &ingest.Ingester{
		Sink:          sink,
		Format:        format,
		Defaults:      defaults,
		MaxLineBytes:  c.maxLineBytes,
		MaxTrackedIDs: c.maxTrackedIDs,
		OnError:       func(e *ingest.LineError) { report("", e) },
		OnWarning:     func(e *ingest.LineError) { report("warning: ", e) },
	}

	var total ingest.Stats
	failed := false
	for _, name := range files {
		if ctx.Err() != nil {
			break
		}
		source, r, size, closeFn, err := c.open(name, stdin)
		if err != nil {
			fmt.Fprintf(stderr, "ingest: %v\n", err)
			failed = true
			continue
		}
		if isTerm || c.progress {
			bar = newBar(stderr, source, size)
			r = io.TeeReader(r, bar)
		}
		st, err := in.Ingest(ctx, source, r)
		closeFn()
		if bar != nil {
			_ = bar.Finish()
			bar = nil
		}
		total.Add(st)
		if err != nil {
			fmt.Fprintf(stderr, "ingest: %s: %v\n", source, err)
			failed = true
			if !errors.Is(err, ingest.ErrRead) {
				break // the sink failed or we were stopped: the next file would fail too
			}
		}
	}

	delivered, err := finish()
	if err != nil {
		fmt.Fprintf(stderr, "ingest: %v\n", err)
		failed = true
	}
	summary(stderr, len(files), total, delivered, c)
	if total.Conflicts > 0 {
		failed = true
	}
	if failed {
		return exitFailure
	}
	return exitOK
}

var errUsage = errors.New("usage")

// openSink builds the sink: JSONL to --out, or the Kafka producer after a
// ping. finish flushes and closes it and says what was delivered.
func (c *config) openSink(ctx context.Context, stdout, stderr io.Writer) (ingest.Sink, func() (map[string]int64, error), error) {
	if c.out != "" {
		dest := c.out
		if dest == "-" {
			dest = "standard output"
		}
		fmt.Fprintf(stderr, "ingest: writing events as JSONL to %s\n", dest)
		w, closeOut := stdout, func() error { return nil }
		if c.out != "-" {
			f, err := os.Create(c.out)
			if err != nil {
				return nil, nil, fmt.Errorf("--out: %w", err)
			}
			w, closeOut = f, f.Close
		}
		s := ingest.NewJSONLSink(w)
		return s, func() (map[string]int64, error) {
			err := s.Flush(context.Background())
			if cerr := closeOut(); err == nil && cerr != nil {
				err = fmt.Errorf("close --out: %w", cerr)
			}
			return nil, err
		}, nil
	}
	cfg := ingest.DefaultProducerConfig()
	cfg.Brokers = c.brokers.List()
	if len(cfg.Brokers) == 0 {
		return nil, nil, fmt.Errorf("%w: --brokers (or INGEST_BROKERS) is required unless --dry-run or --out", errUsage)
	}
	cfg.CallsTopic, cfg.ListingsTopic = c.callsTopic, c.listingsTopic
	cfg.DeliveryTimeout = c.deliveryTimeout
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, nil))
	c.kafka.Log = cfg.Logger
	sec, err := c.kafka.Opts(os.Getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	p, err := ingest.NewProducer(cfg, sec...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errUsage, err)
	}
	pctx, cancel := context.WithTimeout(ctx, c.connectTimeout)
	err = c.kafka.Check(pctx, p)
	cancel()
	if err != nil {
		p.Close()
		return nil, nil, fmt.Errorf("brokers %s: %w", c.brokers, err)
	}
	fmt.Fprintf(stderr, "ingest: producing to %s (calls %s, listings %s)\n", strings.Join(cfg.Brokers, ","), cfg.CallsTopic, cfg.ListingsTopic)
	return p, func() (map[string]int64, error) {
		// Flush even after an interrupt: what was converted is delivered,
		// within the delivery timeout.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.deliveryTimeout+5*time.Second)
		defer cancel()
		err := p.Flush(fctx)
		d := p.Delivered()
		p.Close()
		return d, err
	}, nil
}

// open opens one input; "-" is stdin. size is -1 when unknown.
func (c *config) open(name string, stdin io.Reader) (source string, r io.Reader, size int64, closeFn func(), err error) {
	if name == "-" {
		return c.stdinName, stdin, -1, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return "", nil, 0, nil, fmt.Errorf("open: %w", err)
	}
	size = -1
	if fi, err := f.Stat(); err == nil {
		if fi.IsDir() {
			f.Close()
			return "", nil, 0, nil, fmt.Errorf("%s: is a directory", name)
		}
		if fi.Mode().IsRegular() {
			size = fi.Size()
		}
	}
	return filepath.Clean(name), f, size, func() { f.Close() }, nil
}

func newBar(w io.Writer, desc string, size int64) *progressbar.ProgressBar {
	return progressbar.NewOptions64(size,
		progressbar.OptionSetSpinnerChangeInterval(0), // no ticking goroutine for stdin's spinner
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionShowBytes(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionUseANSICodes(true),
	)
}

// defaults turns the context flags into the ingest defaults.
func (c *config) defaults() (ingest.Meta, error) {
	trust := c.trust
	m := ingest.Meta{
		Registry:  c.registry,
		AgentID:   c.agent,
		SessionID: c.session,
		Model:     c.model,
		Provider:  c.provider,
		Surface:   c.surface,
		Server:    c.server,
		Trust:     &trust,
		Visible:   splitList(c.visible),
	}
	switch c.emittedAt {
	case "":
	case "now":
		m.Time = time.Now().UTC()
	default:
		t, err := time.Parse(time.RFC3339Nano, c.emittedAt)
		if err != nil {
			return m, fmt.Errorf("--emitted-at: %w", err)
		}
		m.Time = t
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// summary prints what was done.
func summary(w io.Writer, files int, st ingest.Stats, delivered map[string]int64, c *config) {
	fmt.Fprintf(w, "ingest: %d file(s), %d lines: %d events (%s %d, %s %d), %d without event, %d errors, %d warnings\n",
		files, st.Lines, st.EventCount(),
		c.callsTopic, st.Events[ingest.KindCall], c.listingsTopic, st.Events[ingest.KindListing],
		st.NoEvent, st.Errors, st.Warnings)
	var parts []string
	for _, f := range ingest.Formats() {
		if st.LineFormats[f] > 0 || st.Formats[f] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d lines/%d events", f, st.LineFormats[f], st.Formats[f]))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "ingest: by format: %s\n", strings.Join(parts, ", "))
	}
	if st.Repeats > 0 {
		fmt.Fprintf(w, "ingest: %d events repeated an earlier event exactly (same event_id, same content): the store keeps one of each\n", st.Repeats)
	}
	if st.Conflicts > 0 {
		fmt.Fprintf(w, "ingest: %d events repeated an earlier event_id with other content (listed above): the store keeps one decision per event_id, so %d calls or listings will be lost; give them distinct ids\n", st.Conflicts, st.Conflicts)
	}
	if st.Untracked > 0 {
		fmt.Fprintf(w, "ingest: %d events past --max-tracked-ids %d were not checked for repeated ids\n", st.Untracked, c.maxTrackedIDs)
	}
	if delivered != nil {
		topics := make([]string, 0, len(delivered))
		for t := range delivered {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		parts = parts[:0]
		for _, t := range topics {
			parts = append(parts, fmt.Sprintf("%s %d", t, delivered[t]))
		}
		if len(parts) == 0 {
			parts = append(parts, "nothing")
		}
		fmt.Fprintf(w, "ingest: delivered to Kafka: %s\n", strings.Join(parts, ", "))
	}
}
