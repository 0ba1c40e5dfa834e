package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
)

// createTopics adds topics to the environment's broker.
func (e *env) createTopics(partitions int32, topics ...string) {
	e.t.Helper()
	adm := kadm.NewClient(e.producer)
	resp, err := adm.CreateTopics(context.Background(), partitions, 1, nil, topics...)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := resp.Error(); err != nil {
		e.t.Fatal(err)
	}
}

var listening = regexp.MustCompile(`msg="http listening" addr=(\S+)`)

// apiURL waits until the daemon listens and returns its base URL.
func (d *daemon) apiURL(t *testing.T) string {
	t.Helper()
	d.waitLog(t, "http listening", 30*time.Second)
	m := listening.FindStringSubmatch(d.log.String())
	if m == nil {
		t.Fatal("no listening address in the log")
	}
	return "http://" + m[1]
}

type answer struct {
	status int
	body   []byte
}

func postTo(t *testing.T, url, token, body string) answer {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/resolve", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, b}
}

// apiRows returns, per call key, how many rows of source api FINAL holds
// and their class.
func (e *env) apiRows() map[string]string {
	e.t.Helper()
	rows, err := e.connect().Query(context.Background(), fmt.Sprintf("SELECT call_key, class FROM %s.decisions FINAL WHERE source = 'api'", e.db))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, c string
		if err := rows.Scan(&k, &c); err != nil {
			e.t.Fatal(err)
		}
		if _, dup := out[k]; dup {
			e.t.Fatalf("%s: two api rows under FINAL", k)
		}
		out[k] = c
	}
	return out
}

