package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.IgnoreIdleHTTP()) }

var fast = Config{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, KeepAlive: -1, TerminateWait: 200 * time.Millisecond, ListTimeout: 2 * time.Second}

// lister records listings; it fails while fail is set.
type lister struct {
	mu    sync.Mutex
	lists [][]string
	fail  error
}

func (l *lister) Listed(_ context.Context, _ string, tools []*mcp.Tool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	var names []string
	for _, t := range tools {
		names = append(names, t.Name)
	}
	l.lists = append(l.lists, names)
	return nil
}

func (l *lister) n() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.lists) }

func (l *lister) setFail(err error) { l.mu.Lock(); l.fail = err; l.mu.Unlock() }

// run starts u until the test ends.
func run(t *testing.T, u *Upstream) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- u.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancellation")
		}
	})
}

func serveHTTP(t *testing.T, s *mcp.Server) string {
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv.URL
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestRelistCoalesced: a storm of list_changed notifications makes a few
// listings, at least RelistInterval apart, and the last one is current.
func TestRelistCoalesced(t *testing.T) {
	f := gatewaytest.NewFixture("s")
	l := &lister{}
	cfg := fast
	cfg.Name, cfg.URL, cfg.RelistInterval = "s", serveHTTP(t, f.Server), 300*time.Millisecond
	u, err := New(cfg, l, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	run(t, u)
	waitFor(t, "the first listing", u.Ready)
	schema := json.RawMessage(`{"type":"object"}`)
	begin := time.Now()
	for i := range 50 {
		f.Server.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%02d", i), InputSchema: schema}, nil)
		time.Sleep(2 * time.Millisecond) // beyond the SDK's 10ms debounce now and then
	}
	waitFor(t, "the last tool listed", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		last := l.lists[len(l.lists)-1]
		return len(last) == 6+50
	})
	took := time.Since(begin)
	// At most one listing per RelistInterval after the first, plus the one
	// queued.
	if n, most := l.n()-1, int(took/cfg.RelistInterval)+2; n > most {
		t.Errorf("%d listings in %v for 50 changes (at most %d)", n, took, most)
	}
}

// TestListingBounds: a listing beyond MaxTools fails, and the upstream is
// not called meanwhile; a Lister error is retried until it succeeds.
func TestListingBounds(t *testing.T) {
	f := gatewaytest.NewFixture("s")
	url := serveHTTP(t, f.Server)
	t.Run("max tools", func(t *testing.T) {
		l := &lister{}
		cfg := fast
		cfg.Name, cfg.URL, cfg.MaxTools = "s", url, 3
		u, _ := New(cfg, l, nil, nil)
		run(t, u)
		time.Sleep(200 * time.Millisecond)
		if u.Ready() || l.n() != 0 {
			t.Fatalf("ready %v after %d listings of 6 tools with MaxTools 3", u.Ready(), l.n())
		}
		if _, err := u.Call(context.Background(), "echo", json.RawMessage(`{"message":"x"}`)); !errors.Is(err, ErrUnavailable) {
			t.Errorf("call: %v", err)
		}
	})
	t.Run("lister retried", func(t *testing.T) {
		l := &lister{fail: errors.New("broker down")}
		cfg := fast
		cfg.Name, cfg.URL = "s", url
		u, _ := New(cfg, l, nil, nil)
		run(t, u)
		time.Sleep(150 * time.Millisecond)
		if u.Ready() {
			t.Fatal("ready with the listing not recorded")
		}
		l.setFail(nil)
		waitFor(t, "the listing retried", u.Ready)
		res, err := u.Call(context.Background(), "echo", json.RawMessage(`{"message":"x"}`))
		if err != nil || res.IsError {
			t.Fatalf("call: %v %v", res, err)
		}
	})
}

// logs captures log records.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.Write(p) }
func (l *logs) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.buf.String() }

// TestCommandFailures: a command that exits, one that does not exist and
// one that never answers are restarted with a backoff, what the first
// printed is logged, and Run still ends at once when asked.
func TestCommandFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		log  string
	}{
		{"exits", []string{"/bin/sh", "-c", "echo the server broke >&2; exit 3"}, "the server broke"},
		{"missing", []string{"/nonexistent/server"}, "no such file"},
		{"silent", []string{"/bin/sleep", "60"}, "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lg logs
			m, _ := NewMetrics(nil)
			cfg := fast
			cfg.Name, cfg.Command, cfg.ListTimeout = "s", tc.argv, 300*time.Millisecond
			u, err := New(cfg, &lister{}, slog.New(slog.NewTextHandler(&lg, nil)), m)
			if err != nil {
				t.Fatal(err)
			}
			run(t, u)
			waitFor(t, "two restarts", func() bool { return strings.Count(lg.String(), "reconnecting") >= 2 })
			if !strings.Contains(lg.String(), tc.log) {
				t.Errorf("logs lack %q:\n%s", tc.log, lg.String())
			}
			begin := time.Now()
			if _, err := u.Call(context.Background(), "echo", nil); !errors.Is(err, ErrUnavailable) || time.Since(begin) > 100*time.Millisecond {
				t.Errorf("call to a failing upstream: %v after %v", err, time.Since(begin))
			}
		})
	}
}

// TestEnvironment: a command gets exactly Config.Env.
func TestEnvironment(t *testing.T) {
	t.Setenv("GATEWAY_SECRET", "s3cret")
	var lg logs
	var listed atomic.Bool
	cfg := fast
	cfg.Name = "s"
	cfg.Command = []string{"/bin/sh", "-c", "env >&2; exit 1"}
	cfg.Env = []string{"ONLY=this"}
	u, _ := New(cfg, ListerFunc(func(context.Context, string, []*mcp.Tool) error { listed.Store(true); return nil }), slog.New(slog.NewTextHandler(&lg, &slog.HandlerOptions{Level: slog.LevelDebug})), nil)
	run(t, u)
	waitFor(t, "the command's output", func() bool { return strings.Contains(lg.String(), "ONLY=this") })
	if strings.Contains(lg.String(), "s3cret") {
		t.Errorf("the command saw the gateway's environment:\n%s", lg.String())
	}
}

func TestTail(t *testing.T) {
	var lg logs
	tl := newTail(slog.New(slog.NewTextHandler(&lg, nil)), 3)
	tl.Write([]byte("one\ntwo\nthr"))
	tl.Write([]byte("ee\r\nfour\n" + strings.Repeat("x", 5000) + "\nfive"))
	got := tl.last()
	want := []string{"four", strings.Repeat("x", maxLine), "five"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("last lines %q", got)
	}
	if len(tl.last()) != 0 {
		t.Error("lines kept after last")
	}
}
