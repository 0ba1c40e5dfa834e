package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config is one upstream server.
type Config struct {
	// Name is the server's name in the registry and in qualified names.
	Name string
	// Command (argv) runs a stdio server; URL names a Streamable HTTP
	// endpoint. Exactly one is set.
	Command []string
	// Env is the command's whole environment ("KEY=value"); Dir its
	// working directory ("" the gateway's).
	Env []string
	Dir string
	URL string
	// Token, when set, gives the bearer token sent to URL, read at each
	// request (a rotated file takes effect at once).
	Token func() (string, error)

	// CallTimeout bounds one tools/call. Default 30s.
	CallTimeout time.Duration
	// ListTimeout bounds connecting (initialize) and one listing, all
	// pages. Default 30s.
	ListTimeout time.Duration
	// KeepAlive is the interval of the pings that detect a hung server;
	// an unanswered ping ends the session. Default 15s; negative: none.
	KeepAlive time.Duration
	// MinBackoff and MaxBackoff bound the wait before reconnecting and
	// before retrying a failed listing. Defaults 250ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// RelistInterval is the least time between two listings. Default 1s.
	RelistInterval time.Duration
	// Poll lists the tools this often as well, for a server that changes
	// them without notifications/tools/list_changed (one that does not
	// declare listChanged may). 0: only on connecting and list_changed.
	Poll time.Duration
	// MaxTools bounds one listing. Default 10000.
	MaxTools int
	// TerminateWait is how long a command has to exit after its stdin is
	// closed, then after SIGTERM, before it is killed. Default 2s.
	TerminateWait time.Duration
}

// Defaults of Config.
const (
	DefaultCallTimeout    = 30 * time.Second
	DefaultListTimeout    = 30 * time.Second
	DefaultKeepAlive      = 15 * time.Second
	DefaultMinBackoff     = 250 * time.Millisecond
	DefaultMaxBackoff     = 30 * time.Second
	DefaultRelistInterval = time.Second
	DefaultMaxTools       = 10000
	DefaultTerminateWait  = 2 * time.Second
)

// maxIdleConns bounds the idle connections kept to an HTTP upstream.
const maxIdleConns = 512

// maxPages bounds the pages of one listing: a server that hands out
// cursors forever must not keep the gateway listing.
const maxPages = 1000

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.CallTimeout, DefaultCallTimeout)
	def(&c.ListTimeout, DefaultListTimeout)
	def(&c.KeepAlive, DefaultKeepAlive)
	def(&c.MinBackoff, DefaultMinBackoff)
	def(&c.MaxBackoff, DefaultMaxBackoff)
	def(&c.RelistInterval, DefaultRelistInterval)
	def(&c.TerminateWait, DefaultTerminateWait)
	if c.MaxTools <= 0 {
		c.MaxTools = DefaultMaxTools
	}
	if c.KeepAlive < 0 {
		c.KeepAlive = 0
	}
	c.MaxBackoff = max(c.MaxBackoff, c.MinBackoff)
}

func (c *Config) validate() error {
	switch {
	case c.Name == "":
		return errors.New("upstream without a name")
	case len(c.Command) == 0 && c.URL == "":
		return fmt.Errorf("upstream %s: neither a command nor a URL", c.Name)
	case len(c.Command) > 0 && c.URL != "":
		return fmt.Errorf("upstream %s: both a command and a URL", c.Name)
	case c.Command != nil && c.Command[0] == "":
		return fmt.Errorf("upstream %s: empty command", c.Name)
	case c.CallTimeout < 0, c.ListTimeout < 0, c.MinBackoff < 0, c.RelistInterval < 0, c.Poll < 0:
		return fmt.Errorf("upstream %s: negative duration", c.Name)
	}
	return nil
}

// Lister records an upstream's tools; Listed returns nil once they are
// recorded. It is called from the upstream's Run goroutine, one listing
// at a time per upstream.
type Lister interface {
	Listed(ctx context.Context, server string, tools []*mcp.Tool) error
}

// ListerFunc adapts a function to a Lister.
type ListerFunc func(ctx context.Context, server string, tools []*mcp.Tool) error

// Listed calls f.
func (f ListerFunc) Listed(ctx context.Context, server string, tools []*mcp.Tool) error {
	return f(ctx, server, tools)
}

var _ Lister = ListerFunc(nil)

