package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/approvals/review"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
	"github.com/toolaudit/toolaudit/schema"
)

// TestDiffJSON: `registry diff --json` and `registry pending --json`
// print a change and a definition, with every member of its schema diff,
// byte for byte as testdata/diff.jsonl holds them (the diff's members
// named alike in both, in one order); without a diff, none of them.
func TestDiffJSON(t *testing.T) {
	d := diff.SchemaDiff{
		PropsAdded: []string{"/bcc"}, PropsRemoved: []string{"/cc"}, PropsRetyped: []string{"/limit: string -> integer"},
		RequiredAdded: []string{"/bcc"}, RequiredRemoved: []string{"/to"}, EnumAdded: []string{`/state: "closed"`},
		EnumRemoved: []string{`/state: "all"`}, Other: []string{"/limit: maximum 10 -> 5"},
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 123e6, time.FixedZone("CET", 3600))
	var got bytes.Buffer
	cs := []diff.Change{
		{Change: registry.Change{Registry: "prod", Server: "mail", Tool: "send", ObservedAt: at, EventID: "l-2",
			TrustBefore: 1, TrustAfter: 2, DigestBefore: "sha256:aa", DigestAfter: "sha256:bb"}, Kind: diff.Changed, Diff: d},
		{Change: registry.Change{Registry: "prod", Server: "mail", Tool: "read", ObservedAt: at, EventID: "l-3",
			TrustBefore: 2, TrustAfter: 2, DigestBefore: "sha256:cc"}, Kind: diff.Removed},
	}
	if err := writeChangesJSON(&got, cs); err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(&got)
	for _, it := range []review.Item{
		{Registry: "prod", Server: "mail", Tool: "send", Digest: "sha256:bb", Approval: schema.ApprovalUnapproved,
			Approved: []string{"sha256:aa"}, Base: "sha256:aa", Diff: &d},
		{Registry: "prod", Server: "mail", Tool: "read", Digest: "sha256:cc", Approval: schema.ApprovalApproved,
			By: "alice", At: at, Reason: "reviewed in #7"},
	} {
		if err := writeItemJSON(enc, &it); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/diff.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("got\n%s\nwant\n%s", got.Bytes(), want)
	}
}
