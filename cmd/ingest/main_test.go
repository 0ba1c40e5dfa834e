package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/toolaudit/toolaudit/internal/testkit/helptext"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/internal/testkit/tlstest"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

const (
	openaiLine  = `{"emitted_at":"2026-11-29T10:00:05.250Z","session_id":"s-1","openai":{"choices":[{"message":{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"create_issue","arguments":"{\"owner\":\"o\"}"}},{"id":"call_2","type":"function","function":{"name":"x","arguments":"{bad"}}]}}]}}`
	eventLine   = `{"type":"listing","event_id":"l-1","observed_at":"2026-11-29T10:00:00Z","registry":"fleet-a","server":"github","trust":1,"op":"snapshot","tools":[]}`
	mcpLine     = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_me","arguments":{}}}`
	garbageLine = `this is not json`
)

type outcome struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, stdin string, args ...string) outcome {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	code := run(ctx, args, strings.NewReader(stdin), &out, &errOut, false)
	return outcome{code, out.String(), errOut.String()}
}

func writeFile(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func eventIDs(t *testing.T, jsonl string) []string {
	t.Helper()
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		if l == "" {
			continue
		}
		var v struct {
			EventID string `json:"event_id"`
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		ids = append(ids, v.EventID)
	}
	return ids
}

func TestHelpExplainsEverything(t *testing.T) {
	o := runCmd(t, "", "--help")
	if o.code != exitOK {
		t.Fatalf("exit %d", o.code)
	}
	fs, _ := newFlagSet(&bytes.Buffer{})
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(o.stderr, "  -"+f.Name+" ") && !strings.Contains(o.stderr, "  -"+f.Name+"=") {
			t.Errorf("--help does not list -%s", f.Name)
		}
		if strings.TrimSpace(f.Usage) == "" {
			t.Errorf("-%s has no usage text", f.Name)
		}
	})
	if n < 20 {
		t.Errorf("only %d flags", n)
	}
	for _, bad := range helptext.Ambiguous(fs) {
		t.Errorf("ingest %s", bad)
	}
	// The layout of resolverd's and htb's --help (ffcli's).
	for _, want := range []string{"DESCRIPTION\n", "USAGE\n  ingest [flags] [FILE ...]\n", "\nFLAGS\n", "\n  -out FILE "} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, want := range []string{"Envelope", `"emitted_at"`, "seen_digests", "openai, anthropic, bedrock, mcp, otel", "INGEST_BROKERS", "arguments_raw", "nextCursor", "--emitted-at"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("--help does not mention %s", want)
		}
	}
}

func TestDryRun(t *testing.T) {
	file := writeFile(t, "mixed.jsonl", openaiLine, eventLine, garbageLine, "", mcpLine)
	o := runCmd(t, "", "--dry-run", "--registry", "fleet-z", "--emitted-at", "2026-11-29T09:00:00Z", file)
	if o.code != exitOK {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	ids := eventIDs(t, o.stdout)
	if len(ids) != 4 || !strings.HasPrefix(ids[0], "call_1~") || !strings.HasPrefix(ids[1], "call_2~") || ids[2] != "l-1" || !strings.HasPrefix(ids[3], "c-") {
		t.Errorf("event ids %v", ids)
	}
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	if lines[2] != eventLine {
		t.Errorf("contract event changed: %s", lines[2])
	}
	if !strings.Contains(lines[1], `"arguments_raw":"{bad"`) || !strings.Contains(lines[0], `"registry":"fleet-z"`) {
		t.Errorf("converted calls: %s", o.stdout)
	}
	if !strings.Contains(lines[3], `"emitted_at":"2026-11-29T09:00:00.000Z"`) || !strings.Contains(lines[3], `"surface":"mcp"`) {
		t.Errorf("MCP call with flag defaults: %s", lines[3])
	}
	if !strings.Contains(o.stderr, filepath.Clean(file)+":3: not a JSON object") {
		t.Errorf("bad line not reported with file:line: %s", o.stderr)
	}
	for _, want := range []string{"4 lines", "4 events", "tool-calls 3", "tool-listings 1", "1 errors", "openai 1 lines/2 events", "event 1 lines/1 events", "mcp 1 lines/1 events"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("summary lacks %q:\n%s", want, o.stderr)
		}
	}

	// Same input on stdin, twice: same events, ids hashed on --stdin-name.
	a := runCmd(t, openaiLine+"\n"+mcpLine+"\n", "--dry-run", "--emitted-at", "2026-11-29T09:00:00Z", "--stdin-name", "x")
	b := runCmd(t, openaiLine+"\n"+mcpLine+"\n", "--out", "-", "--emitted-at", "2026-11-29T09:00:00Z", "--stdin-name", "x", "-")
	if a.code != 0 || b.code != 0 || a.stdout != b.stdout || a.stdout == "" {
		t.Errorf("stdin runs differ or failed: %d %d\n%s\n%s", a.code, b.code, a.stdout, b.stdout)
	}
}

