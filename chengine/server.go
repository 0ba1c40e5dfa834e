package chengine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
)

// keepAlive is the query that keeps chdb_query_cmdline, and so the
// listeners, running: one row every 3 s (sleepEachRow's per-block cap with
// max_block_size=1) over the endless system.numbers, discarded. It costs no
// CPU and no memory, and is visible in system.processes.
const keepAlive = "SELECT sleepEachRow(3) FROM system.numbers SETTINGS max_block_size = 1 FORMAT Null"

// Options configure Start. The zero value of each field is a usable default,
// except Dir.
type Options struct {
	// Dir is the data directory (clickhouse --path). Required: tables live
	// here and survive Stop, so reusing a Dir restarts on the same data. One
	// server at a time per Dir (the engine locks it).
	Dir string
	// TCPPort and HTTPPort are the loopback ports of the native and HTTP
	// protocols; 0 picks free ports.
	TCPPort, HTTPPort int
	// Lib is the path of libchdb.so; "" means Find("").
	Lib string
	// Logger receives lifecycle events and the engine's output (Debug);
	// nil discards them.
	Logger *slog.Logger
	// StartTimeout bounds the wait for readiness; 0 means 60 s. A healthy
	// start takes well under a second, the margin is for loaded CI machines.
	StartTimeout time.Duration
	// ConfigFile, when set, is a ClickHouse server configuration file
	// (XML or YAML): remote_servers for a cluster of engines, macros,
	// users. It is copied at every start into Dir's chengine.d, which the
	// engine merges over its own configuration (the log); the ports and the
	// path above win over its settings.
	ConfigFile string
	// Guard puts a guard in front of the native port (TCPPort): the
	// engine listens on another loopback port, and the guard forwards
	// only connections that open with a ClickHouse Hello whose login the
	// engine accepts, answering the others itself (a wrong password, an
	// unknown user, a TLS ClientHello, HTTP), and ends a client's reset
	// connection with a FIN. Each of those aborts this engine (package
	// doc); the guard costs a copy of every byte (chengine/README.md).
	Guard bool
}

// Server is a running engine child process. Its methods are safe for
// concurrent use.
type Server struct {
	addr, httpAddr string
	engineAddr     string // the engine's own native port: addr, or behind guard
	guard          *guard // nil without Options.Guard
	cmd            *exec.Cmd
	parentEnd      *os.File // write end of the child's stdin; see package doc
	out            *tailWriter
	logPath        string // the engine's log (LogPath)
	logFrom        int64  // its size when this engine started
	started        time.Time
	done           chan struct{} // closed when the child has exited
	waitErr        error         // set before done is closed
	stopping       atomic.Bool
	stopOnce       sync.Once
	log            *slog.Logger
}

// Addr is the native protocol address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// EngineAddr is the engine's own native port: Addr, or with
// Options.Guard the one behind the guard.
func (s *Server) EngineAddr() string { return s.engineAddr }

// HTTPAddr is the HTTP interface address, "127.0.0.1:port".
func (s *Server) HTTPAddr() string { return s.httpAddr }

// PID is the engine child's process id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// ErrNotBuilt is the error of Start, and of Built, in a binary built with
// -tags nochengine (the production image's: see serve_none.go).
var ErrNotBuilt = errors.New("chengine: this binary was built without the embedded engine (-tags nochengine): run it against your own Kafka and ClickHouse")

// Built returns ErrNotBuilt when this binary cannot run the engine, nil
// when it can: a caller asks it before looking for the library, whose
// absence is not the cause then.
func Built() error {
	if !built {
		return ErrNotBuilt
	}
	return nil
}