// Errors of Call, besides the server's own JSON-RPC errors, which are
// returned as the SDK gives them (*jsonrpc.Error).
var (
	// ErrUnavailable: no session with the server, or its tools of this
	// session are not recorded yet, or the session ended during the call.
	ErrUnavailable = errors.New("upstream unavailable")
	// ErrTimeout: the server did not answer within CallTimeout.
	ErrTimeout = errors.New("upstream did not answer in time")
)

// Upstream is one supervised upstream server. Call is safe for
// concurrent use; Run is called once.
type Upstream struct {
	cfg    Config
	lister Lister
	log    *slog.Logger
	m      *upstreamMetrics

	conn   atomic.Pointer[conn]
	relist chan struct{} // list_changed seen; buffered 1: coalesces
	stderr *tail
}

// conn is one session with the server.
type conn struct {
	cs    *mcp.ClientSession
	ready atomic.Bool // the session's tools are recorded
}

// New returns an upstream; Run connects it. A nil log logs nothing; nil
// metrics count nothing.
func New(cfg Config, l Lister, log *slog.Logger, m *Metrics) (*Upstream, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if l == nil {
		return nil, errors.New("upstream: no Lister")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m, _ = NewMetrics(nil) // registers nothing: no error
	}
	log = log.With("upstream", cfg.Name)
	return &Upstream{
		cfg: cfg, lister: l, log: log, m: m.of(cfg.Name),
		relist: make(chan struct{}, 1),
		stderr: newTail(log, 20),
	}, nil
}

// Name is the server's name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Ready reports whether calls are forwarded now: connected, and this
// session's tools recorded.
func (u *Upstream) Ready() bool {
	c := u.conn.Load()
	return c != nil && c.ready.Load()
}

// Run keeps the upstream connected until ctx is done, then closes the
// session (a command is stopped) and returns nil.
func (u *Upstream) Run(ctx context.Context) error {
	backoff := u.cfg.MinBackoff
	for {
		start := time.Now()
		err := u.session(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) >= u.cfg.MaxBackoff {
			backoff = u.cfg.MinBackoff
		}
		u.m.restarts.Inc()
		u.log.Warn("upstream session ended; reconnecting", "err", err, "in", backoff)
		if !sleep(ctx, backoff) {
			return nil
		}
		backoff = min(backoff*2, u.cfg.MaxBackoff)
	}
}

// session runs one session: connect, list, serve calls and listings
// until the session ends or ctx is done.
func (u *Upstream) session(ctx context.Context) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "toolaudit-gateway", Version: "1"}, &mcp.ClientOptions{
		// No roots, sampling or elicitation: the gateway forwards tools
		// only, and a server must not read the gateway's own roots.
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case u.relist <- struct{}{}:
			default: // one is queued already
			}
		},
		KeepAlive: u.cfg.KeepAlive,
	})
	t, stop, err := u.transport()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, u.cfg.ListTimeout)
	cs, err := client.Connect(cctx, t, nil)
	cancel()
	if err != nil {
		stop()
		return fmt.Errorf("connect: %w", err)
	}
	c := &conn{cs: cs}
	ended := make(chan struct{})
	go func() {
		cs.Wait()
		close(ended)
	}()
	u.conn.Store(c)
	u.log.Info("upstream connected")
	defer func() {
		u.conn.Store(nil)
		u.m.up.Set(0)
		cs.Close()
		<-ended
		stop()
	}()

	timer := time.NewTimer(0) // the first listing, at once
	defer timer.Stop()
	var poll <-chan time.Time
	if u.cfg.Poll > 0 {
		t := time.NewTicker(u.cfg.Poll)
		defer t.Stop()
		poll = t.C
	}
	pending := true
	var last time.Time
	retry := u.cfg.MinBackoff
	// schedule lists again, no sooner than RelistInterval after the last.
	schedule := func() {
		if !pending {
			pending = true
			timer.Reset(max(0, time.Until(last.Add(u.cfg.RelistInterval))))
		}
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ended:
			return errors.New("the session ended")
		case <-poll:
			schedule()
		case <-u.relist:
			schedule()
		case <-timer.C:
			err := u.list(ctx, cs)
			last = time.Now()
			if err != nil {
				c.ready.Store(false)
				u.m.up.Set(0)
				u.m.listings.WithLabelValues("failed").Inc()
				u.log.Warn("upstream listing failed; calls are refused until it succeeds", "err", err, "retry_in", retry)
				timer.Reset(retry)
				retry = min(retry*2, u.cfg.MaxBackoff)
				continue
			}
			pending = false
			retry = u.cfg.MinBackoff
			c.ready.Store(true)
			u.m.up.Set(1)
			u.m.listings.WithLabelValues("recorded").Inc()
		}
	}
}

