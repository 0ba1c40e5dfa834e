package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/internal/testkit/browsertest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/schema"
)

func TestMain(m *testing.M) {
	gatewaytest.ServeFixtureIfChild()
	leakcheck.Main(m, leakcheck.After(browsertest.Close))
}

// gatewayConfig writes a configuration with the fixture (this binary) as
// its one upstream, and the top-level lines extra.
func gatewayConfig(t *testing.T, extra ...string) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "gateway.yaml")
	cfg := fmt.Sprintf("registry: cmdtest\n"+strings.Join(append(extra, ""), "\n")+"upstreams:\n  - name: fx\n    trust: 1\n    command: [%q]\n    env: {%s: fx}\n", exe, gatewaytest.FixtureEnv)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestGatewayUsage(t *testing.T) {
	cfg := gatewayConfig(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("upstream: []\n"), 0o600)
	kf, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"help", []string{"gateway", "--help"}, 0, "--config"},
		{"no config", []string{"gateway"}, 2, "needs --config"},
		{"missing config", []string{"gateway", "--config", "/nonexistent.yaml"}, 2, "no such file"},
		{"bad config", []string{"gateway", "--config", bad}, 2, "unknown field"},
		{"arguments", []string{"gateway", "--config", cfg, "x"}, 2, "unexpected arguments"},
		{"no topic", []string{"gateway", "--config", cfg, "--brokers", kf.ListenAddrs()[0], "--listen", "127.0.0.1:0"}, 1, "topic tool-listings does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out+stderr, tc.msg) {
				t.Fatalf("exit %d, want %d; output lacks %q:\n%s%s", code, tc.code, tc.msg, out, stderr)
			}
		})
	}
}

// TestGatewayCommand runs resolverd gateway against an embedded broker:
// it becomes ready, serves /mcp and /metrics, produces the upstream's
// listing, and stops on cancellation.
func TestGatewayCommand(t *testing.T) {
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "tool-listings", "tool-audit"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var stderr strings.Builder
	go func() {
		done <- run(ctx, []string{"gateway", "--config", gatewayConfig(t), "--brokers", kf.ListenAddrs()[0], "--listen", addr}, stdio{strings.NewReader(""), &stderr, &stderr})
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			cancel()
			<-done
			t.Fatalf("not ready after 20s:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for path, want := range map[string]string{"/metrics": "toolaudit_gateway_upstream_up", "/healthz": "ok"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", path, want)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kf.ListenAddrs()...), kgo.ConsumeTopics("tool-listings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fctx, fcancel := context.WithTimeout(context.Background(), 10*time.Second)
	fs := cl.PollFetches(fctx)
	fcancel()
	recs := fs.Records()
	if len(recs) != 1 {
		t.Fatalf("%d listing records (%v)", len(recs), fs.Errors())
	}
	l, err := schema.DecodeListing(recs[0].Value)
	if err != nil || l.Registry != "cmdtest" || l.Server != "fx" || string(recs[0].Key) != "cmdtest/fx" || !recs[0].Timestamp.Equal(l.ObservedAt) || len(l.Tools) != 6 {
		t.Errorf("listing record key %s: %+v (%v)", recs[0].Key, l, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d:\n%s", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}
