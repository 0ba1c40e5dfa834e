package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/approvals/approvalsapi"
	"github.com/toolaudit/toolaudit/approvals/topic"
	"github.com/toolaudit/toolaudit/internal/bearer"
)

// gateFlags are the approvals policy flags of the commands that decide
// calls, so that they decide alike: --approvals, and where the baseline
// comes from: the approvals topic (run, gateway) or a lockfile (check).
type gateFlags struct {
	policy, topic, lock *string
	approvers           *string // run: --http-approvers-file
	// embedded: the brokers are run --embedded's own, in this process, so
	// a missing approvals topic is created by follow (see there).
	embedded bool
}

const approvalsPolicyHelp = "approvals `POLICY`: off, warn (decide as without, mark the decision) or block (a definition not approved is M4), " +
	"+tofu (default: a tool never approved passes, marked new) or +hold, per registry or server: warn,prod=block+hold,prod/legacy=off"

// registerLive registers --approvals and --approvals-topic.
func (f *gateFlags) registerLive(fs *flag.FlagSet) {
	f.policy = fs.String("approvals", "off", approvalsPolicyHelp)
	f.topic = fs.String("approvals-topic", topic.Default, "approvals `topic` the baseline is read from and followed (--approvals not off)")
}

// registerApprovers registers run's --http-approvers-file (after
// registerLive: the approvals go to --approvals-topic).
func (f *gateFlags) registerApprovers(fs *flag.FlagSet) {
	f.approvers = fs.String("http-approvers-file", "", "bearer tokens `FILE` of the approvers (the format of --http-tokens-file): POST /v1/approvals takes an approval, rejection or revocation from them, recorded by the token's name in --approvals-topic; reloaded when it changes")
}

// validateHTTP refuses --http-approvers-file without the HTTP API it
// would be served on: an approvals endpoint asked for must not be
// silently absent.
func (f *gateFlags) validateHTTP(addr string) error {
	if f.approvers != nil && *f.approvers != "" && addr == "" {
		return usageError{errors.New("--http-approvers-file needs --http (POST /v1/approvals is served there)")}
	}
	return nil
}

// mount serves POST /v1/approvals beside the API h when
// --http-approvers-file is set (creating the approvals topic if needed);
// apiTokens (--http-tokens-file; nil: none) tell a token that is valid
// but not an approver's (403) from an invalid one (401).
func (f *gateFlags) mount(ctx context.Context, g *errgroup.Group, h http.Handler, apiTokens *bearer.Tokens, opts []kgo.Opt, log *slog.Logger, reg prometheus.Registerer) (http.Handler, error) {
	if f.approvers == nil || *f.approvers == "" {
		return h, nil
	}
	tokens, err := bearer.Load(*f.approvers, log)
	if err != nil {
		return nil, usageError{fmt.Errorf("--http-approvers-file: %w", err)}
	}
	g.Go(func() error { tokens.Watch(ctx, 2*time.Second); return nil })
	if err := topic.Ensure(ctx, opts, *f.topic); err != nil {
		return nil, err
	}
	t := *f.topic
	ah, err := approvalsapi.New(approvalsapi.Config{Approvers: tokens, Tokens: apiTokens, Logger: log, Registerer: reg,
		Write: func(ctx context.Context, e *approvals.Event) (int64, error) { return topic.Produce(ctx, opts, t, e) }})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle(approvalsapi.Path, ah)
	mux.Handle("/", h)
	log.Info("approvals API on", "path", approvalsapi.Path, "approvers", tokens.Len(), "topic", t)
	return mux, nil
}

// registerOffline registers --approvals and --approvals-lock.
func (f *gateFlags) registerOffline(fs *flag.FlagSet) {
	f.policy = fs.String("approvals", "off", approvalsPolicyHelp)
	f.lock = fs.String("approvals-lock", "", "the approved baseline: a lockfile `FILE` (resolverd registry lock --out); required when --approvals is not off")
}

// registerReanalysis registers --approvals, --approvals-topic and
// --approvals-lock: a re-analysis decides against a lockfile or the
// topic's current baseline, read once.
func (f *gateFlags) registerReanalysis(fs *flag.FlagSet) {
	f.registerOffline(fs)
	f.topic = fs.String("approvals-topic", topic.Default, "approvals `topic` whose current baseline decides the window (--approvals not off, no --approvals-lock)")
}