// list lists the tools, every page, and hands them to the Lister.
func (u *Upstream) list(ctx context.Context, cs *mcp.ClientSession) error {
	ctx, cancel := context.WithTimeout(ctx, u.cfg.ListTimeout)
	defer cancel()
	var tools []*mcp.Tool
	cursor := ""
	for page := 0; ; page++ {
		if page == maxPages {
			return fmt.Errorf("tools/list: more than %d pages", maxPages)
		}
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		if len(tools)+len(res.Tools) > u.cfg.MaxTools {
			return fmt.Errorf("tools/list: more than %d tools", u.cfg.MaxTools)
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		if res.NextCursor == cursor {
			return fmt.Errorf("tools/list: the server repeated cursor %q", cursor)
		}
		cursor = res.NextCursor
	}
	if err := u.lister.Listed(ctx, u.cfg.Name, tools); err != nil {
		return fmt.Errorf("record the listing: %w", err)
	}
	return nil
}

// Call calls the server's tool with args (a JSON object, sent as it is)
// and returns its result.
func (u *Upstream) Call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	start := time.Now()
	res, err := u.call(ctx, tool, args)
	result := "ok"
	switch {
	case errors.Is(err, ErrUnavailable):
		result = "unavailable"
	case errors.Is(err, ErrTimeout):
		result = "timeout"
	case err != nil:
		result = "error"
	case res.IsError:
		result = "tool_error"
	}
	u.m.calls.WithLabelValues(result).Inc()
	if result != "unavailable" {
		u.m.callSeconds.Observe(time.Since(start).Seconds())
	}
	return res, err
}

func (u *Upstream) call(ctx context.Context, tool string, args json.RawMessage) (*mcp.CallToolResult, error) {
	c := u.conn.Load()
	if c == nil || !c.ready.Load() {
		return nil, fmt.Errorf("%w: %s is not connected", ErrUnavailable, u.cfg.Name)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	cctx, cancel := context.WithTimeout(ctx, u.cfg.CallTimeout)
	defer cancel()
	res, err := c.cs.CallTool(cctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err == nil:
		return res, nil
	case ctx.Err() != nil:
		return nil, ctx.Err() // the client gave up
	case cctx.Err() != nil:
		return nil, fmt.Errorf("%w: %s took more than %v", ErrTimeout, u.cfg.Name, u.cfg.CallTimeout)
	case errors.Is(err, mcp.ErrConnectionClosed):
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, u.cfg.Name, err)
	}
	return nil, err
}

// transport returns a transport for one session and the function that
// cleans up after it.
func (u *Upstream) transport() (mcp.Transport, func(), error) {
	if u.cfg.URL != "" {
		// Calls run concurrently, each a POST: keep as many idle
		// connections as there may be calls (net/http keeps 2 per host by
		// default; every further call would open and close one).
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 0, maxIdleConns
		hc := &http.Client{Transport: &bearer{base: tr, token: u.cfg.Token}}
		return &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc}, func() {}, nil
	}
	cmd := exec.Command(u.cfg.Command[0], u.cfg.Command[1:]...)
	cmd.Env = u.cfg.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would inherit the gateway's environment
	}
	cmd.Dir = u.cfg.Dir
	cmd.Stderr = u.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stop := func() {
		if cmd.Process == nil {
			return
		}
		// The session's Close has waited for the command; anything it
		// started in its group goes with it.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if st := cmd.ProcessState; st != nil && !st.Success() {
			u.stderr.flush("upstream process ended", "status", st.String())
		}
	}
	return &mcp.CommandTransport{Command: cmd, TerminateDuration: u.cfg.TerminateWait}, stop, nil
}

// bearer adds the upstream's bearer token to each request.
type bearer struct {
	base  http.RoundTripper
	token func() (string, error)
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == nil {
		return b.base.RoundTrip(r)
	}
	tok, err := b.token()
	if err != nil {
		return nil, fmt.Errorf("upstream token: %w", err)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return b.base.RoundTrip(r)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
