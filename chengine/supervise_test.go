package chengine_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
)

// recorder is a slog handler that keeps Info and above, so tests can check
// what the supervisor said.
type recorder struct {
	mu   sync.Mutex
	recs []logRecord
}

type logRecord struct {
	msg   string
	attrs map[string]string
}

func (r *recorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *recorder) WithGroup(string) slog.Handler                { return r }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	lr := logRecord{msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		lr.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.recs = append(r.recs, lr)
	r.mu.Unlock()
	return nil
}

func (r *recorder) find(msg string) []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, lr := range r.recs {
		if lr.msg == msg {
			out = append(out, lr)
		}
	}
	return out
}

// metric is the value of one of the supervisor's metrics in reg.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return chenginetest.EngineMetric(t, reg, name)
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSuperviseRestarts: however the engine dies, the supervisor logs how
// (exit status, the engine's own report in its log), reports not ready,
// and starts a new engine on the same data and address, counted in the
// restart metric.
func TestSuperviseRestarts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		crash  func(t *testing.T, sup *chengine.Supervisor)
		record string // what the supervisor logs
		attr   string // the record's attribute that says why
		says   string // in it
	}{
		// The engine's handler logs a fatal report and takes 4 s to die:
		// the supervisor reads the report and kills it at once.
		{"abort", func(t *testing.T, sup *chengine.Supervisor) {
			syscall.Kill(sup.Server().PID(), syscall.SIGABRT)
		}, "chengine: engine failed; killing it", "engine_log", "Received signal"},
		{"SIGKILL", func(t *testing.T, sup *chengine.Supervisor) {
			syscall.Kill(sup.Server().PID(), syscall.SIGKILL)
		}, "chengine: engine exited unexpectedly", "status", "signal: killed"},
		{"keep-alive query killed", func(t *testing.T, sup *chengine.Supervisor) {
			exec(t, open(t, sup.Addr()), "KILL QUERY WHERE query LIKE '%sleepEachRow%' AND query NOT LIKE '%KILL%' SYNC")
		}, "chengine: engine exited unexpectedly", "status", "exit status 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			rec := &recorder{}
			sup := chenginetest.Supervise(t, chengine.Options{Logger: slog.New(rec)},
				chengine.WithRegisterer(reg), chengine.WithBackoff(300*time.Millisecond, 5*time.Second), chengine.WithProbe(100*time.Millisecond, time.Minute))
			addr, first := sup.Addr(), sup.Server().PID()
			if err := sup.Ready(); err != nil || metric(t, reg, "toolaudit_engine_up") != 1 {
				t.Fatalf("fresh engine: ready %v, up %v", err, metric(t, reg, "toolaudit_engine_up"))
			}
			conn := open(t, addr)
			exec(t, conn, fmt.Sprintf(events, "default.kept"))
			insert(t, conn, "default.kept", 0, 100, 1, "x", time.Now())
			conn.Close()

			tc.crash(t, sup)
			// Not ready from the exit until the new engine answers (at
			// least the 300 ms backoff plus a start).
			eventually(t, 10*time.Second, "reported down", func() bool { return sup.Ready() != nil })
			if metric(t, reg, "toolaudit_engine_up") != 0 {
				t.Fatal("toolaudit_engine_up is 1 while the engine is down")
			}
			eventually(t, 30*time.Second, "restarted", func() bool { return sup.Ready() == nil && sup.Restarts() == 1 })

			if sup.Addr() != addr || sup.Server().PID() == first {
				t.Fatalf("after restart: %s pid %d, before %s pid %d", sup.Addr(), sup.Server().PID(), addr, first)
			}
			if n := count(t, open(t, addr), "SELECT count() FROM default.kept"); n != 100 {
				t.Fatalf("after restart count = %d, want 100", n)
			}
			if got := metric(t, reg, "toolaudit_engine_restarts_total"); got != 1 {
				t.Fatalf("toolaudit_engine_restarts_total = %v, want 1", got)
			}
			if got := metric(t, reg, "toolaudit_engine_up"); got != 1 {
				t.Fatalf("toolaudit_engine_up = %v after restart", got)
			}
			downs := rec.find(tc.record)
			if len(downs) != 1 {
				t.Fatalf("%d %q records, want 1", len(downs), tc.record)
			}
			if got := downs[0].attrs[tc.attr]; !strings.Contains(got, tc.says) {
				t.Errorf("logged %s does not say %q:\n%s", tc.attr, tc.says, got)
			}
			if len(rec.find("chengine: engine restarted")) != 1 {
				t.Error("no restart record")
			}
		})
	}
}