func (e *env) waitAPIRows(n int, within time.Duration) map[string]string {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := e.apiRows()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d api rows stored after %v", len(got), n, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestAPIMatchesCheck: every call of the corpus through POST /v1/resolve
// (alone, and in batches of ten) gets the class `resolverd check` gives
// it; each answered decision lands in ClickHouse once with source api,
// beside the stream's row of the same call.
func TestAPIMatchesCheck(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 3)
	e.createTopics(3, "tool-audit")
	e.produce("tool-listings", c.listings, 0)
	d := e.start("--http", "127.0.0.1:0")
	url := d.apiURL(t)
	d.waitLog(t, "listings caught up", 30*time.Second)
	ids := map[string]bool{}
	bad := 0
	check := func(ds []map[string]any) {
		for _, dd := range ds {
			id, _ := dd["event_id"].(string)
			if id != "" {
				ids[id] = true
			}
			if dd["class"] != c.want[id] || dd["source"] != "api" {
				if bad++; bad < 5 {
					t.Errorf("%s: class %v source %v, check says %s", id, dd["class"], dd["source"], c.want[id])
				}
			}
		}
	}
	half := len(c.calls) / 2
	for _, l := range c.calls[:half] {
		a := postTo(t, url, "", string(l))
		var dd map[string]any
		if a.status != 200 || json.Unmarshal(a.body, &dd) != nil {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		check([]map[string]any{dd})
	}
	for i := half; i < len(c.calls); i += 10 {
		batch := c.calls[i:min(i+10, len(c.calls))]
		a := postTo(t, url, "", "["+string(bytes.Join(batch, []byte(",")))+"]")
		var ds []map[string]any
		if a.status != 200 || json.Unmarshal(a.body, &ds) != nil || len(ds) != len(batch) {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		check(ds)
	}
	if bad > 0 {
		t.Fatalf("%d API answers differ from resolverd check", bad)
	}
	// Every answer with an event id is stored, with the class answered.
	rows := e.waitAPIRows(len(ids), 60*time.Second)
	for id := range ids {
		if rows[id] != c.want[id] {
			t.Fatalf("%s: stored api row %q, check says %s", id, rows[id], c.want[id])
		}
	}
	// The stream decides the same events: both rows stay.
	e.produce("tool-calls", c.calls, 0)
	e.waitDecided(len(c.calls)+len(rows), 60*time.Second)
	d.stop(t)
	var stream uint64
	if err := e.connect().QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.decisions FINAL WHERE source = 'stream'", e.db)).Scan(&stream); err != nil {
		t.Fatal(err)
	}
	if int(stream) != len(c.calls) {
		t.Fatalf("%d stream rows for %d calls", stream, len(c.calls))
	}
	out, err := runReport(e, "--toctou", "--since", "all")
	if err != nil || !strings.Contains(out, "0 call(s) decided differently") {
		t.Fatalf("report --toctou: %v\n%s", err, out)
	}
}

func runReport(e *env, args ...string) (string, error) {
	cmd := execCommand(append([]string{"report", "--clickhouse", e.ch.Addr(), "--database", e.db}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestAuditAfterKill: resolverd is killed with SIGKILL right after it
// answered; the decision it answered is stored once (source api) by the
// next run, from the audit topic.
func TestAuditAfterKill(t *testing.T) {
	t.Parallel() // its own broker and engine; mostly waiting on kills and outages
	c := load(t)
	e := newEnv(t, chenginetest.Supervise(t, chengine.Options{}), 3)
	e.createTopics(3, "tool-audit")
	e.produce("tool-listings", c.listings, 0)
	want := map[string]string{}
	for round, calls := range [][][]byte{c.calls[:1], c.calls[1:11], c.calls[11:12]} {
		d := e.start("--http", "127.0.0.1:0", "--batch-wait", "2s")
		url := d.apiURL(t)
		d.waitLog(t, "listings caught up", 30*time.Second)
		// Killed only once it owns partitions: kfake never expires a
		// member killed while its JoinGroup was pending (see TestKill9).
		d.waitLog(t, "topic=tool-audit", 60*time.Second)
		body := string(calls[0])
		if len(calls) > 1 {
			body = "[" + string(bytes.Join(calls, []byte(","))) + "]"
		}
		a := postTo(t, url, "", body)
		d.kill() // the answer is read: nothing after it may be needed
		if a.status != 200 {
			t.Fatalf("round %d: status %d: %s", round, a.status, a.body)
		}
		if round == 0 {
			// The killed process had not written it (--batch-wait 2s):
			// what is stored below comes from the audit topic.
			if n := len(e.apiRows()); n != 0 {
				t.Fatalf("%d api rows stored before the restart", n)
			}
		}
		var ds []map[string]any
		if len(calls) == 1 {
			var dd map[string]any
			json.Unmarshal(a.body, &dd)
			ds = append(ds, dd)
		} else {
			json.Unmarshal(a.body, &ds)
		}
		for _, dd := range ds {
			id := dd["event_id"].(string)
			want[id] = dd["class"].(string)
		}
	}
	d := e.start()
	rows := e.waitAPIRows(len(want), 60*time.Second)
	d.stop(t)
	for id, class := range want {
		if rows[id] != class {
			t.Fatalf("%s: stored %q, answered %s", id, rows[id], class)
		}
	}
	if len(rows) != len(want) {
		t.Fatalf("%d api rows for %d answered calls", len(rows), len(want))
	}
}

// TestDecisionsTopic: with --decisions-topic, a consumer of that topic
// sees every rejection of the corpus, keyed by session; beside
// --archive-calls (once refused at start: the fan-out dropped the
// archive), every call record is archived in ClickHouse too.
func TestDecisionsTopic(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 3)
	e.createTopics(3, "tool-decisions")
	e.produce("tool-listings", c.listings, 0)
	e.produce("tool-calls", c.calls, 0)
	d := e.start("--decisions-topic", "tool-decisions", "--audit-topic", "", "--archive-calls")
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics("tool-decisions"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rejections := map[string]bool{}
	for id, class := range c.want {
		if class != "OK" {
			rejections[id] = true
		}
	}
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for len(seen) < len(rejections) && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var m struct {
				EventID   string `json:"event_id"`
				Verdict   string `json:"verdict"`
				Class     string `json:"class"`
				SessionID string `json:"session_id"`
				AgentID   string `json:"agent_id"`
			}
			if err := json.Unmarshal(r.Value, &m); err != nil {
				t.Fatalf("%v: %s", err, r.Value)
			}
			if m.Verdict == "reject" && m.EventID != "" {
				if c.want[m.EventID] != m.Class {
					t.Fatalf("%s: %s on the topic, check says %s", m.EventID, m.Class, c.want[m.EventID])
				}
				if want := m.SessionID; want != "" && string(r.Key) != want {
					t.Fatalf("%s: key %q, session %q", m.EventID, r.Key, want)
				}
				seen[m.EventID] = true
			}
		})
	}
	e.waitDecided(len(c.calls), 60*time.Second)
	d.stop(t)
	for id := range rejections {
		if id != "" && !seen[id] {
			t.Fatalf("rejection %s (%s) never reached the decisions topic (%d of %d seen)", id, c.want[id], len(seen), len(rejections))
		}
	}
	if n := e.count("SELECT count() FROM {db}.call_events FINAL"); n != int64(len(c.calls)) {
		t.Fatalf("%d call records archived of %d", n, len(c.calls))
	}
}

// TestAPIBoundaries: the real binary with tokens and small limits: 401
// without a token, 403 never for a good one; an oversize body 413, a
// non-event 400, a bad call MALFORMED with 200, a trickling body 408;
// /healthz open.
func TestAPIBoundaries(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 3)
	e.createTopics(3, "tool-audit")
	e.produce("tool-listings", c.listings, 0)
	tokens := filepath.Join(t.TempDir(), "tokens")
	const token = "e2e-token-0123456789abcdef"
	if err := os.WriteFile(tokens, []byte("# e2e\ne2e:"+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d := e.start("--http", "127.0.0.1:0", "--http-tokens-file", tokens, "--http-max-body-kb", "64", "--http-read-timeout", "1s")
	url := d.apiURL(t)
	d.waitLog(t, "listings caught up", 30*time.Second) // 503 not_ready before
	call := string(c.calls[0])
	for _, tc := range []struct {
		name, token, body string
		status            int
		want              string
	}{
		{"no token", "", call, 401, `"error":"unauthorized"`},
		{"wrong token", "e2e-token-0123456789abcdeX", call, 401, `"error":"unauthorized"`},
		{"good token", token, call, 200, `"source":"api"`},
		{"oversize", token, `{"pad":"` + strings.Repeat("x", 65<<10) + `"}`, 413, `"error":"payload_too_large"`},
		{"not an event", token, `"hello"`, 400, `"error":"bad_request"`},
		{"malformed call", token, `{"event_id":"e2e-bad","tool":"t","tool":"wipe_disk"}`, 200, `"class":"MALFORMED"`},
	} {
		a := postTo(t, url, tc.token, tc.body)
		if a.status != tc.status || !strings.Contains(string(a.body), tc.want) {
			t.Errorf("%s: status %d %s, want %d %s", tc.name, a.status, a.body, tc.status, tc.want)
		}
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	// A body trickling in: cut off at the read timeout.
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/resolve HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 60000\r\n\r\n{", token)
	start := time.Now()
	go func() {
		for i := 0; i < 20; i++ {
			time.Sleep(300 * time.Millisecond)
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	line := make([]byte, 64)
	n, _ := io.ReadAtLeast(conn, line, len("HTTP/1.1 408"))
	if got := string(line[:n]); !strings.HasPrefix(got, "HTTP/1.1 408") || time.Since(start) > 5*time.Second {
		t.Fatalf("trickling body: %q after %v", got, time.Since(start))
	}
	// SIGHUP reloads the tokens: the new one is taken, the old refused.
	const rotated = "e2e-token-rotated-0123456789"
	if err := os.WriteFile(tokens, []byte("e2e:"+rotated+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.cmd.Process.Signal(syscall.SIGHUP)
	d.waitLog(t, "SIGHUP: reloading", 10*time.Second)
	d.waitLog(t, "bearer tokens reloaded", 10*time.Second)
	if a := postTo(t, url, rotated, call); a.status != 200 {
		t.Fatalf("rotated token: %d %s", a.status, a.body)
	}
	if a := postTo(t, url, token, call); a.status != 401 {
		t.Fatalf("old token after the rotation: %d %s", a.status, a.body)
	}
	d.stop(t)
}

func execCommand(args ...string) *exec.Cmd { return exec.Command(resolverd, args...) }
