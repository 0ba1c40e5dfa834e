package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
)

const (
	sendV1 = `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`
	sendV2 = `{"type":"object","properties":{"to":{"type":"string"},"bcc":{"type":"string"}},"required":["to","bcc"]}`
)

// listingEvent is a listing of one tool of server mail in registry prod.
func listingEvent(t *testing.T, sec int, inputSchema string) []byte {
	t.Helper()
	l := &schema.Listing{EventID: "l" + string(rune('0'+sec)), ObservedAt: time.Date(2026, 12, 1, 0, 0, sec, 0, time.UTC),
		Registry: "prod", Server: "mail", Trust: 1, Op: schema.OpSnapshot}
	return schema.AppendListing(nil, l, [][]byte{[]byte(`{"name":"send","inputSchema":` + inputSchema + `}`)})
}

// listingsBroker starts a kfake broker with a listings topic, for the
// test's length, and returns its address and a producer of listing events.
func listingsBroker(t *testing.T) (string, func(...[]byte)) {
	t.Helper()
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "tool-listings"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	addr := kf.ListenAddrs()[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return addr, func(vs ...[]byte) {
		t.Helper()
		for _, v := range vs {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "tool-listings", Value: v}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func mustDigest(t *testing.T, s string) string {
	d, err := schema.Digest("send", []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRegistryApprovals: the review commands against a kfake broker.
// mail's send is listed (new: pending), approved, then changed (v2:
// pending with the diff from v1, and lock --check fails with exit 3 naming
// both digests), rejected; the lockfile written before the change,
// imported onto a fresh approvals topic, is written back byte for byte.
func TestRegistryApprovals(t *testing.T) {
	addr, produce := listingsBroker(t)
	list := func(sec int, s string) { produce(listingEvent(t, sec, s)) }
	run := func(wantCode int, args ...string) (string, string) {
		t.Helper()
		if !slices.Contains(args, "--listings") { // offline: --brokers would be a flag not read
			args = append(args, "--brokers", addr)
		}
		code, out, stderr := runCmd(t, "", append([]string{"registry"}, args...)...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, wantCode, out, stderr)
		}
		return out, stderr
	}
	v1, v2 := mustDigest(t, sendV1), mustDigest(t, sendV2)
	dir := t.TempDir()
	lock1, lock2 := filepath.Join(dir, "v1.lock"), filepath.Join(dir, "back.lock")

	list(1, sendV1)
	out, _ := run(0, "pending")
	if !strings.Contains(out, "prod  mail  send  new  "+v1) {
		t.Fatalf("pending before any approval:\n%s", out)
	}
	out, _ = run(0, "approve", "--registry", "prod", "--server", "mail", "--tool", "send", "--digest", v1, "--by", "alice", "--reason", "reviewed in #1")
	if !strings.Contains(out, "baseline version 1") {
		t.Fatalf("approve: %s", out)
	}
	if out, stderr := run(0, "pending"); out != "" || !strings.Contains(stderr, "0 of 1") {
		t.Fatalf("pending after approval: %q %q", out, stderr)
	}
	run(0, "lock", "--out", lock1)
	run(0, "lock", "--check", lock1)

	list(2, sendV2) // the rug pull
	out, _ = run(0, "pending", "--json")
	var item map[string]any
	if err := json.Unmarshal([]byte(out), &item); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if item["approval"] != "unapproved" || item["digest"] != v2 || item["diff_from"] != v1 ||
		!strings.Contains(out, `"props_added":["/bcc"]`) || !strings.Contains(out, `"required_added":["/bcc"]`) {
		t.Fatalf("pending after the change: %s", out)
	}
	out, stderr := run(exitDrift, "lock", "--check", lock1)
	if !strings.Contains(out, "unapproved  "+v2+"  (approved: "+v1+")") || !strings.Contains(out, "+ /bcc") || !strings.Contains(stderr, "1 of 1 current definitions not approved") {
		t.Fatalf("check after the change:\n%s%s", out, stderr)
	}
	// The same check against a listings file.
	lf := filepath.Join(dir, "listings.jsonl")
	os.WriteFile(lf, append(append(listingEvent(t, 1, sendV1), '\n'), append(listingEvent(t, 2, sendV2), '\n')...), 0o600)
	run(exitDrift, "lock", "--check", lock1, "--listings", lf)
	// A lockfile that names no definition of the tool: new, refused
	// unless --allow-new.
	empty := filepath.Join(dir, "empty.lock")
	os.WriteFile(empty, []byte(`{"toolaudit":"approvals-lock/v1"}`+"\n"), 0o600)
	if out, _ := run(exitDrift, "lock", "--check", empty, "--listings", lf); !strings.Contains(out, "new  "+v2) {
		t.Fatalf("check, empty lockfile: %s", out)
	}
	run(0, "lock", "--check", empty, "--listings", lf, "--registry", "prod", "--allow-new")
	run(1, "lock", "--check", empty, "--listings", lf, "--registry", "staging")
	run(0, "reject", "--registry", "prod", "--server", "mail", "--tool", "send", "--digest", v2, "--by", "bob", "--reason", "adds bcc")
	if out, _ := run(0, "pending"); out != "" {
		t.Fatalf("pending after rejection: %q", out)
	}
	out, _ = run(0, "pending", "--all")
	if !strings.Contains(out, "rejected  "+v2) || !strings.Contains(out, "rejected by bob: adds bcc") {
		t.Fatalf("pending --all: %s", out)
	}
	run(exitDrift, "lock", "--check", lock1) // rejected is not approved

	// Round trip: lock1 imported onto a fresh topic is written back as is.
	run(0, "lock", "--import", lock1, "--by", "ci", "--approvals-topic", "fresh")
	run(0, "lock", "--out", lock2, "--approvals-topic", "fresh")
	a, _ := os.ReadFile(lock1)
	b, _ := os.ReadFile(lock2)
	if string(a) != string(b) || !strings.Contains(string(a), `"reason":"reviewed in #1"`) {
		t.Fatalf("round trip:\n%s\n%s", a, b)
	}
	// Importing lock1 onto the live topic revokes the rejection of v2.
	_, stderr = run(0, "lock", "--import", lock1, "--by", "ci")
	if !strings.Contains(stderr, "1 approval events written") {
		t.Fatalf("import: %s", stderr)
	}
	run(0, "lock", "--out", lock2)
	if b, _ = os.ReadFile(lock2); string(a) != string(b) {
		t.Fatalf("after import:\n%s", b)
	}
	if _, stderr = run(0, "lock", "--import", lock1, "--by", "ci"); !strings.Contains(stderr, "already") {
		t.Fatalf("second import: %s", stderr)
	}
}

// TestRegistryApprovalsUsage: bad flags are usage errors, before any
// connection (the brokers are unreachable).
func TestRegistryApprovalsUsage(t *testing.T) {
	d := mustDigest(t, sendV1)
	verdict := []string{"--registry", "r", "--tool", "t", "--digest", d, "--by", "a"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lock"}, "needs one of --out FILE, --check FILE, --import FILE"},
		{[]string{"lock", "--out", "a", "--check", "b"}, "needs one of"},
		{[]string{"lock", "--import", "a"}, "needs --by"},
		{[]string{"lock", "--check", "/nonexistent.lock"}, "no such file"},
		{[]string{"pending", "x"}, "no arguments"},
		{append([]string{"approve"}, verdict...), "needs --reason"},
		{append([]string{"reject", "--reason", "r"}, verdict[2:]...), "registry missing"},
		{[]string{"approve", "--reason", "r", "--registry", "r", "--tool", "t", "--digest", "sha256:abc", "--by", "a"}, "is not sha256:"},
		{[]string{"revoke", "--reason", "r", "--registry", "r", "--tool", "t", "--digest", d}, "by missing"},
		// A flag the form does not read is refused, not ignored.
		{[]string{"lock", "--out", "a", "--registry", "prod"}, "registry lock --out does not read --registry"},
		{[]string{"lock", "--out", "a", "--listings-topic", "l", "--allow-new", "--by", "x"}, "does not read --allow-new, --by, --listings-topic"},
		{[]string{"lock", "--import", "a", "--by", "x", "--registry", "prod"}, "registry lock --import does not read --registry"},
		{[]string{"lock", "--check", "a", "--by", "x"}, "registry lock --check does not read --by"},
		{[]string{"lock", "--check", "a", "--listings", "l", "--approvals-topic", "t"}, "registry lock --check --listings does not read --approvals-topic, --brokers"},
		{[]string{"lock", "--out", "a", "--listings", "l", "--by", "x", "--allow-new"}, "registry lock --out --listings does not read --allow-new, --brokers"},
		{[]string{"lock", "--out", "a", "--listings", "l"}, "does not read --brokers"},
	} {
		code, _, stderr := runCmd(t, "", append(append([]string{"registry"}, tc.args...), "--brokers", "127.0.0.1:1")...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
}

// TestCheckApprovals: check against the corpus under a lockfile that
// approves every definition the calls resolve to but one tool's: under
// warn every decision is as without approvals, and marked; under block
// the calls to that tool become M4 (but those already M3 or M4), the
// allowed ones among them being what approvals would have stopped; every
// other decision is unchanged.
func TestCheckApprovals(t *testing.T) {
	calls, err := os.ReadFile(corpus("sample", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	listings := corpus("sample", "listings.jsonl")
	decide := func(extra ...string) []map[string]any {
		t.Helper()
		code, out, stderr := runCmd(t, string(calls), append([]string{"check", "--listings", listings, "--calls", "-", "--workers", "2"}, extra...)...)
		if code != 0 {
			t.Fatalf("check %v: exit %d: %s", extra, code, stderr)
		}
		var ds []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			var d map[string]any
			if err := json.Unmarshal([]byte(l), &d); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, d)
		}
		return ds
	}
	base := decide()
	// The lockfile: every resolved definition, but for the most called
	// tool that has allowed calls another definition than its own.
	type def struct{ registry, server, tool, digest string }
	reg := map[string]string{} // event id -> registry
	for _, l := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
		var c struct{ EventID, Registry string }
		json.Unmarshal([]byte(strings.Replace(strings.Replace(l, `"event_id"`, `"EventID"`, 1), `"registry"`, `"Registry"`, 1)), &c)
		reg[c.EventID] = c.Registry
	}
	defs, allowed := map[def]bool{}, map[string]int{}
	for _, d := range base {
		if dg, _ := d["current_digest"].(string); dg != "" {
			defs[def{reg[d["event_id"].(string)], d["resolved_server"].(string), d["resolved_tool"].(string), dg}] = true
			if d["verdict"] == "allow" {
				allowed[d["resolved_tool"].(string)]++
			}
		}
	}
	victim, most := "", 0
	for tool, n := range allowed {
		if n > most || (n == most && tool < victim) {
			victim, most = tool, n
		}
	}
	var lock strings.Builder
	lock.WriteString(`{"toolaudit":"approvals-lock/v1"}` + "\n")
	var lines []string
	// The victim's approved definition is another one: its current one
	// drifted from it.
	other := "sha256:" + strings.Repeat("0", 64)
	for d := range defs {
		if d.tool == victim {
			d.digest = other
		}
		b, _ := json.Marshal(map[string]string{"registry": d.registry, "server": d.server, "tool": d.tool, "digest": d.digest,
			"state": "approved", "by": "t", "at": "2026-12-01T00:00:00.000Z", "reason": ""})
		lines = append(lines, string(b))
	}
	lock.WriteString(strings.Join(lines, "\n") + "\n")
	lf := filepath.Join(t.TempDir(), "corpus.lock")
	os.WriteFile(lf, []byte(lock.String()), 0o600)

	warn := decide("--approvals", "warn", "--approvals-lock", lf)
	block := decide("--approvals", "block", "--approvals-lock", lf)
	stopped := 0
	for i, d := range base {
		w, b := warn[i], block[i]
		if w["class"] != d["class"] {
			t.Fatalf("warn changed %v: %v -> %v", d["event_id"], d["class"], w["class"])
		}
		resolved := d["current_digest"] != nil
		if resolved != (w["approval"] != nil) || resolved != strings.HasPrefix(fmt.Sprint(w["baseline_version"]), "lock:") {
			t.Fatalf("warn's mark of %v: %v", d["event_id"], w)
		}
		isVictim := resolved && d["resolved_tool"] == victim
		if isVictim && w["approval"] != "unapproved" || resolved && !isVictim && w["approval"] != "approved" {
			t.Fatalf("approval of %v: %v", d["event_id"], w["approval"])
		}
		// The check comes after the name's classes (M3) and seen_digest's
		// M4, before the arguments': a call to the victim that failed
		// later is M4 now.
		switch {
		case isVictim && d["class"] != "M3" && d["class"] != "M4":
			if d["verdict"] == "allow" {
				stopped++
			}
			if r, _ := b["reason"].(string); b["class"] != "M4" || !strings.Contains(r, d["current_digest"].(string)) || !strings.Contains(r, "approved: "+other) {
				t.Fatalf("block kept %v: %v", d["event_id"], b)
			}
		case b["class"] != d["class"]:
			t.Fatalf("block changed %v: %v -> %v", d["event_id"], d["class"], b["class"])
		}
	}
	if stopped != most || stopped == 0 {
		t.Fatalf("%d calls stopped, want %d", stopped, most)
	}
	t.Logf("%s: %d allowed calls stopped under block", victim, stopped)
	for _, bad := range [][]string{{"--approvals", "block"}, {"--approvals-lock", lf}, {"--approvals", "deny", "--approvals-lock", lf}} {
		if code, _, _ := runCmd(t, "", append([]string{"check", "--listings", listings, "--calls", "-"}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

// TestGatewayApprovalsFlags: the gateway's --approvals is refused when
// malformed or without Kafka, and a missing approvals topic fails the
// start (nothing is decided against a baseline not read), saying how to
// create it: on brokers it does not own, absent is not empty.
func TestGatewayApprovalsFlags(t *testing.T) {
	cfg := gatewayConfig(t)
	kf, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "tool-listings", "tool-audit"))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--approvals", "deny"}, 2, `mode "deny"`},
		{[]string{"--approvals", "block", "--brokers", ""}, 2, "--approvals needs Kafka"},
		{[]string{"--approvals", "block", "--brokers", kf.ListenAddrs()[0], "--listen", "127.0.0.1:0"}, 1, "topic tool-approvals does not exist"},
		{[]string{"--approvals", "block", "--brokers", kf.ListenAddrs()[0], "--listen", "127.0.0.1:0"}, 1, "create it with resolverd registry pin --by WHO"},
	} {
		code, out, stderr := runCmd(t, "", append([]string{"gateway", "--config", cfg}, tc.args...)...)
		if code != tc.code || !strings.Contains(out+stderr, tc.msg) {
			t.Errorf("%v: exit %d, want %d; output lacks %q:\n%s%s", tc.args, code, tc.code, tc.msg, out, stderr)
		}
	}
}

// TestRegistryPin: pin approves the current definition of the tools never
// reviewed (chat's post), not those reviewed either way (mail's send,
// rejected), once.
func TestRegistryPin(t *testing.T) {
	addr, list := listingsBroker(t)
	chat := &schema.Listing{EventID: "chat", ObservedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Registry: "prod", Server: "chat", Op: schema.OpSnapshot}
	list(listingEvent(t, 1, sendV1), schema.AppendListing(nil, chat, [][]byte{[]byte(`{"name":"post","inputSchema":{"type":"object"}}`)}))
	run := func(args ...string) (int, string, string) {
		return runCmd(t, "", append(append([]string{"registry"}, args...), "--brokers", addr)...)
	}
	if code, _, _ := run("reject", "--registry", "prod", "--server", "mail", "--tool", "send", "--digest", mustDigest(t, sendV1), "--by", "b", "--reason", "no"); code != 0 {
		t.Fatal("reject failed")
	}
	code, out, stderr := run("pin", "--by", "ci")
	post, _ := schema.Digest("post", []byte(`{"type":"object"}`))
	if code != 0 || !strings.Contains(out, "prod  chat  post  new  "+post) || strings.Contains(out, "send") || !strings.Contains(stderr, "1 definitions pinned: baseline version 2") {
		t.Fatalf("pin: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, _ := run("pending", "--all"); code != 0 || !strings.Contains(out, "chat  post  approved") || !strings.Contains(out, "send  rejected") {
		t.Fatalf("pending after pin: %s", out)
	}
	if code, _, stderr := run("pin", "--by", "ci"); code != 0 || !strings.Contains(stderr, "nothing new to pin") {
		t.Fatalf("second pin: %s", stderr)
	}
	if code, _, _ := run("pin"); code != 2 {
		t.Fatalf("pin without --by: exit %d", code)
	}
}

// TestRunApprovalsFlags: run refuses a malformed --approvals and an
// approvals endpoint without the HTTP API, before connecting.
func TestRunApprovalsFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--approvals", "block+maybe"}, `first seen "maybe"`},
		{[]string{"--http", "", "--http-approvers-file", "/nonexistent"}, "--http-approvers-file needs --http"},
	} {
		code, _, stderr := runCmd(t, "", append([]string{"run", "--brokers", "127.0.0.1:1", "--clickhouse", "127.0.0.1:1"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, code, stderr, tc.msg)
		}
	}
}

// TestRegistryLockOffline: `registry lock --out --listings FILE` needs no
// Kafka and writes the lockfile that `registry pin` then `lock --out`
// give, byte for byte: on an empty baseline, and onto a lockfile's
// (--base) that rejected a tool, which pin leaves as it is; --registry
// limits both alike.
func TestRegistryLockOffline(t *testing.T) {
	addr, list := listingsBroker(t)
	chat := &schema.Listing{EventID: "chat", ObservedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Registry: "prod", Server: "chat", Op: schema.OpSnapshot}
	staging := &schema.Listing{EventID: "stg", ObservedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), Registry: "staging", Server: "chat", Op: schema.OpSnapshot}
	events := [][]byte{listingEvent(t, 1, sendV1),
		schema.AppendListing(nil, chat, [][]byte{[]byte(`{"name":"post","inputSchema":{"type":"object"}}`)}),
		schema.AppendListing(nil, staging, [][]byte{[]byte(`{"name":"post","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}}`)})}
	list(events...)
	dir := t.TempDir()
	lf := filepath.Join(dir, "listings.jsonl")
	os.WriteFile(lf, append(bytes.Join(events, []byte("\n")), '\n'), 0o600)
	kafka := func(args ...string) {
		t.Helper()
		if code, out, stderr := runCmd(t, "", append(append([]string{"registry"}, args...), "--brokers", addr)...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	offline := func(args ...string) []byte {
		t.Helper()
		code, out, stderr := runCmd(t, "", append([]string{"registry", "lock", "--out", "-", "--listings", lf, "--by", "ci"}, args...)...)
		if code != 0 {
			t.Fatalf("offline %v: exit %d\n%s", args, code, stderr)
		}
		return []byte(out)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// pinned's "at", as pin wrote it.
	atOf := func(lock []byte) string {
		t.Helper()
		for _, l := range strings.Split(string(lock), "\n") {
			var e struct{ At, State string }
			if json.Unmarshal([]byte(l), &e) == nil && e.State == "approved" {
				return e.At
			}
		}
		t.Fatalf("no approved definition in\n%s", lock)
		return ""
	}

	for _, tc := range []struct {
		name  string
		topic string
		args  []string // --registry
	}{{"every registry", "all", nil}, {"one registry", "prod", []string{"--registry", "prod"}}} {
		kafka(append([]string{"pin", "--by", "ci", "--approvals-topic", tc.topic}, tc.args...)...)
		kafka("lock", "--out", filepath.Join(dir, tc.topic+".lock"), "--approvals-topic", tc.topic)
		want := read(tc.topic + ".lock")
		got := offline(append([]string{"--at", atOf(want)}, tc.args...)...)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: offline:\n%s\npin + lock --out:\n%s", tc.name, got, want)
		}
		if n := bytes.Count(want, []byte("\n")) - 1; n != map[string]int{"all": 3, "prod": 2}[tc.topic] {
			t.Fatalf("%s: %d definitions:\n%s", tc.name, n, want)
		}
	}
	// Onto a baseline: send rejected, then pin.
	kafka("reject", "--registry", "prod", "--server", "mail", "--tool", "send", "--digest", mustDigest(t, sendV1), "--by", "b", "--reason", "no", "--approvals-topic", "base")
	kafka("lock", "--out", filepath.Join(dir, "rejected.lock"), "--approvals-topic", "base")
	kafka("pin", "--by", "ci", "--approvals-topic", "base")
	kafka("lock", "--out", filepath.Join(dir, "base.lock"), "--approvals-topic", "base")
	want := read("base.lock")
	got := offline("--base", filepath.Join(dir, "rejected.lock"), "--at", atOf(want))
	if !bytes.Equal(got, want) || !bytes.Contains(want, []byte(`"state":"rejected"`)) {
		t.Fatalf("offline onto a base:\n%s\npin + lock --out:\n%s", got, want)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"registry", "lock", "--out", "-", "--listings", lf}, "registry lock --out --listings needs --by WHO"},
		{[]string{"registry", "lock", "--out", "-", "--listings", lf, "--by", "ci", "--at", "yesterday"}, "--at"},
		{[]string{"registry", "lock", "--out", "-", "--listings", lf, "--by", "ci", "--registry", "nope"}, `registry "nope" has no listing`},
	} {
		code, _, stderr := runCmd(t, "", tc.args...)
		if code == 0 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %q", tc.args, code, stderr, tc.msg)
		}
	}
}
