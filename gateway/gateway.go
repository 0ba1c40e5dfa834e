package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolaudit/toolaudit/signature"
	"go.opentelemetry.io/otel/trace"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/callpath"
	"github.com/toolaudit/toolaudit/gateway/upstream"
	"github.com/toolaudit/toolaudit/internal/connsec"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Options are what New needs besides the configuration. Only Config is
// required; a nil dependency turns its feature off, as documented.
type Options struct {
	Config Config
	// Listings produces the listing events; nil: they are only applied
	// to the gateway's own registry (no Kafka).
	Listings Publisher
	// Audit records every decision before it is acted on (*audit.Kafka);
	// nil: decisions are not audited (no Kafka).
	Audit audit.Producer
	// Hints computes the hints of rejections (*suggest.Suggester); nil:
	// none but the tool the arguments fit (H5, M5). The gateway names
	// the tools of both as its clients call them.
	Hints callpath.Hinter
	// Auth authenticates clients (*bearer.Tokens); nil: every client is
	// let in.
	Auth Authorizer
	// ResolverBuild stamps every decision (resolver_build).
	ResolverBuild string
	// Tracer, when set, emits a span per decision in the caller's trace
	// (the request's _meta traceparent; package callpath); nil: none.
	Tracer trace.Tracer
	// Approvals checks every resolved call's current definition against
	// the approved baseline (resolve.Resolver.Approvals): under block a
	// definition not approved is M4 and never reaches the upstream. nil:
	// no check. Its follower (approvals/topic) is the caller's.
	Approvals *approvals.Gate
	// Getenv reads the gateway's environment, for the upstream commands'
	// inherited variables; nil: none is inherited.
	Getenv func(string) string
	// Logger; nil logs nothing. Registerer; nil registers no metrics.
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Upstream tunes the upstreams' supervision (backoff, keep-alive,
	// listing bounds); its Name, Command, URL, Env, Dir, Token and
	// CallTimeout are set per upstream from Config, and Poll from
	// Config.PollTools unless set.
	Upstream upstream.Config

	now func() time.Time // tests
}

// Gateway is the MCP gateway: an MCP server for clients (Handler) that
// merges the tools of its upstreams, decides every call, and forwards
// the calls that resolve. Run supervises the upstreams.
type Gateway struct {
	cfg  Config
	opts Options
	log  *slog.Logger
	step callpath.Step // decide, record, answer

	store     *registry.Store
	upstreams map[string]*upstream.Upstream
	trust     map[string]int
	order     []*upstream.Upstream // in configuration order

	server   *mcp.Server
	sessions *sessions
	inflight *semaphore.Weighted
	listens  *semaphore.Weighted // subscriptions/listen streams, bounded by MaxSessions
	clock    *clock
	ids      *ids
	m        *metrics

	listMu sync.Mutex                      // serializes recording listings
	defs   map[string]map[string]*mcp.Tool // each server's latest tools
	last   map[string][]byte               // each server's latest tools, encoded
	listed map[string]bool                 // servers listed at least once
	// complete: every upstream has been listed at least once, so a bare
	// name can be resolved (it stays true: servers stay listed).
	complete atomic.Bool
	cat      atomic.Pointer[catalogue]
	// relisted: principal -> the listing time (catalogue.at) of the
	// catalogue last answered to that client; bounded by the tokens
	// configured (anonymous clients are not kept).
	relisted sync.Map

	work sync.Pool // *callWork
}

// New builds a gateway; Run starts its upstreams.
func New(opts Options) (*Gateway, error) {
	cfg := opts.Config
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	mode, _ := resolve.ParseMode(cfg.Mode)
	resolver := resolve.Resolver{Mode: mode, Formats: cfg.Formats == "assert", Approvals: opts.Approvals}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	if opts.Getenv == nil {
		opts.Getenv = func(string) string { return "" }
	}
	g := &Gateway{
		cfg: cfg, opts: opts, log: log,
		step: callpath.Step{Resolver: resolver,
			Audit: opts.Audit, Source: schema.SourceGateway, Action: schema.ActionEnforced,
			ResolverBuild: opts.ResolverBuild, PolicyVersion: resolver.Policy(), Tracer: opts.Tracer},
		store:     registry.New(registry.WithSignatureOptions(signature.Options{Formats: cfg.Formats == "assert"})),
		upstreams: map[string]*upstream.Upstream{},
		trust:     map[string]int{},
		sessions:  newSessions(cfg.Limits.MaxSessions),
		inflight:  semaphore.NewWeighted(int64(cfg.Limits.MaxInFlight)),
		listens:   semaphore.NewWeighted(int64(cfg.Limits.MaxSessions)),
		clock:     &clock{now: opts.now},
		ids:       newIDs(),
		defs:      map[string]map[string]*mcp.Tool{},
		last:      map[string][]byte{},
		listed:    map[string]bool{},
	}
	g.step.Hints = clientHints{g}
	if cfg.Observe {
		g.step.Action = schema.ActionObserved
	}
	g.work.New = func() any { return new(callWork) }
	g.cat.Store(newCatalogue(nil, time.Time{}, nil, cfg.Separator, nil, 0))
	var err error
	if g.m, err = newMetrics(opts.Registerer, g.sessions.len); err != nil {
		return nil, err
	}
	um, err := upstream.NewMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	for _, u := range cfg.Upstreams {
		uc := opts.Upstream
		uc.Name = u.Name
		uc.Command, uc.URL, uc.Dir, uc.Env, uc.Token = u.Command, u.URL, u.Dir, nil, nil
		uc.CallTimeout = cfg.timeout(&u)
		if uc.Poll == 0 { // tests set their own
			uc.Poll = time.Duration(cfg.PollTools)
		}
		if len(u.Command) > 0 {
			uc.Env = u.environ(opts.Getenv)
		}
		if u.BearerTokenFile != "" {
			if uc.Token, err = (connsec.Secret{File: u.BearerTokenFile}).Reader(opts.Getenv); err != nil {
				return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
			}
		}
		up, err := upstream.New(uc, upstream.ListerFunc(g.record), log, um)
		if err != nil {
			return nil, err
		}
		g.upstreams[u.Name] = up
		g.trust[u.Name] = u.Trust
		g.order = append(g.order, up)
	}
	g.server = g.newServer()
	return g, nil
}