func TestOutFile(t *testing.T) {
	in := writeFile(t, "in.jsonl", eventLine)
	out := filepath.Join(t.TempDir(), "out.jsonl")
	o := runCmd(t, "", "--out", out, in)
	if o.code != exitOK || o.stdout != "" {
		t.Fatalf("exit %d, stdout %q: %s", o.code, o.stdout, o.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || string(b) != eventLine+"\n" {
		t.Fatalf("out file %q, %v", b, err)
	}
}

func TestExitCodes(t *testing.T) {
	good := writeFile(t, "good.jsonl", eventLine, garbageLine)
	call := `{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:05.250Z","registry":"r","tool":"t","arguments":{}}`
	conflict := writeFile(t, "conflict.jsonl", call, strings.Replace(call, `"t"`, `"u"`, 1))
	repeat := writeFile(t, "repeat.jsonl", call, call)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want int
		msg  string
	}{
		{"bad lines are not a failure", []string{"--dry-run", good}, nil, exitOK, ":2: not a JSON object"},
		{"an id repeated with other content fails", []string{"--dry-run", conflict}, nil, exitFailure, `conflict.jsonl:2: event_id repeated with other content: call "c-1" was first seen at ` + conflict + ":1"},
		{"an event repeated is counted", []string{"--dry-run", repeat}, nil, exitOK, "1 events repeated an earlier event exactly"},
		{"a file given twice is counted", []string{"--dry-run", good, good}, nil, exitOK, "1 events repeated an earlier event exactly"},
		{"missing file fails, others still read", []string{"--dry-run", filepath.Join(t.TempDir(), "nope.jsonl"), good}, nil, exitFailure, "nope.jsonl"},
		{"directory", []string{"--dry-run", t.TempDir()}, nil, exitFailure, "is a directory"},
		{"no brokers", []string{good}, nil, exitUsage, "--brokers"},
		{"bad format", []string{"--dry-run", "--format", "xml", good}, nil, exitUsage, "--format"},
		{"bad time", []string{"--dry-run", "--emitted-at", "soon", good}, nil, exitUsage, "--emitted-at"},
		{"unknown flag", []string{"--nope"}, nil, exitUsage, "nope"},
		{"unreachable kafka", []string{"--brokers", closedAddr(t), "--connect-timeout", "1s", good}, nil, exitFailure, "unreachable"},
		{"unknown sasl mechanism", []string{"--brokers", closedAddr(t), "--kafka-sasl-mechanism", "gssapi", good}, nil, exitUsage, "--kafka-sasl-mechanism"},
		{"sasl without password", []string{"--brokers", closedAddr(t), "--kafka-sasl-mechanism", "plain", "--kafka-sasl-user", "u", good}, nil, exitUsage, "TOOLAUDIT_KAFKA_SASL_PASSWORD"},
		{"unreachable kafka from env", []string{"--connect-timeout", "1s", good}, map[string]string{"INGEST_BROKERS": closedAddr(t)}, exitFailure, "unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			o := runCmd(t, "", tt.args...)
			if o.code != tt.want {
				t.Errorf("exit %d, want %d\n%s", o.code, tt.want, o.stderr)
			}
			if !strings.Contains(o.stderr, tt.msg) {
				t.Errorf("stderr lacks %q:\n%s", tt.msg, o.stderr)
			}
		})
	}
	// The missing file did not stop the next one.
	o := runCmd(t, "", "--dry-run", filepath.Join(t.TempDir(), "nope.jsonl"), good)
	if eventIDs(t, o.stdout)[0] != "l-1" {
		t.Errorf("good file after a missing one not ingested: %q", o.stdout)
	}
}

func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// The binary's wiring against a real (in-process) Kafka.
func TestKafka(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "calls", "listings"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	file := writeFile(t, "mixed.jsonl", openaiLine, eventLine, garbageLine)
	t.Setenv("INGEST_BROKERS", strings.Join(cluster.ListenAddrs(), ","))
	o := runCmd(t, "", "--calls-topic", "calls", "--listings-topic", "listings", "--progress", file)
	if o.code != exitOK {
		t.Fatalf("exit %d:\n%s", o.code, o.stderr)
	}
	if !strings.Contains(o.stderr, "delivered to Kafka: calls 2, listings 1") {
		t.Errorf("summary:\n%s", o.stderr)
	}
	if o.stdout != "" {
		t.Errorf("stdout not empty: %q", o.stdout)
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumeTopics("calls", "listings"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := map[string]*kgo.Record{}
	for len(got) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var v struct {
				EventID string `json:"event_id"`
			}
			_ = json.Unmarshal(r.Value, &v)
			got[strings.Split(v.EventID, "~")[0]] = r // a provider's id leads a call's
		})
	}
	want := map[string]struct {
		topic, key string
		ts         time.Time
	}{
		"call_1": {"calls", "s-1", time.Date(2026, 11, 29, 10, 0, 5, 250e6, time.UTC)},
		"call_2": {"calls", "s-1", time.Date(2026, 11, 29, 10, 0, 5, 250e6, time.UTC)},
		"l-1":    {"listings", "fleet-a/github", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)},
	}
	for id, w := range want {
		r, ok := got[id]
		if !ok {
			t.Errorf("%s not consumed", id)
			continue
		}
		if r.Topic != w.topic || string(r.Key) != w.key || !r.Timestamp.Equal(w.ts) {
			t.Errorf("%s: topic %s key %q time %v; want %s %q %v", id, r.Topic, r.Key, r.Timestamp, w.topic, w.key, w.ts)
		}
	}

	// A topic that does not exist: the delivery fails and so does the run.
	o = runCmd(t, "", "--calls-topic", "missing", "--listings-topic", "listings", "--delivery-timeout", "2s", file)
	if o.code != exitFailure {
		t.Errorf("produce to a missing topic: exit %d\n%s", o.code, o.stderr)
	}
}