// TestSuperviseHang: an engine that stops answering (here: stopped with
// SIGSTOP) is reported not ready, then killed and restarted.
func TestSuperviseHang(t *testing.T) {
	rec := &recorder{}
	sup := chenginetest.Supervise(t, chengine.Options{Logger: slog.New(rec)},
		chengine.WithBackoff(100*time.Millisecond, time.Second), chengine.WithProbe(200*time.Millisecond, 3*time.Second))
	hung := sup.Server().PID()
	syscall.Kill(hung, syscall.SIGSTOP)
	eventually(t, 10*time.Second, "reported not answering", func() bool {
		err := sup.Ready()
		return err != nil && strings.Contains(err.Error(), "not answering")
	})
	if sup.Restarts() != 0 {
		t.Fatal("restarted before the hang timeout")
	}
	eventually(t, 30*time.Second, "restarted", func() bool { return sup.Ready() == nil && sup.Restarts() == 1 })
	if len(rec.find("chengine: engine stopped answering; killing it")) != 1 {
		t.Fatal("no record of the kill")
	}
	if err := syscall.Kill(hung, 0); err == nil {
		t.Fatal("the hung engine still exists")
	}
}

// TestSuperviseStartFailures: while a restart cannot succeed (another
// process holds the engine's port), attempts are counted, logged and
// spaced by a doubling backoff; once the port is free the engine returns.
func TestSuperviseStartFailures(t *testing.T) {
	reg := prometheus.NewRegistry()
	rec := &recorder{}
	sup := chenginetest.Supervise(t, chengine.Options{Logger: slog.New(rec)},
		chengine.WithRegisterer(reg), chengine.WithBackoff(400*time.Millisecond, 1600*time.Millisecond), chengine.WithProbe(100*time.Millisecond, time.Minute))
	syscall.Kill(sup.Server().PID(), syscall.SIGKILL)
	// Take the port before the first restart (400 ms after the exit).
	var squat net.Listener
	eventually(t, 5*time.Second, "port taken", func() bool {
		var err error
		squat, err = net.Listen("tcp", sup.Addr())
		return err == nil
	})
	eventually(t, 60*time.Second, "four failed restarts", func() bool {
		return metric(t, reg, "toolaudit_engine_start_failures_total") >= 4
	})
	if sup.Ready() == nil || sup.Restarts() != 0 {
		t.Fatalf("ready %v, %d restarts while the port is taken", sup.Ready(), sup.Restarts())
	}
	squat.Close()
	eventually(t, 30*time.Second, "restarted", func() bool { return sup.Ready() == nil && sup.Restarts() == 1 })

	var waits []string
	for _, r := range rec.find("chengine: restarting the engine on its data") {
		waits = append(waits, r.attrs["in"])
	}
	if want := []string{"400ms", "800ms", "1.6s", "1.6s"}; len(waits) < 5 || strings.Join(waits[:4], " ") != strings.Join(want, " ") {
		t.Fatalf("waits before restarts %v, want %v then more", waits, want)
	}
	failed := rec.find("chengine: engine restart failed")
	if len(failed) < 4 || !strings.Contains(failed[0].attrs["err"], "Address already in use") {
		t.Fatalf("%d failure records, first %v", len(failed), failed)
	}
}