// Run supervises the upstreams until ctx is done, then closes every
// client session and stops the upstreams.
func (g *Gateway) Run(ctx context.Context) error {
	eg, ctx := errgroup.WithContext(ctx)
	for _, u := range g.order {
		eg.Go(func() error { return u.Run(ctx) })
	}
	<-ctx.Done()
	for ss := range g.server.Sessions() {
		ss.Close()
	}
	return eg.Wait()
}

// Store is the gateway's registry: the listings of its upstreams.
func (g *Gateway) Store() *registry.Store { return g.store }

// Ready reports whether every upstream has been listed at least once
// since start (the catalogue is whole), and which upstreams are not
// connected now.
func (g *Gateway) Ready() (ready bool, down []string) {
	g.listMu.Lock()
	ready = len(g.listed) == len(g.order)
	g.listMu.Unlock()
	for _, u := range g.order {
		if !u.Ready() {
			down = append(down, u.Name())
		}
	}
	return ready, down
}

// notListed returns the upstreams not listed yet, in configuration order.
func (g *Gateway) notListed() []string {
	g.listMu.Lock()
	defer g.listMu.Unlock()
	var out []string
	for _, u := range g.order {
		if !g.listed[u.Name()] {
			out = append(out, u.Name())
		}
	}
	return out
}

// markListed notes that server has been listed; listMu is held.
func (g *Gateway) markListed(server string) {
	g.listed[server] = true
	if len(g.listed) == len(g.order) {
		g.complete.Store(true)
	}
}

// record records an upstream's tools: a listing event produced to the
// listings topic (acknowledged), then applied to the registry, then the
// catalogue rebuilt and the clients told. A listing the registry would
// refuse (a tool without a name or an object inputSchema, a name twice)
// withdraws the server instead (op remove): its tools are not callable
// until it lists usable ones. A listing identical to the server's
// previous one is not produced again.
func (g *Gateway) record(ctx context.Context, server string, tools []*mcp.Tool) error {
	g.listMu.Lock()
	defer g.listMu.Unlock()
	raws := make([][]byte, len(tools))
	defs := make(map[string]*mcp.Tool, len(tools))
	for i, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("encode tool %q: %w", t.Name, err)
		}
		raws[i] = b
		defs[t.Name] = t
	}
	l := &schema.Listing{Registry: g.cfg.Registry, Server: server, Trust: g.trust[server], Op: schema.OpSnapshot}
	// content is the listing without its id and time: what a relisting
	// is compared with.
	content := schema.AppendListing(nil, l, raws)
	if prev, ok := g.last[server]; ok && string(prev) == string(content) {
		g.markListed(server)
		g.m.listings.WithLabelValues("unchanged").Inc()
		return nil
	}
	l.EventID, l.ObservedAt = g.ids.next('l'), g.clock.listing()
	ev := schema.AppendListing(nil, l, raws)
	dec, err := schema.DecodeListing(ev)
	if err != nil {
		g.log.Error("upstream listing unusable: the server's tools are withdrawn", "upstream", server, "err", err)
		g.m.listings.WithLabelValues("unusable").Inc()
		l.Op, raws, defs = schema.OpRemove, nil, nil
		ev = schema.AppendListing(ev[:0], l, nil)
		if dec, err = schema.DecodeListing(ev); err != nil {
			return fmt.Errorf("listing event: %w", err)
		}
	}
	if g.opts.Listings != nil {
		if err := g.opts.Listings.Publish(ctx, l, ev); err != nil {
			g.m.listings.WithLabelValues("failed").Inc()
			return fmt.Errorf("produce the listing: %w", err)
		}
	}
	for _, is := range g.store.Apply(dec) {
		g.log.Warn("listing issue", "upstream", server, "issue", is.String())
	}
	g.defs[server] = defs
	g.last[server] = content
	g.markListed(server)
	g.m.listings.WithLabelValues("produced").Inc()
	v := g.store.At(g.cfg.Registry, g.clock.latest())
	g.cat.Store(newCatalogue(v, l.ObservedAt, g.defs, g.cfg.Separator, g.cat.Load(), time.Duration(g.cfg.ListTTL)))
	g.log.Info("upstream listed", "upstream", server, "op", l.Op, "tools", len(raws), "registry_version", versionID(v))
	g.notifyToolsChanged()
	return nil
}

func versionID(v *registry.Version) string {
	if v == nil {
		return ""
	}
	return v.ID
}
