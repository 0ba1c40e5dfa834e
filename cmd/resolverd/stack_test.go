package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestStackCommand: `resolverd stack` on free ports serves the engine's
// readiness and supervision metrics, and stops cleanly on its context.
func TestStackCommand(t *testing.T) {
	need.Engine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb lockedbuf.Buffer
	done := make(chan int, 1)
	// --clickhouse-config reaches the engine: the embedded engine keeps
	// no query_log unless a configuration asks for one.
	cfg := filepath.Join(t.TempDir(), "querylog.xml")
	if err := os.WriteFile(cfg, []byte("<clickhouse><query_log><database>system</database><table>query_log</table></query_log></clickhouse>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		done <- run(ctx, []string{"stack", "--dir", t.TempDir(), "--kafka-port", "0", "--clickhouse-port", "0",
			"--clickhouse-http-port", "0", "--http", "127.0.0.1:0", "--clickhouse-config", cfg}, stdio{strings.NewReader(""), &out, &errb})
	}()
	up := regexp.MustCompile(`metrics and readyz http://(\S+); Ctrl-C stops`)
	var status string
	for deadline := time.Now().Add(60 * time.Second); status == ""; {
		select {
		case code := <-done:
			t.Fatalf("stack exited %d:\n%s", code, errb.String())
		default:
		}
		if m := up.FindStringSubmatch(out.String()); m != nil {
			status = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("stack not up after 60 s:\n%s\n%s", out.String(), errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(out.String(), ":19092") || strings.Contains(out.String(), ":19000") {
		t.Fatalf("--*-port 0 did not pick free ports: %s", out.String())
	}
	if code, body := httpGet(t, "http://"+status+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	chHTTP := regexp.MustCompile(`\(http (\S+)\)`).FindStringSubmatch(out.String())
	if chHTTP == nil {
		t.Fatalf("no engine HTTP address in %q", out.String())
	}
	if resp, err := http.Post("http://"+chHTTP[1]+"/", "text/plain", strings.NewReader("SYSTEM FLUSH LOGS")); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	q := "http://" + chHTTP[1] + "/?query=" + url.QueryEscape("SELECT count() FROM system.tables WHERE database = 'system' AND name = 'query_log'")
	if code, body := httpGet(t, q); code != 200 || body != "1\n" {
		t.Errorf("--clickhouse-config: system.query_log: %d %q, want it present", code, body)
	}
	_, metrics := httpGet(t, "http://"+status+"/metrics")
	for _, want := range []string{"toolaudit_engine_up 1", "toolaudit_engine_restarts_total 0", "toolaudit_engine_start_failures_total 0"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("stack exited %d after its context ended:\n%s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("stack did not stop")
	}
}

// TestStackHTTPBusy: a taken --http address is an error that names the
// flag, before anything starts.
func TestStackHTTPBusy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, stderr := runCmd(t, "", "stack", "--dir", t.TempDir(), "--kafka-port", "0", "--clickhouse-port", "0",
		"--clickhouse-http-port", "0", "--http", l.Addr().String())
	if code != 1 || !strings.Contains(stderr, "--http "+l.Addr().String()) || strings.Contains(stderr, "chengine: ready") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}
