package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

func TestUsage(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"--help"}, io.Discard, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: err = %v", err)
	}
	if !strings.Contains(out.String(), "chengine serve --dir DIR") {
		t.Fatalf("usage lacks serve: %s", out.String())
	}
	for _, args := range [][]string{nil, {"bogus"}, {"serve"}} {
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}

// TestServe runs `chengine serve` until its context ends, the way a signal
// would end it, and checks the printed HTTP address answers meanwhile.
func TestServe(t *testing.T) {
	need.Engine(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--dir", t.TempDir()}, pw, io.Discard)
		pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var httpAddr string
	for httpAddr == "" && lines.Scan() {
		if a, ok := strings.CutPrefix(lines.Text(), "http "); ok {
			httpAddr = a
		}
	}
	if httpAddr == "" {
		t.Fatalf("serve printed no http address: %v", <-done)
	}
	go io.Copy(io.Discard, pr)
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + httpAddr + "/ping")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
}