// once reads the approvals topic's current baseline into g, unless a
// lockfile gave it: one baseline version for a whole re-analysis.
func (f *gateFlags) once(ctx context.Context, g *approvals.Gate, opts []kgo.Opt, log *slog.Logger) error {
	if g == nil || (f.lock != nil && *f.lock != "") {
		return nil
	}
	fl, err := topic.NewFollower(opts, *f.topic, g, log, nil)
	if err != nil {
		return err
	}
	if err := fl.CatchUp(ctx); err != nil {
		return fmt.Errorf("approvals (--approvals %s): %w", g.PolicyString(), err)
	}
	return nil
}

// gate returns the gate of --approvals over an empty baseline (filled by
// follow) or, offline, over --approvals-lock's; nil when the policy is
// off everywhere.
func (f *gateFlags) gate() (*approvals.Gate, error) {
	p, err := approvals.ParsePolicy(*f.policy)
	if err != nil {
		return nil, usageError{fmt.Errorf("--approvals: %w", err)}
	}
	if p.Off() {
		if f.lock != nil && *f.lock != "" {
			return nil, usageError{errors.New("--approvals-lock without an --approvals policy")}
		}
		return nil, nil
	}
	if f.lock == nil || *f.lock == "" {
		if f.topic == nil {
			return nil, usageError{errors.New("--approvals " + *f.policy + " needs --approvals-lock FILE (the approved baseline)")}
		}
		return approvals.NewGate(p, nil), nil // from the topic
	}
	file, err := os.Open(*f.lock)
	if err != nil {
		return nil, usageError{fmt.Errorf("--approvals-lock: %w", err)}
	}
	defer file.Close()
	es, err := approvals.ReadLock(file)
	if err != nil {
		return nil, usageError{fmt.Errorf("--approvals-lock %s: %w", *f.lock, err)}
	}
	b, err := approvals.LockBaseline(es)
	if err != nil {
		return nil, usageError{fmt.Errorf("--approvals-lock %s: %w", *f.lock, err)}
	}
	return approvals.NewGate(p, b), nil
}

// follow catches g up with the approvals topic, so that nothing is
// decided against a baseline that lacks what was approved or rejected
// before the start, and returns the loop that follows the topic; nil g:
// nothing to follow.
//
// A missing approvals topic is the empty baseline only on run
// --embedded's own broker: its data directory holds every event ever
// written to it, and every writer (registry approve, pin, lock --import,
// POST /v1/approvals) creates the topic before its first event, so no
// topic there means no approval was ever written, and the empty baseline
// is exact; follow creates the topic (one partition, compacted) and says
// so. Anywhere else a missing topic fails the start: on brokers this
// process does not own it cannot tell a fleet that never approved
// anything from wrong --brokers, a misspelt --approvals-topic or a lost
// topic, and under +tofu an empty baseline would let every drifted
// definition pass as new (failing open). The operator creates it
// deliberately (the error says how).
func (f *gateFlags) follow(ctx context.Context, g *approvals.Gate, opts []kgo.Opt, log *slog.Logger, reg prometheus.Registerer) (func(context.Context) error, error) {
	if g == nil {
		return func(context.Context) error { return nil }, nil
	}
	if f.embedded {
		created, err := topic.Create(ctx, opts, *f.topic)
		if err != nil {
			return nil, fmt.Errorf("approvals (--approvals %s): %w", g.PolicyString(), err)
		}
		if created {
			log.Info("approvals topic created on the embedded broker: no definition was ever approved here (baseline version 0)", "topic", *f.topic)
		}
	}
	fl, err := topic.NewFollower(opts, *f.topic, g, log, reg)
	if err != nil {
		return nil, err
	}
	if err := fl.CatchUp(ctx); err != nil {
		if errors.Is(err, kerr.UnknownTopicOrPartition) {
			return nil, fmt.Errorf("approvals (--approvals %s): %w; nothing is decided against a baseline not read: if these are the right --brokers and --approvals-topic "+
				"and nothing was ever approved, create it with resolverd registry pin --by WHO (approves every current definition), registry approve, "+
				"or registry lock --import FILE --by WHO", g.PolicyString(), err)
		}
		return nil, fmt.Errorf("approvals (--approvals %s): %w", g.PolicyString(), err)
	}
	return func(ctx context.Context) error { fl.Run(ctx); return nil }, nil
}
