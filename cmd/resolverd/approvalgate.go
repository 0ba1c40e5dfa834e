package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/approvals/topic"
)

// gateFlags are the approvals policy flags of the commands that decide
// calls, so that they decide alike: --approvals, and where the baseline
// comes from: the approvals topic (run, gateway) or a lockfile (check).
type gateFlags struct {
	policy, topic, lock *string
}

const approvalsPolicyHelp = "approvals `POLICY`: off, warn (decide as without, mark the decision) or block (a definition not approved is M4), " +
	"+tofu (default: a tool never approved passes, marked new) or +hold, per registry or server: warn,prod=block+hold,prod/legacy=off"

// registerLive registers --approvals and --approvals-topic.
func (f *gateFlags) registerLive(fs *flag.FlagSet) {
	f.policy = fs.String("approvals", "off", approvalsPolicyHelp)
	f.topic = fs.String("approvals-topic", topic.Default, "approvals `topic` the baseline is read from and followed (--approvals not off)")
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
	if err := topic.NewFollower(opts, *f.topic, g, log).CatchUp(ctx); err != nil {
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
func (f *gateFlags) follow(ctx context.Context, g *approvals.Gate, opts []kgo.Opt, log *slog.Logger) (func(context.Context) error, error) {
	if g == nil {
		return func(context.Context) error { return nil }, nil
	}
	fl := topic.NewFollower(opts, *f.topic, g, log)
	if err := fl.CatchUp(ctx); err != nil {
		return nil, fmt.Errorf("approvals (--approvals %s): %w", g.PolicyString(), err)
	}
	return func(ctx context.Context) error { fl.Run(ctx); return nil }, nil
}
