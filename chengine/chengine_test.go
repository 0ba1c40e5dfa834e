package chengine_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

// TestMain runs one shared engine for the binary, then checks that neither
// the launcher nor the clickhouse-go connections (all closed by the tests)
// left goroutines behind.
func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }

func open(t *testing.T, addr string) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func exec(t *testing.T, conn driver.Conn, queries ...string) {
	t.Helper()
	for _, q := range queries {
		if err := conn.Exec(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func count(t *testing.T, conn driver.Conn, q string) uint64 {
	t.Helper()
	var n uint64
	if err := conn.QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

func insert(t *testing.T, conn driver.Conn, table string, from, n int, ver uint32, kind string, ts time.Time) {
	t.Helper()
	b, err := conn.PrepareBatch(context.Background(), "INSERT INTO "+table)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < from+n; i++ {
		if err := b.Append(uint64(i), ts.Add(time.Duration(i)*time.Millisecond), kind, ver); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
}

const events = `CREATE TABLE %s (
	id   UInt64,
	ts   DateTime64(3) CODEC(Delta, ZSTD),
	kind LowCardinality(String),
	ver  UInt32
) ENGINE = ReplacingMergeTree(ver) ORDER BY id`

func TestBatchAndFinal(t *testing.T) {
	srv := chenginetest.Server(t)
	conn := open(t, srv.Addr())
	if err := conn.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The server is shared (and -count reruns tests on it): start clean.
	exec(t, conn, "DROP DATABASE IF EXISTS final_test", "CREATE DATABASE final_test",
		fmt.Sprintf(events, "final_test.events"))
	ts := time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)
	insert(t, conn, "final_test.events", 0, 10_000, 1, "created", ts)
	if n := count(t, conn, "SELECT count() FROM final_test.events"); n != 10_000 {
		t.Fatalf("count = %d, want 10000", n)
	}
	// Re-insert ids 0..999 with a newer version: FINAL must keep only those.
	insert(t, conn, "final_test.events", 0, 1_000, 2, "updated", ts)
	if n := count(t, conn, "SELECT count() FROM final_test.events FINAL"); n != 10_000 {
		t.Fatalf("FINAL count = %d, want 10000", n)
	}
	if n := count(t, conn, "SELECT count() FROM final_test.events FINAL WHERE kind = 'updated'"); n != 1_000 {
		t.Fatalf("FINAL updated = %d, want 1000", n)
	}
	var got time.Time
	if err := conn.QueryRow(context.Background(), "SELECT ts FROM final_test.events FINAL WHERE id = 7").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := ts.Add(7 * time.Millisecond); !got.Equal(want) {
		t.Fatalf("ts = %v, want %v (DateTime64(3) keeps milliseconds)", got, want)
	}
}

// TestStopRestart: Stop closes the ports; data survives the SIGKILL and a
// restart on the same Dir and ports.
func TestStopRestart(t *testing.T) {
	dir := t.TempDir()
	srv := chenginetest.Start(t, chengine.Options{Dir: dir})
	conn := open(t, srv.Addr())
	exec(t, conn, fmt.Sprintf(events, "default.kept"))
	insert(t, conn, "default.kept", 0, 1234, 1, "x", time.Now())
	conn.Close()

	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := srv.Wait(); err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	for _, addr := range []string{srv.Addr(), srv.HTTPAddr()} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Fatalf("%s still accepts connections after Stop", addr)
		}
	}

	_, tcp, _ := net.SplitHostPort(srv.Addr())
	_, http, _ := net.SplitHostPort(srv.HTTPAddr())
	opts := chengine.Options{Dir: dir}
	fmt.Sscan(tcp, &opts.TCPPort)
	fmt.Sscan(http, &opts.HTTPPort)
	again := chenginetest.Start(t, opts)
	if again.Addr() != srv.Addr() {
		t.Fatalf("restart on %s, want %s", again.Addr(), srv.Addr())
	}
	if n := count(t, open(t, again.Addr()), "SELECT count() FROM default.kept"); n != 1234 {
		t.Fatalf("after restart count = %d, want 1234", n)
	}
}

// TestChildEnds covers the two ways the engine can end without Stop: its
// parent goes away (the stdin pipe closes) and its keep-alive query is
// killed. Wait must report both as unexpected.
func TestChildEnds(t *testing.T) {
	t.Run("parent pipe closed", func(t *testing.T) {
		srv := chenginetest.Start(t, chengine.Options{})
		chengine.ClosePipe(srv)
		waitExit(t, srv)
	})
	t.Run("keep-alive query killed", func(t *testing.T) {
		srv := chenginetest.Start(t, chengine.Options{})
		exec(t, open(t, srv.Addr()), "KILL QUERY WHERE query LIKE '%sleepEachRow%' AND query NOT LIKE '%KILL%' SYNC")
		waitExit(t, srv)
	})
}

func waitExit(t *testing.T, srv *chengine.Server) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unexpectedly") {
			t.Fatalf("Wait = %v, want an unexpected-exit error", err)
		}
	case <-time.After(30 * time.Second):
		// A killed keep-alive query ends the engine after its shutdown:
		// 2-3 s on an idle 2-core machine, 3.5-7 s with both cores busy,
		// over 10 s once with the e2e tests beside it.
		t.Fatal("engine still running after 30 s")
	}
	if err := syscall.Kill(srv.PID(), 0); err == nil {
		t.Fatal("child process still exists")
	}
}

