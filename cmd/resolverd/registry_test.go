package main

import (
	"strings"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/registry/diff"
)

// TestRegistryDiffDigests: registry diff prints a changed tool's two
// digests whole, as registry pending and lock --check print theirs, so
// that the digests a person compares are written alike.
func TestRegistryDiffDigests(t *testing.T) {
	v1, v2 := mustDigest(t, sendV1), mustDigest(t, sendV2)
	at := time.Date(2026, 12, 1, 0, 0, 2, 0, time.UTC)
	c := diff.Describe(registry.Change{Registry: "prod", Server: "mail", Tool: "send", ObservedAt: at, EventID: "l2",
		TrustBefore: 1, TrustAfter: 1, DigestBefore: v1, DigestAfter: v2, SchemaBefore: []byte(sendV1), SchemaAfter: []byte(sendV2)})
	added := diff.Describe(registry.Change{Registry: "prod", Server: "mail", Tool: "send", ObservedAt: at, EventID: "l1",
		TrustAfter: 1, DigestAfter: v1, SchemaAfter: []byte(sendV1)})
	var b strings.Builder
	writeChanges(&b, []diff.Change{added, c})
	for _, want := range []string{"send  added  " + v1 + "  (listing l1)", "send  changed  " + v1 + " -> " + v2 + "  (listing l2)", "+ /bcc"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("registry diff lacks %q:\n%s", want, b.String())
		}
	}
}
