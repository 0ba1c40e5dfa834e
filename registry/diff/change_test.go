package diff

import (
	"reflect"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

var t0 = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// github is a listing of server github at t0+sec: tools are name and
// inputSchema pairs; no tools and trust -1 is a remove.
func github(id string, sec, trust int, tools ...string) *schema.Listing {
	l := &schema.Listing{EventID: id, ObservedAt: t0.Add(time.Duration(sec) * time.Second), Registry: "fleet", Server: "github", Trust: trust, Op: schema.OpSnapshot}
	if trust < 0 {
		l.Op, l.Trust = schema.OpRemove, 0
	}
	for i := 0; i+1 < len(tools); i += 2 {
		l.Tools = append(l.Tools, schema.Tool{Name: tools[i], InputSchema: []byte(tools[i+1])})
	}
	return l
}

const (
	issueV1 = `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"]}`
	issueV2 = `{"type":"object","properties":{"title":{"type":"string"},"labels":{"type":"array"}},"required":["title","labels"]}`
	search  = `{"type":"object","properties":{"q":{"type":"string"}}}`
)

// described applies listings to a store that reports its changes, one
// Apply per call of the returned function, and describes them.
func described(t *testing.T) func(ls ...*schema.Listing) []Change {
	var got []registry.Change
	s := registry.New(registry.WithChanges(func(cs []registry.Change) { got = append(got, cs...) }))
	return func(ls ...*schema.Listing) []Change {
		t.Helper()
		got = nil
		if issues := s.Apply(ls...); len(issues) != 0 {
			t.Fatal(issues)
		}
		var out []Change
		for _, c := range got {
			out = append(out, Describe(c))
		}
		return out
	}
}

// TestDescribeHistory: a server's life, listing by listing, as rows:
// kinds and summaries.
func TestDescribeHistory(t *testing.T) {
	apply := described(t)
	type row struct {
		sec     int
		tool    string
		kind    Kind
		sum     string
		deleted bool
	}
	rows := func(cs []Change) []row {
		var out []row
		for _, c := range cs {
			out = append(out, row{int(c.ObservedAt.Sub(t0).Seconds()), c.Tool, c.Kind, c.Summary, c.Deleted})
		}
		return out
	}
	steps := []struct {
		l    *schema.Listing
		want []row
	}{
		{github("l1", 0, 2, "create_issue", issueV1, "search", search), []row{
			{0, "create_issue", Added, "added: +/title required+/title", false},
			{0, "search", Added, "added: +/q", false},
		}},
		{github("l2", 10, 2, "create_issue", issueV1, "search", search), nil}, // relisting
		{github("l3", 20, 2, "create_issue", issueV2), []row{
			{20, "create_issue", Changed, "changed: +/labels required+/labels", false},
			{20, "search", Removed, "removed", false},
		}},
		{github("l4", 30, 1, "create_issue", issueV2), []row{{30, "create_issue", Trust, "trust 2 -> 1", false}}},
		{github("l4", 30, 1, "create_issue", issueV2), nil}, // redelivered
		{github("l4b", 35, 2, "create_issue", issueV1), []row{
			{35, "create_issue", Changed, "changed: -/labels required-/labels, trust 1 -> 2", false}}},
		{github("l5", 40, -1), []row{{40, "create_issue", Removed, "removed", false}}},
		// Late: at 32 the change of 35 happens, and nothing any more at 35.
		{github("l3b", 32, 2, "create_issue", issueV1), []row{
			{32, "create_issue", Changed, "changed: -/labels required-/labels, trust 1 -> 2", false},
			{35, "create_issue", Changed, "changed: -/labels required-/labels, trust 1 -> 2", true}}},
	}
	for i, s := range steps {
		got := apply(s.l)
		if !reflect.DeepEqual(rows(got), s.want) {
			t.Fatalf("step %d: got %+v, want %+v", i, rows(got), s.want)
		}
		for _, c := range got {
			if c.Registry != "fleet" || c.Server != "github" || !c.RecordedAt.IsZero() {
				t.Errorf("step %d: row %+v", i, c)
			}
		}
	}
	// Digests and trust on the change rows.
	got := apply(github("l6", 50, 3, "create_issue", issueV1))
	if len(got) != 1 {
		t.Fatalf("re-add: %+v", got)
	}
	d, err := schema.Digest("create_issue", []byte(issueV1))
	if err != nil {
		t.Fatal(err)
	}
	c := got[0]
	if c.Kind != Added || c.DigestBefore != "" || c.DigestAfter != d || c.TrustBefore != 0 || c.TrustAfter != 3 || c.EventID != "l6" ||
		!reflect.DeepEqual(c.Diff, SchemaDiff{PropsAdded: []string{"/title"}, RequiredAdded: []string{"/title"}}) {
		t.Errorf("re-add row %+v", c)
	}
}