// TestSuperviseRefuses needs no engine: nonsensical options are refused
// before anything starts, and a first start that fails leaves no metric
// registered (a caller may try again with the same registry).
func TestSuperviseRefuses(t *testing.T) {
	for _, o := range []chengine.SuperviseOption{
		chengine.WithBackoff(0, time.Second),
		chengine.WithBackoff(2*time.Second, time.Second),
		chengine.WithProbe(0, time.Second),
		chengine.WithProbe(time.Second, -1),
	} {
		if _, err := chengine.Supervise(context.Background(), chengine.Options{Dir: t.TempDir()}, o); err == nil || !strings.Contains(err.Error(), "bad supervision options") {
			t.Errorf("err = %v", err)
		}
	}
	junk := filepath.Join(t.TempDir(), "libchdb.so")
	if err := os.WriteFile(junk, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if _, err := chengine.Supervise(context.Background(), chengine.Options{Dir: t.TempDir(), Lib: junk}, chengine.WithRegisterer(reg)); err == nil {
		t.Fatal("Supervise with a junk library succeeded")
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Fatalf("%d metric families left registered", len(mfs))
	}
}

// dialRecorder opens connections to the engine that the test can reset.
func dialRecorder(t *testing.T, addr string) (driver.Conn, func() *net.TCPConn) {
	t.Helper()
	var mu sync.Mutex
	var last *net.TCPConn
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}, MaxOpenConns: 1,
		DialContext: func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err == nil {
				mu.Lock()
				last = c.(*net.TCPConn)
				mu.Unlock()
			}
			return c, err
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, func() *net.TCPConn { mu.Lock(); defer mu.Unlock(); return last }
}

// reset closes c with an RST, as the kernel closes the sockets of a
// process that died with unread data in them.
func reset(c *net.TCPConn) {
	c.SetLinger(0)
	c.Close()
}

// TestResetBetweenQueries reproduces why the engine dies when a client is
// killed (package doc). A connection reset while the engine reads an
// INSERT's data is logged and nothing more; a reset while the engine
// waits for the connection's next query aborts it. The supervisor brings
// it back.
func TestResetBetweenQueries(t *testing.T) {
	rec := &recorder{}
	dir := t.TempDir()
	sup := chenginetest.Supervise(t, chengine.Options{Dir: dir, Logger: slog.New(rec)},
		chengine.WithBackoff(100*time.Millisecond, time.Second), chengine.WithProbe(100*time.Millisecond, time.Minute))
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(chengine.LogPath(dir))
			t.Logf("engine log:\n%s", b)
		}
	}()
	exec(t, open(t, sup.Addr()), fmt.Sprintf(events, "default.reset"))

	// Mid-INSERT: the INSERT is sent, the engine waits for its data.
	conn, tcp := dialRecorder(t, sup.Addr())
	if _, err := conn.PrepareBatch(context.Background(), "INSERT INTO default.reset"); err != nil {
		t.Fatal(err)
	}
	reset(tcp())
	// An abort would end the engine about 4 s later (package doc).
	time.Sleep(6 * time.Second)
	if downs := append(rec.find("chengine: engine exited unexpectedly"), rec.find("chengine: engine failed; killing it")...); len(downs) != 0 || sup.Restarts() != 0 {
		t.Fatalf("the engine died after a reset mid-INSERT: %v", downs)
	}
	if b, _ := os.ReadFile(chengine.LogPath(dir)); !strings.Contains(string(b), "Connection reset by peer, while reading from socket") {
		t.Fatal("the engine did not see the reset")
	}

	// Between queries: the connection answered a ping and is idle.
	conn, tcp = dialRecorder(t, sup.Addr())
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	reset(tcp())
	eventually(t, 30*time.Second, "restarted", func() bool { return sup.Restarts() == 1 && sup.Ready() == nil })
	// Seen either way, whichever comes first: the fatal line in the
	// engine's log (the supervisor kills it), or the process's exit.
	failed := append(rec.find("chengine: engine failed; killing it"), rec.find("chengine: engine exited unexpectedly")...)
	if len(failed) != 1 || !strings.Contains(failed[0].attrs["engine_log"], "Terminate called for uncaught exception") ||
		!strings.Contains(failed[0].attrs["engine_log"], "Code: 210. DB::NetException: Connection reset by peer, while reading from socket") {
		t.Fatalf("records %v", failed)
	}
	if why, ok := failed[0].attrs["why"]; ok && !strings.HasPrefix(why, "uncaught exception: Code: 210. DB::NetException: Connection reset by peer, while reading from socket") {
		t.Fatalf("why %q", why)
	}
	t.Logf("%s; engine's last words:\n%s", failed[0].msg, failed[0].attrs["engine_log"])
}
