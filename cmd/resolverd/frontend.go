package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/peterbourgon/ff/v3"
	"github.com/peterbourgon/ff/v3/ffcli"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/kafkaconf"
)

// frontEndFlags are the flags of the call path's HTTP front ends
// (gateway, proxy): their configuration, listener, Kafka and audit topic,
// TLS, connection bound, and the common and tracing flags.
type frontEndFlags struct {
	commonFlags
	config, listen  string
	brokers         kafkaconf.Brokers
	kafka           kafkaconf.Config
	auditTopic      string
	auditTimeout    time.Duration
	tlsCert, tlsKey string
	maxConns        int
	trace           traceFlags
}

// frontEnd is what one front end's command says of itself.
type frontEnd struct {
	name, shortHelp, longHelp string
	// listen is the default --listen, serves what it serves there.
	listen, serves string
	// decided is what happens to a decision once recorded ("the call is
	// rejected or forwarded"), refused what is refused without the
	// acknowledgement ("the call").
	decided, refused string
	memLimitMB       int64
	gcPercent        int
}

// register adds the front end's flags to fs.
func (f *frontEndFlags) register(fs *flag.FlagSet, fe frontEnd) {
	fs.StringVar(&f.config, "config", "", fe.name+" configuration `FILE` (YAML or JSON)")
	fs.StringVar(&f.listen, "listen", fe.listen, "HTTP listen `address`: "+fe.serves)
	f.brokers.Register(fs, kafkaconf.DefaultBrokers, "empty: no Kafka, no audit trail; development only")
	f.kafka.Register(fs)
	fs.StringVar(&f.auditTopic, "audit-topic", audit.DefaultTopic, "audit `topic`: every decision is produced there, and acknowledged, before "+fe.decided+" (resolverd run stores them)")
	fs.DurationVar(&f.auditTimeout, "audit-timeout", 5*time.Second, "longest wait for the audit topic's acknowledgement before "+fe.refused+" is refused (at least 1s)")
	fs.StringVar(&f.tlsCert, "http-tls-cert", "", "PEM certificate `FILE`: with --http-tls-key, HTTPS only (reloaded on SIGHUP)")
	fs.StringVar(&f.tlsKey, "http-tls-key", "", "PEM private key `FILE` of --http-tls-cert")
	fs.IntVar(&f.maxConns, "http-max-conns", httpapi.DefaultMaxConns, "most HTTP connections open at once (more are answered 503 and closed)")
	f.commonFlags.register(fs, fe.memLimitMB, fe.gcPercent, commonHelp{})
	f.trace.register(fs, "resolverd-"+fe.name)
}

// command is the front end's command: it checks the flags (start),
// loads --config with load, sets the runtime's memory settings and calls
// run. A start-up cut short by a signal is not an error.
func (f *frontEndFlags) command(std stdio, fs *flag.FlagSet, fe frontEnd, load func(path string) error, run func(context.Context, *slog.Logger) error) *ffcli.Command {
	return &ffcli.Command{
		Name:       fe.name,
		ShortUsage: "resolverd " + fe.name + " --config FILE [flags]",
		ShortHelp:  fe.shortHelp,
		LongHelp:   fe.longHelp,
		FlagSet:    fs,
		Options:    []ff.Option{ff.WithEnvVarPrefix("RESOLVERD")},
		Exec: func(ctx context.Context, args []string) error {
			log, err := f.start(args, std.err)
			if err != nil {
				return err
			}
			if err := load(f.config); err != nil {
				return usageError{err}
			}
			f.limitMemory()
			err = run(ctx, log)
			if err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
				log.Info(fe.name+" stopped during start-up", "err", err)
				return nil
			}
			return err
		},
	}
}

// start checks what a front end checks before it starts (no arguments,
// --config given, the common flags, --audit-timeout, TLS,
// --http-max-conns) and returns the command's logger.
func (f *frontEndFlags) start(args []string, w io.Writer) (*slog.Logger, error) {
	if len(args) > 0 {
		return nil, usageError{fmt.Errorf("unexpected arguments %q", args)}
	}
	if f.config == "" {
		return nil, usageError{errors.New("needs --config FILE")}
	}
	log, err := f.logger(w)
	if err != nil {
		return nil, err
	}
	switch {
	case f.auditTimeout < time.Second:
		return nil, usageError{fmt.Errorf("--audit-timeout %v: at least 1s", f.auditTimeout)}
	case (f.tlsCert == "") != (f.tlsKey == ""):
		return nil, usageError{errors.New("--http-tls-cert and --http-tls-key go together")}
	case f.maxConns <= 0:
		return nil, usageError{errors.New("--http-max-conns must be positive")}
	}
	return log, nil
}

// checkTopics waits for a broker (failing at once on a refused TLS or
// SASL) and checks that the topics exist: every listing and decision
// would fail otherwise.
func (f *frontEndFlags) checkTopics(ctx context.Context, log *slog.Logger, cl *kgo.Client, topics ...string) error {
	cctx, cancel := context.WithTimeout(ctx, f.connectTimeout)
	defer cancel()
	if err := f.kafka.Check(cctx, cl); err != nil {
		return fmt.Errorf("kafka %s: %w", f.brokers, err)
	}
	td, err := kadm.NewClient(cl).ListTopics(cctx, topics...)
	if err != nil {
		return fmt.Errorf("kafka: list topics: %w", err)
	}
	for _, t := range topics {
		if !td.Has(t) || td[t].Err != nil {
			return fmt.Errorf("kafka: topic %s does not exist (create it, or name another)", t)
		}
	}
	log.Info("kafka connected", append([]any{"brokers", f.brokers.String(), "topics", topics}, f.kafka.Describe()...)...)
	return nil
}