// TestSecuredKafka: ingest produces to a broker that takes TLS with a
// private CA and SCRAM-SHA-512, with the password in the environment; a
// wrong password fails at once with a message that says SASL, not after
// --connect-timeout.
func TestSecuredKafka(t *testing.T) {
	certs := tlstest.New(t)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "calls", "listings"),
		kfake.TLS(certs.Server(false)), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "ingest", "right"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	file := writeFile(t, "events.jsonl", eventLine)
	args := []string{"--brokers", strings.Join(cluster.ListenAddrs(), ","), "--calls-topic", "calls", "--listings-topic", "listings",
		"--kafka-tls-ca", certs.CAFile, "--kafka-sasl-mechanism", "scram-sha-512", "--kafka-sasl-user", "ingest", "--connect-timeout", "20s", file}
	t.Setenv("TOOLAUDIT_KAFKA_SASL_PASSWORD", "right")
	if o := runCmd(t, "", args...); o.code != exitOK || !strings.Contains(o.stderr, "delivered to Kafka: listings 1") {
		t.Fatalf("right password: exit %d\n%s", o.code, o.stderr)
	}
	t.Setenv("TOOLAUDIT_KAFKA_SASL_PASSWORD", "Wr0ngP4ss")
	start := time.Now()
	o := runCmd(t, "", args...)
	if o.code != exitFailure || !strings.Contains(o.stderr, "SASL") {
		t.Fatalf("wrong password: exit %d\n%s", o.code, o.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("wrong password took %v to fail", d)
	}
	if strings.Contains(o.stderr, "Wr0ngP4ss") {
		t.Fatalf("the password is in the output:\n%s", o.stderr)
	}
}

// TestOAuthKafka: ingest produces with an OAUTHBEARER token from the
// client credentials grant, the client secret in the environment, to a
// broker whose SASL exchange kfake's control hooks answer (kfake knows
// PLAIN and SCRAM only); a token endpoint that refuses the client fails
// at once, naming the endpoint, and no output shows the secret.
func TestOAuthKafka(t *testing.T) {
	const secret = "cl13nt-s3cret"
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, s, _ := r.BasicAuth(); id != "ingest" || s != secret {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"tok-ingest","token_type":"Bearer","expires_in":300}`))
	}))
	defer tokens.Close()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "calls", "listings"))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cluster.ControlKey(kmsg.SASLHandshake.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		return r.(*kmsg.SASLHandshakeRequest).ResponseKind(), nil, true
	})
	var bearer atomic.Value
	cluster.ControlKey(kmsg.SASLAuthenticate.Int16(), func(r kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		req := r.(*kmsg.SASLAuthenticateRequest)
		bearer.Store(string(req.SASLAuthBytes))
		return req.ResponseKind(), nil, true
	})
	file := writeFile(t, "events.jsonl", eventLine)
	args := []string{"--brokers", strings.Join(cluster.ListenAddrs(), ","), "--calls-topic", "calls", "--listings-topic", "listings",
		"--kafka-sasl-mechanism", "oauthbearer", "--kafka-sasl-oauth-token-url", tokens.URL + "/token",
		"--kafka-sasl-oauth-client-id", "ingest", "--connect-timeout", "20s", file}
	t.Setenv("TOOLAUDIT_KAFKA_SASL_OAUTH_CLIENT_SECRET", secret)
	if o := runCmd(t, "", args...); o.code != exitOK || !strings.Contains(o.stderr, "delivered to Kafka: listings 1") {
		t.Fatalf("right secret: exit %d\n%s", o.code, o.stderr)
	}
	if b, _ := bearer.Load().(string); b != "n,,\x01auth=Bearer tok-ingest\x01\x01" {
		t.Fatalf("the broker got %q", b)
	}
	t.Setenv("TOOLAUDIT_KAFKA_SASL_OAUTH_CLIENT_SECRET", "Wr0ng-"+secret)
	start := time.Now()
	o := runCmd(t, "", args...)
	if o.code != exitFailure || !strings.Contains(o.stderr, "OAuth token endpoint refused") || !strings.Contains(o.stderr, "invalid_client") {
		t.Fatalf("wrong secret: exit %d\n%s", o.code, o.stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("wrong secret took %v to fail", d)
	}
	if strings.Contains(o.stderr, secret) {
		t.Fatalf("the secret is in the output:\n%s", o.stderr)
	}
}
