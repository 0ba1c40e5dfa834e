package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/toolaudit/toolaudit/internal/testkit/helptext"
	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/toolaudit/toolaudit/reanalyze"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

func corpus(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "testdata", "corpus"}, parts...)...)
}

func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, stdio{strings.NewReader(stdin), &out, &errb})
	return code, out.String(), errb.String()
}

func TestCheckCommand(t *testing.T) {
	calls, err := os.ReadFile(corpus("sample", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCmd(t, string(calls), "check", "--listings", corpus("sample", "listings.jsonl"), "--calls", "-")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 270 {
		t.Fatalf("%d decision lines, want 270", len(lines))
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil || first["event_id"] != "c-a5840a" || first["class"] != "H1" {
		t.Fatalf("first decision %v (%v)", first, err)
	}
	for _, want := range []string{"OK    allow    167", "MALFORMED   reject      2", "total", "mode strict, 270 calls"} {
		if !strings.Contains(strings.Join(strings.Fields(stderr), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("summary lacks %q:\n%s", want, stderr)
		}
	}
}

func TestCheckExitCodes(t *testing.T) {
	sample := corpus("sample", "listings.jsonl")
	tests := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no subcommand", nil, 2, "SUBCOMMANDS"},
		{"help", []string{"check", "--help"}, 0, "--listings"},
		{"missing flags", []string{"check"}, 2, "needs --listings and --calls"},
		{"unknown flag", []string{"check", "--bogus"}, 2, "bogus"},
		{"bad mode", []string{"check", "--listings", sample, "--calls", sample, "--mode", "lenient"}, 2, "unknown mode"},
		{"both stdin", []string{"check", "--listings", "-", "--calls", "-"}, 2, "stdin"},
		{"missing file", []string{"check", "--listings", "/nonexistent/l.jsonl", "--calls", sample}, 1, "no such file"},
		{"directory", []string{"check", "--listings", sample, "--calls", "."}, 1, "is a directory"},
		// A listings file passed as calls: every line is MALFORMED, not an exit.
		{"wrong file kind", []string{"check", "--listings", sample, "--calls", sample, "--quiet"}, 0, ""},
		{"bad formats", []string{"check", "--listings", sample, "--calls", sample, "--formats", "strict"}, 2, `--formats "strict": want annotate or assert`},
		{"absurd workers", []string{"check", "--listings", sample, "--calls", sample, "--workers", "3000000"}, 2, "--workers 3000000: want 1 to 256"},
		{"no workers", []string{"check", "--listings", sample, "--calls", sample, "--workers", "0"}, 2, "want 1 to 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, stderr := runCmd(t, "", tt.args...)
			if code != tt.code || !strings.Contains(stderr+out, tt.msg) {
				t.Fatalf("exit %d, want %d; output lacks %q:\n%s%s", code, tt.code, tt.msg, out, stderr)
			}
		})
	}
}

// TestCheckFormats: --formats assert refuses a string that is not of its
// format (H3), and stamps the policy; by default format is an annotation.
func TestCheckFormats(t *testing.T) {
	dir := t.TempDir()
	listings := filepath.Join(dir, "l.jsonl")
	if err := os.WriteFile(listings, []byte(`{"type":"listing","event_id":"l1","observed_at":"2026-12-01T00:00:00Z","registry":"r","server":"","op":"snapshot","tools":[{"name":"fetch","inputSchema":{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"required":["url"]}}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := `{"type":"call","event_id":"c1","emitted_at":"2026-12-01T00:00:01Z","registry":"r","tool":"fetch","arguments":{"url":"webarena.pdf"}}` + "\n"
	for _, tc := range []struct {
		formats, class, policy string
	}{{"annotate", `"class":"OK"`, "mode strict,"}, {"assert", `"class":"H3"`, "mode strict+formats,"}} {
		code, out, stderr := runCmd(t, calls, "check", "--listings", listings, "--calls", "-", "--formats", tc.formats)
		if code != 0 || !strings.Contains(out, tc.class) || !strings.Contains(stderr, tc.policy) {
			t.Errorf("--formats %s: exit %d, %s%s", tc.formats, code, out, stderr)
		}
	}
}

func TestCheckEnvConfig(t *testing.T) {
	t.Setenv("RESOLVERD_CHECK_MODE", "pin-assisted")
	code, _, stderr := runCmd(t, "", "check", "--listings", corpus("sample", "listings.jsonl"), "--calls", corpus("sample", "calls.jsonl"))
	if code != 0 || !strings.Contains(stderr, "mode pin-assisted") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
}

// TestRunBadFlags: `run` refuses unusable settings with a usage error
// (exit 2) naming the problem, before connecting to anything.
func TestRunBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--partition-buffer-mb", "0"}, "max partition buffer"},
		{[]string{"--batch-rows", "0"}, "batch rows"},
		{[]string{"--batch-wait", "0s"}, "batch wait"},
		{[]string{"--batch-mb", "0"}, "batch bytes"},
		{[]string{"--mode", "lenient"}, "mode"},
		{[]string{"--log-level", "loud"}, "log-level"},
		{[]string{"--clickhouse-compression", "gzip"}, "compression"},
		{[]string{"--kafka-sasl-mechanism", "gssapi"}, "--kafka-sasl-mechanism"},
		{[]string{"--kafka-sasl-mechanism", "plain"}, "needs --kafka-sasl-user"},
		{[]string{"--kafka-tls-cert", "c.pem"}, "both its file and its key"},
		{[]string{"--clickhouse-password-file", "/nonexistent/pw"}, "no such file"},
		{[]string{"--clickhouse-tls-ca", "/nonexistent/ca.pem"}, "no such file"},
		{[]string{"--clickhouse-password", "x"}, "flag provided but not defined"},
		{[]string{"--connect-timeout", "0s"}, "--connect-timeout"},
		{[]string{"--cluster", "two shards"}, "--cluster"},
		{[]string{"--http-tls-cert", "c.pem"}, "--http-tls-key"},
		{[]string{"--http-auth-probes"}, "--http-tokens-file"},
		{[]string{"--http-max-inflight", "0"}, "--http-max-*"},
		{[]string{"--http-max-inflight-mb", "1", "--http-max-body-kb", "2048"}, "less than one body"},
		{[]string{"--audit-timeout", "100ms"}, "--audit-timeout"},
		{[]string{"--audit-topic", "tool-calls"}, "audit topic"},
	} {
		args := append([]string{"run", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1", "--http", ""}, tc.args...)
		code, _, stderr := runCmd(t, "", args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestReportBadPoll: a zero poll interval is a usage error, not a busy loop.
func TestReportBadPoll(t *testing.T) {
	code, _, stderr := runCmd(t, "", "report", "--clickhouse", "127.0.0.1:1", "--expect", "1", "--poll", "0s")
	if code != 2 || !strings.Contains(stderr, "--poll") {
		t.Errorf("exit %d, stderr %q; want 2 and --poll", code, stderr)
	}
}

// TestHelpPlaceholders: every flag of every subcommand shows either its
// default or an upper-case placeholder in --help (helptext.Ambiguous).
func TestHelpPlaceholders(t *testing.T) {
	std := stdio{strings.NewReader(""), io.Discard, io.Discard}
	var walk func(prefix string, cs []*ffcli.Command)
	walk = func(prefix string, cs []*ffcli.Command) {
		for _, c := range cs {
			for _, bad := range helptext.Ambiguous(c.FlagSet) {
				t.Errorf("resolverd %s%s %s", prefix, c.Name, bad)
			}
			walk(prefix+c.Name+" ", c.Subcommands)
		}
	}
	walk("", rootCommand(std).Subcommands)
	code, _, stderr := runCmd(t, "", "migrate", "--help")
	if code != 0 || !strings.Contains(stderr, "-clickhouse-password-file FILE ") {
		t.Errorf("exit %d; migrate --help does not show the password's placeholder:\n%s", code, stderr)
	}
}

// TestEmbeddedPortTaken: a taken port of the embedded stack is refused
// before anything starts, naming the flag that moves it; a port out of
// range is a usage error.
func TestEmbeddedPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	taken := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	dir := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"stack", "--dir", dir, "--kafka-port", "0", "--clickhouse-port", taken, "--clickhouse-http-port", "0"}, 1, "--clickhouse-port " + taken + ": "},
		{[]string{"stack", "--dir", dir, "--kafka-port", taken}, 1, "--kafka-port " + taken + ": "},
		{[]string{"run", "--embedded", dir, "--http", "", "--embedded-kafka-port", "0", "--embedded-clickhouse-port", "0", "--embedded-clickhouse-http-port", taken}, 1, "--embedded-clickhouse-http-port " + taken + ": "},
		{[]string{"stack", "--dir", dir, "--kafka-port", "-1"}, 2, "port -1"},
		{[]string{"run", "--embedded", dir, "--embedded-clickhouse-port", "70000"}, 2, "port 70000"},
	}
	for _, tt := range tests {
		code, _, stderr := runCmd(t, "", tt.args...)
		if code != tt.code || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.code, tt.want)
		}
	}
}

// TestRegistryDiffUsage: registry diff refuses bad flags with a usage
// error before connecting.
func TestRegistryDiffUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"registry", "diff"}, "needs --registry"},
		{[]string{"registry", "diff", "--registry", "r", "--from", "yesterday"}, "--from"},
		{[]string{"registry", "diff", "--registry", "r", "--to", "5h"}, "--to"},
		{[]string{"registry", "diff", "--registry", "r", "--limit", "-1"}, "--limit"},
	} {
		code, _, stderr := runCmd(t, "", append(tc.args, "--clickhouse", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestClickHousePassword: the password comes from the file, else the
// TOOLAUDIT_ variable, else (deprecated, with a warning) the old
// RESOLVERD_ one; two current sources at once are refused; the password
// never reaches the log.
func TestClickHousePassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		file      string
		env       map[string]string
		want, err string
		warn      string
	}{
		{"none", "", nil, "", "", ""},
		{"file", file, nil, "from-file", "", ""},
		{"env", "", map[string]string{envClickHousePassword: "from-env"}, "from-env", "", ""},
		{"deprecated env", "", map[string]string{envClickHousePasswordDeprecated: "old"}, "old", "", "deprecated"},
		{"deprecated env beside the file", file, map[string]string{envClickHousePasswordDeprecated: "old"}, "from-file", "", "is ignored"},
		{"file and env", file, map[string]string{envClickHousePassword: "from-env"}, "", "keep one", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c := chFlags{addr: "127.0.0.1:9000", db: "toolaudit", user: "u", compression: "auto", passwordFile: tc.file}
			cfg, err := c.config(func(k string) string { return tc.env[k] }, log)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("config: %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || cfg.Password != tc.want {
				t.Fatalf("config: password %q, %v; want %q", cfg.Password, err, tc.want)
			}
			if !strings.Contains(logBuf.String(), tc.warn) {
				t.Fatalf("log lacks %q:\n%s", tc.warn, logBuf.String())
			}
			if tc.want != "" && strings.Contains(logBuf.String(), tc.want) {
				t.Fatalf("the password is in the log:\n%s", logBuf.String())
			}
		})
	}
}

// TestEmbeddedRefusesSecurity: the embedded stack is plaintext on
// loopback; TLS or SASL settings with --embedded are a usage error.
func TestEmbeddedRefusesSecurity(t *testing.T) {
	for _, args := range [][]string{{"--kafka-tls"}, {"--clickhouse-tls"}, {"--kafka-sasl-mechanism", "plain"}} {
		code, _, stderr := runCmd(t, "", append([]string{"run", "--embedded", t.TempDir(), "--http", ""}, args...)...)
		if code != 2 || !strings.Contains(stderr, "--embedded runs a plaintext") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestReanalyzeAndDiffBadFlags: reanalyze and diff refuse unusable
// settings with a usage error (exit 2) naming the problem, before
// connecting to anything.
func TestReanalyzeAndDiffBadFlags(t *testing.T) {
	window := []string{"--from", "2026-12-01T00:00:00Z", "--to", "2026-12-02T00:00:00Z", "--analysis", "a"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"reanalyze", "--to", "2026-12-02T00:00:00Z", "--analysis", "a"}, "--from is required"},
		{[]string{"reanalyze", "--from", "yesterday", "--to", "2026-12-02T00:00:00Z", "--analysis", "a"}, "RFC 3339"},
		{[]string{"reanalyze", "--from", "-1x", "--to", "-1h", "--analysis", "a"}, "--from \"-1x\""},
		{[]string{"reanalyze", "--from", "2026-12-02T00:00:00Z", "--to", "2026-12-01T00:00:00Z", "--analysis", "a"}, "ends"},
		{[]string{"reanalyze", "--from", "2026-12-01T00:00:00.0001Z", "--to", "2026-12-02T00:00:00Z", "--analysis", "a"}, "whole millisecond"},
		{[]string{"reanalyze", "--from", "-2h", "--to", "-1h"}, "empty analysis id"},
		{append([]string{"reanalyze", "--mode", "lenient"}, window...), "mode"},
		{append([]string{"reanalyze", "--source", "s3"}, window...), "--source"},
		{append([]string{"reanalyze", "--progress", "loud"}, window...), "--progress"},
		{append([]string{"reanalyze", "--skew", "-1s"}, window...), "--horizon must not be negative"},
		{append([]string{"reanalyze", "--horizon", "-1s"}, window...), "--horizon must not be negative"},
		{append([]string{"reanalyze", "--confirm", "0"}, window...), "--confirm"},
		{append([]string{"reanalyze", "--workers", "0"}, window...), "workers"},
		{append([]string{"reanalyze", "--kafka-sasl-mechanism", "plain"}, window...), "needs --kafka-sasl-user"},
		{append([]string{"reanalyze", "extra"}, window...), "unexpected arguments"},
		{[]string{"diff"}, "needs --analysis"},
		{[]string{"diff", "--analysis", "live"}, "both \"live\""},
		{[]string{"diff", "--analysis", "a", "--from", "-1h", "--to", "-2h"}, "not after"},
		{[]string{"diff", "--analysis", "a", "--examples", "-1"}, "--examples"},
		{[]string{"diff", "--analysis", "a", "--to", "tomorrow"}, "RFC 3339"},
	} {
		args := append(tc.args, "--clickhouse", "127.0.0.1:1", "--brokers", "127.0.0.1:1")
		if tc.args[0] == "diff" {
			args = append(tc.args, "--clickhouse", "127.0.0.1:1")
		}
		code, _, stderr := runCmd(t, "", args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestProgress: reanalyze's progress, as a bar with the rate and the time
// left, or as lines with the same.
func TestProgress(t *testing.T) {
	var read atomic.Int64
	progress := func() reanalyze.Progress {
		return reanalyze.Progress{Total: 1000, Read: read.Add(100), Decided: 50, Written: 10}
	}
	for _, tc := range []struct {
		mode string
		want []string
	}{
		{"bar", []string{"reanalyze", "records/s"}},
		{"lines", []string{"reanalyze: 100 records read of about 1000 (10%), 50 decided, 10 written,", "records/s, ETA "}},
		{"none", nil},
	} {
		read.Store(0)
		var b lockedbuf.Buffer
		stop := showProgress(&b, tc.mode, 20*time.Millisecond, progress)
		time.Sleep(500 * time.Millisecond)
		stop()
		out := b.String()
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: output lacks %q:\n%q", tc.mode, w, out)
			}
		}
		if tc.want == nil && out != "" {
			t.Errorf("%s: %q", tc.mode, out)
		}
	}
}

// TestArgsHashKey: the key comes from a file or from the environment,
// never both; a short key is a usage error; with a key every decision of
// a decoded call carries the keyed hash, and the key shows nowhere.
func TestArgsHashKey(t *testing.T) {
	dir := t.TempDir()
	secret := "s3cr3t-0123456789abcdef0123456789"
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, c := corpus("sample", "listings.jsonl"), corpus("sample", "calls.jsonl")
	hashes := func(out string) map[string]bool {
		seen := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			var d map[string]any
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatal(err)
			}
			if h, ok := d["args_hash"].(string); ok {
				seen[h[:len("hmac-sha256:")+9]] = true
			} else if d["class"] != "MALFORMED" {
				t.Fatalf("no args_hash: %s", line)
			}
		}
		return seen
	}
	code, out, stderr := runCmd(t, "", "check", "--listings", l, "--calls", c, "--args-hash-key-file", keyFile)
	if code != 0 || strings.Contains(out+stderr, secret) || !strings.Contains(stderr, "args_hash keyed") {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	fromFile := hashes(out)
	if len(fromFile) != 1 {
		t.Fatalf("key ids %v", fromFile)
	}
	t.Setenv(argsKeyEnv, secret)
	code, out, stderr = runCmd(t, "", "check", "--listings", l, "--calls", c, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if fromEnv := hashes(out); len(fromEnv) != 1 || !fromEnv[func() string {
		for k := range fromFile {
			return k
		}
		return ""
	}()] {
		t.Fatalf("file and environment give different keys: %v %v", fromFile, fromEnv)
	}
	if code, _, stderr = runCmd(t, "", "check", "--listings", l, "--calls", c, "--args-hash-key-file", keyFile); code != 2 || !strings.Contains(stderr, "keep one") {
		t.Fatalf("both: exit %d %s", code, stderr)
	}
	t.Setenv(argsKeyEnv, "hunter2")
	if code, _, stderr = runCmd(t, "", "check", "--listings", l, "--calls", c); code != 2 || !strings.Contains(stderr, "shorter than 32") || strings.Contains(stderr, "hunter2") {
		t.Fatalf("short key in the environment: exit %d %s", code, stderr)
	}
	if code, _, stderr = runCmd(t, "", "run", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1", "--http", "", "--args-hash-key-file", short); code != 2 || !strings.Contains(stderr, "keep one") {
		t.Fatalf("run, both: exit %d %s", code, stderr)
	}
	os.Unsetenv(argsKeyEnv)
	if code, _, stderr = runCmd(t, "", "run", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1", "--http", "", "--args-hash-key-file", short); code != 2 || !strings.Contains(stderr, "shorter than 32") {
		t.Fatalf("run, short key file: exit %d %s", code, stderr)
	}
}

// TestUnknownCommand: a mistyped command at any level exits 2 naming the
// commands that exist (before, `resolverd dif --max-changed 50` printed
// the help and exited 0, so a CI gate with a typo passed); a group
// without its subcommand exits 2 with the help; --help exits 0.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"dif", "--max-changed", "50"}, 2, []string{`unknown command "dif"`, "check, run, gateway, reanalyze, diff,", "registry, stack"}},
		{[]string{"registry", "bogus"}, 2, []string{`registry: unknown command "bogus"`, "the commands are: diff"}},
		{[]string{"registry", "dif", "--registry", "r"}, 2, []string{`unknown command "dif"`}},
		{[]string{}, 2, []string{"SUBCOMMANDS"}},
		{[]string{"registry"}, 2, []string{"SUBCOMMANDS"}},
		{[]string{"--help"}, 0, []string{"SUBCOMMANDS"}},
		{[]string{"registry", "--help"}, 0, []string{"SUBCOMMANDS"}},
		{[]string{"diff", "--help"}, 0, []string{"--max-changed"}},
	} {
		code, _, stderr := runCmd(t, "", tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d; stderr %q", tc.args, code, tc.code, stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%q: stderr lacks %q:\n%s", tc.args, w, stderr)
			}
		}
	}
}

// TestStackDefault: an address flag not given falls back to the embedded
// stack's when nothing answers at its default and the stack does; a flag
// given is kept; when neither answers, the error says what to pass.
func TestStackDefault(t *testing.T) {
	stack, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	closed := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		args  []string
		stack string
		want  string // "" with wantErr
		err   string
	}{
		{"default silent, stack answers", nil, stack.Addr().String(), stack.Addr().String(), ""},
		{"given", []string{"--clickhouse", closed}, stack.Addr().String(), closed, ""},
		{"default answers", nil, closed, stack.Addr().String(), ""}, // the flag's default is the listener here
		{"neither", nil, closed, "", "nor at " + closed + " (the embedded stack's: resolverd stack, make demo): start one, or pass --clickhouse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			def := closed
			if tc.name == "default answers" {
				def = stack.Addr().String()
			}
			addr := fs.String("clickhouse", def, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := stackDefault(ctx, fs, "clickhouse", []string{*addr}, tc.stack, log)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want %q", err, tc.err)
				}
			case err != nil || len(got) != 1 || got[0] != tc.want:
				t.Errorf("got %v, %v; want %s", got, err, tc.want)
			}
		})
	}
}

// TestDiffGate: the gate counts class changes (an M2 that becomes M3, an
// H2 that becomes H5: no verdict changes), verdict changes apart, and
// fails first on calls absent from the new analysis.
func TestDiffGate(t *testing.T) {
	o := func(c schema.Class) sink.Outcome { return sink.Outcome{Class: c, Verdict: schema.VerdictOf(c)} }
	groups := []sink.DiffGroup{
		{Before: o(schema.OK), After: o(schema.OK), Calls: 100},
		{Before: o(schema.M2), After: o(schema.M3), Calls: 4},
		{Before: o(schema.H2), After: o(schema.H5), Calls: 3},
		{Before: o(schema.M2), After: o(schema.OK), Calls: 2},
		{Before: o(schema.H3), Calls: 5}, // absent from the new analysis
		{After: o(schema.H1), Calls: 1},  // new
	}
	d := summarizeDiff(sink.DiffQuery{Analysis: "new", Against: "live"}, groups)
	if d.ClassChanged != 9 || d.VerdictChanged != 2 || d.Absent != 5 || d.New != 1 || d.Calls.Both != 109 {
		t.Fatalf("summary %+v", d)
	}
	for _, tc := range []struct {
		l    gateLimits
		code int
		msg  string
	}{
		{gateLimits{-1, -1, -1}, 0, ""},
		{gateLimits{-1, -1, 0}, exitUnproven, `5 calls decided in "live" are absent from "new", more than --max-absent 0`},
		{gateLimits{0, 0, 0}, exitUnproven, "absent"},
		{gateLimits{8, -1, 5}, exitTooManyChanged, "9 calls changed class (2 verdict), more than --max-changed 8"},
		{gateLimits{9, 1, 5}, exitTooManyChanged, "2 calls changed verdict, more than --max-verdict-changed 1"},
		{gateLimits{9, 2, 5}, 0, ""},
	} {
		err := d.gate(tc.l)
		var ee exitError
		switch {
		case tc.code == 0 && err != nil, tc.code != 0 && (!errors.As(err, &ee) || ee.code != tc.code || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%+v: %v, want exit %d %q", tc.l, err, tc.code, tc.msg)
		}
	}
}

// TestCommonFlags: the long-running commands share --log-level,
// --memory-limit-mb, --gc-percent and --connect-timeout (commonFlags), and each refuses
// a bad value with a usage error naming the flag, before connecting to
// anything.
func TestCommonFlags(t *testing.T) {
	commands := map[string][]string{
		"run":       {"run", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1", "--http", ""},
		"gateway":   {"gateway", "--config", "/nonexistent.yaml", "--brokers", "127.0.0.1:1"},
		"proxy":     {"proxy", "--config", "/nonexistent.yaml", "--brokers", "127.0.0.1:1"},
		"reanalyze": {"reanalyze", "--from", "2026-12-01T00:00:00Z", "--to", "2026-12-02T00:00:00Z", "--analysis", "a", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1"},
	}
	for name, base := range commands {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--log-level", "loud"}, "bad --log-level"},
			{[]string{"--connect-timeout", "0s"}, "--connect-timeout 0s: want a positive duration"},
			{[]string{"--memory-limit-mb", "-1"}, "--memory-limit-mb -1: want 0"},
			{[]string{"--gc-percent", "0"}, "--gc-percent 0: want a positive percentage"},
		} {
			code, _, stderr := runCmd(t, "", append(slices.Clone(base), tc.args...)...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("%s %v: exit %d, stderr %q; want 2 and %q", name, tc.args, code, stderr, tc.want)
			}
		}
	}
	code, _, stderr := runCmd(t, "", "check", "--listings", "x", "--calls", "y", "--memory-limit-mb", "-1")
	if code != 2 || !strings.Contains(stderr, "--memory-limit-mb -1: want 0") {
		t.Errorf("check --memory-limit-mb -1: exit %d, stderr %q", code, stderr)
	}
}

// TestRunOTLPFlags: the OpenTelemetry topics' settings are checked before
// anything is connected to, with a usage error naming the flag.
func TestRunOTLPFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--otlp-spans-topic", "otlp_spans"}, "--otlp-registry"},
		{[]string{"--otlp-logs-topic", "otlp_logs"}, "--otlp-registry"},
		{[]string{"--otlp-spans-topic", "otlp_spans", "--otlp-registry", "fleet", "--otlp-encoding", "otlp_protobuf"}, "want otlp_proto or otlp_json"},
		{[]string{"--otlp-spans-topic", "tool-calls", "--otlp-registry", "fleet"}, "two roles"},
	} {
		args := append([]string{"run", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1", "--http", ""}, tc.args...)
		code, _, stderr := runCmd(t, "", args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}
