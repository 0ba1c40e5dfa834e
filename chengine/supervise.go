package chengine

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Supervisor keeps one engine serving a data directory on fixed ports, as
// a service manager keeps a server up: when the engine exits without Stop
// (a crash, a KILL QUERY of its keep-alive query, the OOM killer), writes a
// fatal error to its log (it is about to abort: it is killed at once
// rather than 4 s later), or stops answering, it logs why and starts a new
// engine on the same Dir and ports, so clients configured with Addr
// reconnect to their data. Its methods are safe for concurrent use.
//
// Restarts back off: the first waits MinBackoff, each further one without
// an engine that served for a minute in between waits twice as long, up to
// MaxBackoff. A crash loop is thus a few starts a minute, each logged and
// counted, never a busy loop.
type Supervisor struct {
	opts Options // ports fixed after the first start
	cfg  superviseConfig
	log  *slog.Logger
	m    supervisorMetrics

	ctx    context.Context // ends with Stop
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop has returned

	mu       sync.Mutex
	cur      *Server
	notReady error // nil while the engine answers
	restarts int
}

// SuperviseOption configures Supervise.
type SuperviseOption func(*superviseConfig)

type superviseConfig struct {
	reg                    prometheus.Registerer
	minBackoff, maxBackoff time.Duration
	probeEvery, hangAfter  time.Duration
	stableAfter            time.Duration
}

// WithRegisterer registers the supervisor's metrics with r (default: none):
// toolaudit_engine_up, toolaudit_engine_restarts_total and
// toolaudit_engine_start_failures_total.
func WithRegisterer(r prometheus.Registerer) SuperviseOption {
	return func(c *superviseConfig) { c.reg = r }
}

// WithBackoff sets the wait before a restart: min after an engine that
// served for a while, doubling with each further exit or failed start up to
// max. Default 500 ms and 30 s.
func WithBackoff(min, max time.Duration) SuperviseOption {
	return func(c *superviseConfig) { c.minBackoff, c.maxBackoff = min, max }
}

// WithProbe sets how often the engine is asked whether it answers (default
// every 2 s), and how long it may go without answering before it is killed
// and restarted (default 60 s; 0 never kills). A probe is an HTTP /ping and
// a native-protocol ping, each cheap for the engine even when it is busy,
// so a minute of silence is a hang, not load.
func WithProbe(every, hangAfter time.Duration) SuperviseOption {
	return func(c *superviseConfig) { c.probeEvery, c.hangAfter = every, hangAfter }
}

type supervisorMetrics struct {
	up       prometheus.Gauge
	restarts prometheus.Counter
	failures prometheus.Counter
}

// Supervise starts an engine as Start does and keeps it running until Stop.
// Ports given as 0 are picked at the first start and kept for every
// restart. ctx bounds the first start only; a first start that fails is
// returned as an error and not retried (a library that cannot load or a
// Dir already in use will not get better).
func Supervise(ctx context.Context, opts Options, o ...SuperviseOption) (*Supervisor, error) {
	cfg := superviseConfig{
		minBackoff: 500 * time.Millisecond, maxBackoff: 30 * time.Second,
		probeEvery: 2 * time.Second, hangAfter: time.Minute,
		stableAfter: time.Minute,
	}
	for _, f := range o {
		f(&cfg)
	}
	if cfg.minBackoff <= 0 || cfg.maxBackoff < cfg.minBackoff || cfg.probeEvery <= 0 || cfg.hangAfter < 0 {
		return nil, fmt.Errorf("chengine: bad supervision options: backoff %v..%v, probe every %v, hang after %v",
			cfg.minBackoff, cfg.maxBackoff, cfg.probeEvery, cfg.hangAfter)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Supervisor{cfg: cfg, log: opts.Logger, done: make(chan struct{})}
	s.m = supervisorMetrics{
		up: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolaudit_engine_up",
			Help: "1 while the ClickHouse engine answers its probes, 0 while it is down or restarting.",
		}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolaudit_engine_restarts_total",
			Help: "ClickHouse engines started again after one exited unexpectedly or stopped answering.",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolaudit_engine_start_failures_total",
			Help: "Restarts of the ClickHouse engine that failed (each is retried after a backoff).",
		}),
	}
	var registered []prometheus.Collector
	unregister := func() {
		for _, c := range registered {
			cfg.reg.Unregister(c)
		}
	}
	if cfg.reg != nil {
		for _, c := range []prometheus.Collector{s.m.up, s.m.restarts, s.m.failures} {
			if err := cfg.reg.Register(c); err != nil {
				unregister()
				return nil, fmt.Errorf("chengine: %w", err)
			}
			registered = append(registered, c)
		}
	}
	srv, err := Start(ctx, opts)
	if err != nil {
		unregister()
		return nil, err
	}
	opts.TCPPort, opts.HTTPPort = port(srv.Addr()), port(srv.HTTPAddr())
	s.opts, s.cur = opts, srv
	s.m.up.Set(1)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	go s.loop(srv)
	return s, nil
}

func port(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// Addr is the native protocol address, the same across restarts.
func (s *Supervisor) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.TCPPort))
}

// HTTPAddr is the HTTP interface address, the same across restarts.
func (s *Supervisor) HTTPAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.opts.HTTPPort))
}

