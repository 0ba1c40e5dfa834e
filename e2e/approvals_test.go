package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/registryversions"
	"github.com/toolaudit/toolaudit/schema"
)

const (
	mailV1 = `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`
	mailV2 = `{"type":"object","properties":{"to":{"type":"string"},"bcc":{"type":"string"}},"required":["to"]}`
)

func mailListing(at time.Time, inputSchema string) []byte {
	l := &schema.Listing{EventID: "mail-" + at.Format("150405.000"), ObservedAt: at, Registry: "appr", Server: "mail", Trust: 1, Op: schema.OpSnapshot}
	return schema.AppendListing(nil, l, [][]byte{[]byte(`{"name":"send","inputSchema":` + inputSchema + `}`)})
}

func mailCall(id string) string {
	c := &schema.Call{EventID: id, EmittedAt: time.Now().UTC(), Registry: "appr", AgentID: "a", SessionID: "s-" + id, Tool: "send", Server: "mail"}
	return string(schema.AppendCall(nil, c, schema.CallArgs{JSON: []byte(`{"to":"x@example.com"}`)}))
}

// TestApprovalsFleet: two resolverd run instances under --approvals
// block answer POST /v1/resolve. mail's send is approved as listed; the
// server changes it (a rug pull, announced by a new listing): both
// instances refuse it as M4 naming the current and the approved digest;
// once `resolverd registry approve` writes the approval, both allow it,
// within the bound measured here; the rows stored carry approval and
// baseline_version.
func TestApprovalsFleet(t *testing.T) {
	e := newEnv(t, chenginetest.Server(t), 3)
	e.createTopics(3, "tool-audit")
	v1, _ := registryversions.Digest("send", []byte(mailV1))
	v2, _ := registryversions.Digest("send", []byte(mailV2))
	e.produce("tool-listings", [][]byte{mailListing(time.Now().Add(-time.Hour).UTC(), mailV1)}, 0)
	registry := func(args ...string) string {
		t.Helper()
		out, err := execCommand(append(append([]string{"registry"}, args...), "--brokers", strings.Join(e.brokers, ","))...).CombinedOutput()
		if err != nil {
			t.Fatalf("registry %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	approve := func(digest string) {
		registry("approve", "--registry", "appr", "--server", "mail", "--tool", "send", "--digest", digest, "--by", "e2e", "--reason", "reviewed")
	}
	approve(v1)

	var urls []string
	for range 2 {
		d := e.start("--http", "127.0.0.1:0", "--approvals", "block")
		urls = append(urls, d.apiURL(t))
		d.waitLog(t, "approvals caught up", 30*time.Second)
		d.waitLog(t, "listings caught up", 30*time.Second)
	}
	n := 0
	decide := func(url string) map[string]any {
		t.Helper()
		n++
		a := postTo(t, url, "", mailCall(fmt.Sprintf("c%d", n)))
		var d map[string]any
		if a.status != 200 || json.Unmarshal(a.body, &d) != nil {
			t.Fatalf("status %d: %s", a.status, a.body)
		}
		return d
	}
	for _, u := range urls {
		if d := decide(u); d["class"] != "OK" || d["approval"] != "approved" || d["baseline_version"] != "1" {
			t.Fatalf("before the change: %v", d)
		}
	}

	e.produce("tool-listings", [][]byte{mailListing(time.Now().UTC(), mailV2)}, 0)
	for _, u := range urls {
		deadline := time.Now().Add(30 * time.Second)
		for {
			d := decide(u)
			if d["class"] == "M4" {
				if r := d["reason"].(string); !strings.Contains(r, v2) || !strings.Contains(r, "approved: "+v1) || d["approval"] != "unapproved" {
					t.Fatalf("refusal: %v", d)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the changed definition is still allowed: %v", d)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if out := registry("pending"); !strings.Contains(out, "unapproved  "+v2) || !strings.Contains(out, "+ /bcc") {
		t.Fatalf("pending:\n%s", out)
	}

	approve(v2)
	approved := time.Now()
	var took []time.Duration
	for _, u := range urls {
		for {
			if d := decide(u); d["class"] == "OK" {
				if d["approval"] != "approved" || d["baseline_version"] != "2" {
					t.Fatalf("after the approval: %v", d)
				}
				break
			}
			if time.Since(approved) > 10*time.Second {
				t.Fatal("the approval did not reach the fleet in 10 s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		took = append(took, time.Since(approved))
	}
	t.Logf("the approval reached both instances %v after registry approve returned", took)

	// Stored: every API decision with its approval and baseline version.
	deadline := time.Now().Add(60 * time.Second)
	for {
		var unapproved, approvedRows uint64
		err := e.connect().QueryRow(context.Background(), fmt.Sprintf(`SELECT countIf(approval = 'unapproved' AND class = 'M4' AND baseline_version = '1'),
			countIf(approval = 'approved' AND class = 'OK') FROM %s.decisions FINAL WHERE source = 'api'`, e.db)).Scan(&unapproved, &approvedRows)
		if err != nil {
			t.Fatal(err)
		}
		if unapproved >= 2 && approvedRows >= 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stored: %d unapproved M4, %d approved OK", unapproved, approvedRows)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