// Start launches the engine in a child process and returns once both the
// native port answers a clickhouse-go Ping and HTTP /ping answers "Ok.". If it
// fails, the error carries the tail of the engine's output. When the ports
// were picked by Start (0) and lost to a race, it retries with new ones.
// ctx bounds the start only; the server then runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Dir == "" {
		return nil, errors.New("chengine: Options.Dir is required")
	}
	if err := Built(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	var err error
	if opts.Lib == "" {
		if opts.Lib, err = Find(""); err != nil {
			return nil, err
		}
	} else if opts.Lib, err = checkLib(opts.Lib, "Options.Lib"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("chengine: data dir: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		s, err := start(ctx, opts)
		var busy *portBusyError
		if errors.As(err, &busy) && opts.TCPPort == 0 && opts.HTTPPort == 0 && attempt < 3 {
			opts.Logger.Info("chengine: picked port was taken, retrying", "err", err)
			continue
		}
		return s, err
	}
}

// portBusyError marks a start that failed only because a port was taken.
type portBusyError struct{ error }

func (e *portBusyError) Unwrap() error { return e.error }

func start(ctx context.Context, opts Options) (*Server, error) {
	t0 := time.Now()
	tcpPort, httpPort, err := pickPorts(opts.TCPPort, opts.HTTPPort)
	if err != nil {
		return nil, err
	}
	cfgArgs, err := writeConfig(opts.Dir, opts.ConfigFile)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tcpPort))
	httpAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(httpPort))
	engineAddr := addr
	var g *guard
	if opts.Guard {
		// The guard holds the public port from now on; the engine gets a
		// free one.
		var enginePort int
		if enginePort, _, err = pickPorts(0, httpPort); err != nil {
			return nil, err
		}
		engineAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(enginePort))
		if g, err = startGuard(addr, engineAddr, httpAddr, opts.Logger); err != nil {
			err = fmt.Errorf("chengine: guard of the native port: %w", err)
			if errors.Is(err, syscall.EADDRINUSE) {
				err = &portBusyError{err}
			}
			return nil, err
		}
		tcpPort = enginePort
	}
	argv := append([]string{"clickhouse"}, cfgArgs...)
	argv = append(argv,
		"--path="+opts.Dir,
		"--tcp_port="+strconv.Itoa(tcpPort), // the engine's: behind the guard if any
		"--http_port="+strconv.Itoa(httpPort),
		"--listen_host=127.0.0.1",
		"--query=SYSTEM START LISTEN QUERIES ALL; "+keepAlive,
	)
	fail := func(err error) (*Server, error) {
		if g != nil {
			g.close()
		}
		return nil, err
	}
	spec, err := json.Marshal(childSpec{Lib: opts.Lib, Argv: argv})
	if err != nil {
		return fail(fmt.Errorf("chengine: %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(fmt.Errorf("chengine: cannot re-execute self: %w", err))
	}
	childEnd, parentEnd, err := os.Pipe()
	if err != nil {
		return fail(fmt.Errorf("chengine: %w", err))
	}
	s := &Server{
		addr:       addr,
		httpAddr:   httpAddr,
		engineAddr: engineAddr,
		guard:      g,
		parentEnd:  parentEnd,
		out:        &tailWriter{max: 8 << 10, log: opts.Logger},
		logPath:    LogPath(opts.Dir),
		logFrom:    logSize(LogPath(opts.Dir)),
		started:    t0,
		done:       make(chan struct{}),
		log:        opts.Logger,
	}
	s.cmd = &exec.Cmd{
		Path:        exe,
		Args:        []string{"chengine-engine"}, // what ps shows
		Env:         childEnv(os.Environ(), spec),
		Stdin:       childEnd,
		Stdout:      s.out,
		Stderr:      s.out,
		SysProcAttr: sysProcAttr(),
	}
	err = s.cmd.Start()
	childEnd.Close() // only the child may hold the read end
	if err != nil {
		parentEnd.Close()
		return fail(fmt.Errorf("chengine: start child %s: %w", exe, err))
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		if g != nil {
			g.close() // frees the port for the next engine
		}
		close(s.done)
	}()
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		out := s.out.String()
		err = fmt.Errorf("chengine: engine (lib %s, dir %s) not ready: %w\nengine output:\n%s", opts.Lib, opts.Dir, err, out)
		if strings.Contains(out, "Address already in use") {
			err = &portBusyError{err}
		}
		return nil, err
	}
	s.log.Info("chengine: ready", "addr", s.addr, "http", s.httpAddr, "engine_addr", s.engineAddr, "dir", opts.Dir,
		"pid", s.cmd.Process.Pid, "took", time.Since(t0).Round(time.Millisecond))
	return s, nil
}

// waitReady polls until the engine answers on both ports, the child exits, or
// ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if last = s.ping(ctx); last == nil {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("child exited: %v", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w (last probe: %v)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// ping checks that the HTTP interface and the native protocol both answer.
func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.httpAddr+"/ping", nil)
	if err != nil {
		return err
	}
	// A fresh transport without keep-alives leaves no idle connection (and
	// goroutine) behind for leak checkers.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("http: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	resp.Body.Close()
	if string(body) != "Ok.\n" {
		return fmt.Errorf("http /ping: %s %q", resp.Status, body)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.addr}, DialTimeout: 2 * time.Second})
	if err != nil {
		return fmt.Errorf("native: %w", err)
	}
	defer conn.Close()
	if err := conn.Ping(ctx); err != nil {
		return fmt.Errorf("native: %w", err)
	}
	return nil
}

