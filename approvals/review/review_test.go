package review

import (
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/schema"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

const (
	v1 = `{"type":"object","properties":{"to":{"type":"string"}},"required":["to"]}`
	v2 = `{"type":"object","properties":{"to":{"type":"string"},"bcc":{"type":"string"}},"required":["to","bcc"]}`
	v3 = `{"type":"object","properties":{"to":{"type":"integer"}}}`
)

func listing(sec int, server string, tools ...schema.Tool) *schema.Listing {
	return &schema.Listing{EventID: server, ObservedAt: t0.Add(time.Duration(sec) * time.Second), Registry: "prod", Server: server, Op: schema.OpSnapshot, Tools: tools}
}

func digest(t *testing.T, name, s string) string {
	d, err := schema.Digest(name, []byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReview: mail's send changed from v1 (approved) to v2: unapproved,
// with the diff from v1; files' read is approved; chat's post is new;
// shell's run is rejected.
func TestReview(t *testing.T) {
	c := New()
	tl := func(name, s string) schema.Tool { return schema.Tool{Name: name, InputSchema: []byte(s)} }
	c.Apply(listing(0, "mail", tl("send", v1)), listing(0, "files", tl("read", v1)), listing(0, "chat", tl("post", v1)),
		listing(0, "shell", tl("run", v3)), listing(10, "mail", tl("send", v2)))
	var set approvals.Set
	for i, e := range []*approvals.Event{
		{Registry: "prod", Server: "mail", Tool: "send", Digest: digest(t, "send", v1), Verb: approvals.Approve, By: "a", At: t0},
		{Registry: "prod", Server: "mail", Tool: "send", Digest: digest(t, "send", v3), Verb: approvals.Approve, By: "a", At: t0.Add(time.Hour)}, // never listed: no diff from it
		{Registry: "prod", Server: "files", Tool: "read", Digest: digest(t, "read", v1), Verb: approvals.Approve, By: "a", At: t0},
		{Registry: "prod", Server: "shell", Tool: "run", Digest: digest(t, "run", v3), Verb: approvals.Reject, By: "b", At: t0, Reason: "no shells"},
	} {
		if err := set.Apply(e, int64(i+1)); err != nil {
			t.Fatal(err)
		}
	}
	items, err := c.Review(set.Snapshot(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range items {
		got = append(got, it.Server+"/"+it.Tool+" "+string(it.Approval)+" "+map[bool]string{true: "pending", false: "-"}[it.Pending()])
	}
	if want := "chat/post new pending|files/read approved -|mail/send unapproved pending|shell/run rejected -"; strings.Join(got, "|") != want {
		t.Fatalf("%s\nwant %s", strings.Join(got, "|"), want)
	}
	send := items[2]
	if send.Digest != digest(t, "send", v2) || send.Base != digest(t, "send", v1) || len(send.Approved) != 2 || send.Diff == nil {
		t.Fatalf("send: %+v", send)
	}
	if s := send.Diff.Summary(); !strings.Contains(s, "+/bcc") || !strings.Contains(s, "required+/bcc") {
		t.Errorf("diff %q", s)
	}
	if shell := items[3]; shell.By != "b" || shell.Reason != "no shells" || shell.Diff != nil {
		t.Errorf("shell: %+v", shell)
	}
	if _, err := c.Review(set.Snapshot(), []string{"prod", "nope"}); err == nil || !strings.Contains(err.Error(), `"nope" has no listing`) {
		t.Errorf("unknown registry: %v", err)
	}
	if regs := c.Registries(); len(regs) != 1 || regs[0] != "prod" {
		t.Errorf("registries %v", regs)
	}
}