// TestStartBadLib needs no engine: both a missing file and a file that is not
// a library must fail fast with an error naming the problem.
func TestStartBadLib(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "nope", "libchdb.so")
	_, err := chengine.Start(ctx, chengine.Options{Dir: t.TempDir(), Lib: missing})
	if !errors.Is(err, chengine.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("missing lib: err = %v", err)
	}

	junk := filepath.Join(t.TempDir(), "libchdb.so")
	if err := os.WriteFile(junk, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = chengine.Start(ctx, chengine.Options{Dir: t.TempDir(), Lib: junk})
	if err == nil || !strings.Contains(err.Error(), "child exited") || !strings.Contains(err.Error(), "load "+junk) {
		t.Fatalf("junk lib: err = %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Fatalf("junk lib took %v to fail", d)
	}

	if _, err := chengine.Start(ctx, chengine.Options{}); err == nil {
		t.Fatal("Start without Dir succeeded")
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(chengine.EnvLib, "")
	if _, err := chengine.Find(dir); !errors.Is(err, chengine.ErrNotFound) {
		t.Fatalf("empty dir: err = %v", err)
	}
	lib := fakeInstall(t, dir, chengine.PackageVersion)
	if got, err := chengine.Find(dir); err != nil || got != lib {
		t.Fatalf("Find = %q, %v; want %q", got, err, lib)
	}
	t.Setenv(chengine.EnvDir, dir)
	if got, err := chengine.Find(""); err != nil || got != lib {
		t.Fatalf("Find with %s = %q, %v", chengine.EnvDir, got, err)
	}
	t.Setenv(chengine.EnvLib, "/elsewhere/libchdb.so")
	if _, err := chengine.Find(dir); !errors.Is(err, chengine.ErrNotFound) || !strings.Contains(err.Error(), chengine.EnvLib) {
		t.Fatalf("%s must override dir: err = %v", chengine.EnvLib, err)
	}
}

// TestFetchOffline checks Fetch's decisions without the network: an install
// of the pinned version is left alone, and a missing npm is a clear error.
func TestFetchOffline(t *testing.T) {
	t.Setenv("PATH", t.TempDir()) // no npm
	ctx := context.Background()
	ok := t.TempDir()
	fakeInstall(t, ok, chengine.PackageVersion)
	if err := chengine.Fetch(ctx, ok); err != nil {
		t.Fatalf("Fetch of an installed dir: %v", err)
	}
	old := t.TempDir()
	fakeInstall(t, old, "1.0.0")
	if err := chengine.Fetch(ctx, old); err == nil || !strings.Contains(err.Error(), "needs npm") {
		t.Fatalf("Fetch of an old version without npm: err = %v", err)
	}
}

// TestFetchKeepsNoTarball: npm's cache is a temporary dir, removed after
// the install, and the dir/.npm cache of earlier versions is removed too.
// npm itself is a script here that does what `npm install --prefix` does
// to the tree, so the test needs no network.
func TestFetchKeepsNoTarball(t *testing.T) {
	bin := t.TempDir()
	npm := `#!/bin/sh
# fake npm: install --no-save --no-audit --no-fund --cache C --prefix P SPEC
while [ $# -gt 0 ]; do
  case "$1" in --cache) cache=$2; shift ;; --prefix) prefix=$2; shift ;; esac
  shift
done
[ -d "$cache" ] || { echo "no cache dir $cache" >&2; exit 1; }
echo tarball > "$cache/tarball.tgz"
pkg="$prefix/node_modules/@chdb/lib-linux-x64-gnu"
mkdir -p "$pkg" && : > "$pkg/libchdb.so" && echo '{"version":"` + chengine.PackageVersion + `"}' > "$pkg/package.json"
`
	if err := os.WriteFile(filepath.Join(bin, "npm"), []byte(npm), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":/usr/bin:/bin")
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, ".npm", "_cacache"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := chengine.Fetch(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	if _, err := chengine.Find(dir); err != nil {
		t.Fatalf("after Fetch: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".npm*"))
	if len(left) > 0 {
		t.Fatalf("npm cache left behind: %v", left)
	}
}

func fakeInstall(t *testing.T, dir, version string) string {
	t.Helper()
	pkg := filepath.Join(dir, "node_modules", "@chdb", "lib-linux-x64-gnu")
	if err := os.MkdirAll(pkg, 0o755); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(pkg, "libchdb.so")
	os.WriteFile(lib, nil, 0o644)
	os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"version":"`+version+`"}`), 0o644)
	return lib
}

// TestStartErrors: the engine's own refusals reach the caller verbatim.
func TestStartErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	chenginetest.Start(t, chengine.Options{Dir: dir})
	_, err := chengine.Start(ctx, chengine.Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "Another server instance in same directory") {
		t.Fatalf("second server on one Dir: err = %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = chengine.Start(ctx, chengine.Options{Dir: t.TempDir(), TCPPort: l.Addr().(*net.TCPAddr).Port})
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("busy port: err = %v", err)
	}
}

// TestStartCost logs what a start costs, for the README's numbers.
func TestStartCost(t *testing.T) {
	t0 := time.Now()
	srv := chenginetest.Start(t, chengine.Options{})
	took := time.Since(t0)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", srv.PID()))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			t.Logf("start took %v; child %s", took.Round(time.Millisecond), strings.Join(strings.Fields(line), " "))
		}
	}
}

// decayMs is the engine allocator's dirty page decay, as it reports it.
func decayMs(t *testing.T, conn driver.Conn) string {
	t.Helper()
	var stats string
	if err := conn.QueryRow(context.Background(), "SELECT * FROM system.jemalloc_stats").Scan(&stats); err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(stats, "opt.dirty_decay_ms: ")
	if !ok {
		t.Fatalf("no opt.dirty_decay_ms in system.jemalloc_stats:\n%.2000s", stats)
	}
	v, _, _ := strings.Cut(rest, " ")
	return v
}

// TestMallocConf: the engine gets DefaultMallocConf, unless the environment
// sets JE_MALLOC_CONF, which it then gets as it is. Private servers: the
// shared one may have started under another environment.
func TestMallocConf(t *testing.T) {
	if v, ok := os.LookupEnv(chengine.EnvMallocConf); ok {
		os.Unsetenv(chengine.EnvMallocConf)
		t.Cleanup(func() { os.Setenv(chengine.EnvMallocConf, v) })
	}
	srv := chenginetest.Start(t, chengine.Options{Dir: t.TempDir()})
	if got := decayMs(t, open(t, srv.Addr())); got != "30000" {
		t.Fatalf("default dirty_decay_ms = %s, want 30000 (%s)", got, chengine.DefaultMallocConf)
	}
	t.Setenv(chengine.EnvMallocConf, "dirty_decay_ms:7000")
	srv = chenginetest.Start(t, chengine.Options{Dir: t.TempDir()})
	if got := decayMs(t, open(t, srv.Addr())); got != "7000" {
		t.Fatalf("with %s=dirty_decay_ms:7000, dirty_decay_ms = %s", chengine.EnvMallocConf, got)
	}
}
