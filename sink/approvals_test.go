package sink

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
)

// TestApprovalEvents: approval events round-trip through table
// approval_events; written again (a restart reads the topic again) they
// are still one row each under FINAL; an event at the same offset of a
// recreated topic (another decided_at) is kept beside the first; the
// registry filter selects; an event without a version is refused.
func TestApprovalEvents(t *testing.T) {
	w := newWriter(t)
	ctx := context.Background()
	d := func(c string) string { return "sha256:" + strings.Repeat(c, 64) }
	ev := func(v int64, reg, tool, digest string, verb approvals.Verb, by string, s int) approvals.Recorded {
		return approvals.Recorded{Version: v, Event: approvals.Event{EventID: "e" + by, Registry: reg, Server: "github", Tool: tool,
			Digest: digest, Verb: verb, By: by, At: base.Add(time.Duration(s) * time.Second), Reason: "reviewed by " + by}}
	}
	first := []approvals.Recorded{
		ev(1, "fleet", "create_issue", d("a"), approvals.Approve, "ana", 1),
		ev(2, "fleet", "create_issue", d("b"), approvals.Reject, "bo", 2),
		ev(3, "other", "search", d("c"), approvals.Approve, "cy", 3),
	}
	first[0].DescriptionDigest = d("d")
	for range 2 {
		if err := w.WriteApprovalEvents(ctx, first); err != nil {
			t.Fatal(err)
		}
	}
	recreated := ev(1, "fleet", "create_issue", d("a"), approvals.Revoke, "dee", 9)
	if err := w.WriteApprovalEvents(ctx, []approvals.Recorded{recreated}); err != nil {
		t.Fatal(err)
	}
	got, err := w.ApprovalEvents(ctx, "fleet", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []approvals.Recorded{first[0], recreated, first[1]}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("approval events:\n got %+v\nwant %+v", got, want)
	}
	if all, err := w.ApprovalEvents(ctx, "", 0); err != nil || len(all) != 4 {
		t.Errorf("all registries: %d events, %v; want 4", len(all), err)
	}
	if err := w.WriteApprovalEvents(ctx, []approvals.Recorded{ev(0, "fleet", "x", d("e"), approvals.Approve, "ed", 1)}); err == nil {
		t.Error("an event without a baseline version was written")
	}
}