// Stop kills the engine with SIGKILL (the engine's own signal handling makes
// gentler signals unreliable) and waits for it to exit, so its ports are
// closed and its Dir unlocked when Stop returns. It is idempotent; it returns
// an error only if the child could not be killed.
func (s *Server) Stop() error {
	var err error
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		if kerr := s.cmd.Process.Kill(); kerr != nil && !errors.Is(kerr, os.ErrProcessDone) {
			err = fmt.Errorf("chengine: kill engine: %w", kerr)
		}
		s.parentEnd.Close()
		<-s.done
		s.log.Info("chengine: stopped", "addr", s.addr)
	})
	return err
}

// Wait blocks until the engine exits. It returns nil if Stop ended it, and an
// error with the engine's output tail if it died on its own (for example a
// KILL QUERY on the keep-alive query, or a crash).
func (s *Server) Wait() error {
	<-s.done
	if s.stopping.Load() {
		return nil
	}
	return fmt.Errorf("%w\nengine output:\n%s\nengine log (%s):\n%s", s.exitError(), s.out.String(), s.logPath, s.lastLog())
}

// exitError says how a child that ended on its own ended: its exit status
// or signal.
func (s *Server) exitError() error {
	return fmt.Errorf("chengine: engine exited unexpectedly: %v", s.waitErr)
}

// lastLog is what this engine's log (LogPath) says went wrong last: its
// last error and fatal lines, from the last 256 KB it wrote.
func (s *Server) lastLog() string { return lastWords(logTail(s.logPath, s.logFrom, 256<<10), 20) }

// pickPorts returns the requested ports, replacing each 0 with a free one.
// Both probe listeners stay open until both are chosen so they differ; the
// gap between closing them and the engine binding is covered by Start's retry.
func pickPorts(tcpPort, httpPort int) (int, int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	pick := func(p *int) error {
		if *p != 0 {
			return nil
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("chengine: pick free port: %w", err)
		}
		ls = append(ls, l)
		*p = l.Addr().(*net.TCPAddr).Port
		return nil
	}
	if err := pick(&tcpPort); err != nil {
		return 0, 0, err
	}
	if err := pick(&httpPort); err != nil {
		return 0, 0, err
	}
	return tcpPort, httpPort, nil
}

// tailWriter keeps the last max bytes of the engine's output for error
// messages, and forwards each write to the logger at Debug.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
	max int
	log *slog.Logger
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.log.Debug("chengine: engine output", "text", strings.TrimRight(string(p), "\n"))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.max:]...)
	}
	return len(p), nil
}

// lastLines returns the last n lines kept.
func (w *tailWriter) lastLines(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	b := bytes.TrimRight(w.buf, "\n")
	for end := len(b); n > 0; n-- {
		i := bytes.LastIndexByte(b[:end], '\n')
		if i < 0 {
			return string(b)
		}
		end = i
		if n == 1 {
			return string(b[i+1:])
		}
	}
	return ""
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// EnvMallocConf is the environment variable that the engine's allocator
// (jemalloc, built with the "je_" prefix) reads its options from.
const EnvMallocConf = "JE_MALLOC_CONF"

// DefaultMallocConf is the allocator option the engine child gets when
// EnvMallocConf is not set: freed pages stay with the allocator for 30 s
// before they go back to the system (ClickHouse's build says 5 s). The
// engine allocates and frees a block's worth of buffers for every INSERT
// and merge; at one INSERT a second, 5 s of decay returned much of that
// memory to the kernel between inserts, and every reuse then took a page
// fault. Measured on 1M-call pipeline runs (five pairs, a fresh engine each
// run, in both orders): a fifth to a third fewer page faults, engine CPU
// -4% to -16% in four pairs and no change in one, for a higher resident set
// (the last 30 s's peak is kept, about 50-100 MB more here). An
// INSERT-heavy engine that runs on its own wants the same trade as a
// dedicated ClickHouse server.
const DefaultMallocConf = "dirty_decay_ms:30000"

// childEnv is the engine child's environment: env, the child's job, and
// DefaultMallocConf unless env sets EnvMallocConf (even to "").
func childEnv(env []string, spec []byte) []string {
	out := append(slices.Clip(env), envChild+"="+string(spec))
	for _, kv := range env {
		if strings.HasPrefix(kv, EnvMallocConf+"=") {
			return out
		}
	}
	return append(out, EnvMallocConf+"="+DefaultMallocConf)
}