// Ready returns nil while the engine answers, and otherwise why not: it
// exited and is being restarted, or it stopped answering its probes. It
// turns nil again once a new engine answers.
func (s *Supervisor) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notReady
}

// Restarts is the number of engines started after the first.
func (s *Supervisor) Restarts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts
}

// Server is the engine started last: the one serving, or, while Ready
// reports the engine down, the one that failed.
func (s *Supervisor) Server() *Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Stop ends supervision and stops the engine (see Server.Stop). It is
// idempotent.
func (s *Supervisor) Stop() error {
	s.cancel()
	<-s.done
	return s.Server().Stop()
}

func (s *Supervisor) setReady(err error) {
	s.mu.Lock()
	s.notReady = err
	s.mu.Unlock()
	if err == nil {
		s.m.up.Set(1)
	} else {
		s.m.up.Set(0)
	}
}

// loop watches the engine and restarts it until Stop.
func (s *Supervisor) loop(srv *Server) {
	defer close(s.done)
	fails := 0 // exits and failed starts since an engine last served stableAfter
	for {
		up := time.Now()
		why := s.watch(srv)
		if why == nil {
			return // Stop
		}
		if time.Since(up) >= s.cfg.stableAfter {
			fails = 0
		}
		down := time.Now()
		s.setReady(fmt.Errorf("chengine: engine down since %s: %w", down.Format(time.RFC3339), why))
		for {
			delay := s.cfg.minBackoff
			for i := 0; i < fails && delay < s.cfg.maxBackoff; i++ {
				delay *= 2
			}
			delay = min(delay, s.cfg.maxBackoff)
			fails++
			s.log.Info("chengine: restarting the engine on its data", "in", delay, "dir", s.opts.Dir, "attempt", fails)
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(delay):
			}
			next, err := Start(s.ctx, s.opts)
			if err == nil {
				s.mu.Lock()
				s.cur = next
				s.restarts++
				n := s.restarts
				s.mu.Unlock()
				s.m.restarts.Inc()
				s.setReady(nil)
				s.log.Warn("chengine: engine restarted", "restarts", n, "down_for", time.Since(down).Round(time.Millisecond),
					"pid", next.PID())
				srv = next
				break
			}
			if s.ctx.Err() != nil {
				return
			}
			s.m.failures.Inc()
			s.log.Error("chengine: engine restart failed", "attempt", fails, "err", err)
		}
	}
}

// watch returns nil once Stop is called, or why srv is gone: it exited,
// it wrote a fatal report to its log (it is dying; waiting the 4 s until
// it is dead only prolongs the outage), or it did not answer for
// hangAfter. In the last two cases it is killed first.
func (s *Supervisor) watch(srv *Server) error {
	tick := time.NewTicker(s.cfg.probeEvery)
	defer tick.Stop()
	logTick := time.NewTicker(fatalPoll)
	defer logTick.Stop()
	fatal := fatalWatch{path: srv.logPath, off: srv.logFrom}
	lastOK := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return nil
		case <-srv.done:
			s.log.Error("chengine: engine exited unexpectedly", "pid", srv.PID(), "status", srv.waitErr,
				"uptime", time.Since(srv.started).Round(time.Millisecond),
				"output", srv.out.lastLines(20), "engine_log", srv.lastLog(), "log_file", srv.logPath)
			return srv.exitError()
		case <-logTick.C:
			said := fatal.poll()
			if said == "" {
				continue
			}
			s.setReady(fmt.Errorf("chengine: engine failed: %s", fatalSummary(said)))
			time.Sleep(fatalGrace) // the rest of its report
			words := srv.lastLog()
			s.log.Error("chengine: engine failed; killing it", "pid", srv.PID(), "why", fatalSummary(words),
				"uptime", time.Since(srv.started).Round(time.Millisecond), "engine_log", words, "log_file", srv.logPath)
			srv.Stop()
			return fmt.Errorf("chengine: engine failed: %s", fatalSummary(words))
		case <-tick.C:
		}
		err := srv.ping(s.ctx)
		switch {
		case s.ctx.Err() != nil:
			return nil
		case err == nil:
			lastOK = time.Now()
			s.setReady(nil)
			continue
		}
		select {
		case <-srv.done:
			continue // reported above
		default:
		}
		silent := time.Since(lastOK)
		s.setReady(fmt.Errorf("chengine: engine not answering for %s: %w", silent.Round(time.Second), err))
		if s.cfg.hangAfter > 0 && silent >= s.cfg.hangAfter {
			s.log.Error("chengine: engine stopped answering; killing it", "pid", srv.PID(), "silent_for", silent.Round(time.Second),
				"probe", err, "engine_log", srv.lastLog(), "log_file", srv.logPath)
			srv.Stop()
			return fmt.Errorf("killed after not answering for %s: %w", silent.Round(time.Second), err)
		}
	}
}

const (
	// fatalPoll is how often the engine's log is read for a fatal report:
	// a stat and the new bytes, at most a few lines a second at the log's
	// level.
	fatalPoll = 250 * time.Millisecond
	// fatalGrace lets the engine finish writing its report (the signal
	// and stack come ~100 ms after the exception) before it is killed.
	fatalGrace = 300 * time.Millisecond
)
