package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/sink"
)

// TestApprovalHistory: `resolverd run --registry-history` copies the
// approvals topic into table approval_events: a definition approved,
// then rejected with `resolverd registry approve|reject` (the topic
// created after the daemon started) is in the table, each event once,
// with who, why and its baseline version.
func TestApprovalHistory(t *testing.T) {
	d := startDaemon(t)
	digest := "sha256:" + strings.Repeat("ab", 32)
	for _, verb := range []string{"approve", "reject"} {
		if code, out, stderr := runCmd(t, "", "registry", verb, "--brokers", d.kafka, "--registry", "fleet", "--server", "github",
			"--tool", "create_issue", "--digest", digest, "--by", "ana", "--reason", verb+" after review"); code != 0 {
			t.Fatalf("registry %s exited %d: %s%s", verb, code, out, stderr)
		}
	}
	waitUntil(t, 60*time.Second, "the approval history written", func() bool {
		return sum(d.metrics(t), "toolaudit_approval_history_version") >= 2
	})
	ctx := context.Background()
	ch, err := sink.NewClickHouse(ctx, sink.Config{Addr: []string{d.clickhouse}})
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	got, err := ch.ApprovalEvents(ctx, "fleet", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("approval_events holds %d events of fleet, want 2: %+v", len(got), got)
	}
	for i, verb := range []approvals.Verb{approvals.Approve, approvals.Reject} {
		e := got[i]
		if e.Verb != verb || e.Version != int64(i+1) || e.By != "ana" || e.Reason != string(verb)+" after review" ||
			e.Server != "github" || e.Tool != "create_issue" || e.Digest != digest {
			t.Errorf("event %d: %+v, want %s at version %d", i, e, verb, i+1)
		}
	}
}
