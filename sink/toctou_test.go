package sink

import (
	"context"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// TestTOCTOU: with stream, api and gateway rows of the same calls stored
// (one api row written twice: FINAL keeps the later), the query lists
// exactly the calls whose enforcement-time class differs from the
// stream's, newest first, and not those of another analysis.
func TestTOCTOU(t *testing.T) {
	w := newWriter(t)
	stream := mkRows("live", 0, 20, base.Add(time.Hour))
	var rows []schema.Row
	rows = append(rows, stream...)
	enforce := func(i int, src schema.Source, class schema.Class, version string, at time.Duration) schema.Row {
		r := stream[i]
		r.Source, r.Action = src, schema.ActionEnforced
		r.Set(class, "at enforcement")
		r.RegistryVersion = version
		r.DecidedAt = base.Add(at)
		r.Topic = "tool-audit"
		return r
	}
	// Calls 0..4 decided in the call path too: 1 and 3 differently.
	rows = append(rows,
		enforce(0, schema.SourceAPI, stream[0].Class, "rv-1", time.Minute),
		enforce(1, schema.SourceAPI, schema.OK, "rv-0", 2*time.Minute), // stream: H1
		enforce(2, schema.SourceGateway, stream[2].Class, "rv-1", 3*time.Minute),
		enforce(3, schema.SourceGateway, schema.H1, "rv-0", 4*time.Minute), // stream: H3
		enforce(4, schema.SourceAPI, schema.H2, "rv-0", 5*time.Minute),     // superseded below
		enforce(4, schema.SourceAPI, stream[4].Class, "rv-1", 6*time.Minute),
	)
	other := enforce(5, schema.SourceAPI, schema.OK, "rv-0", time.Minute)
	other.AnalysisID = "other"
	rows = append(rows, other)
	mustWrite(t, w, rows)

	gaps, err := w.TOCTOU(context.Background(), "live", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(gaps) != 2 {
		t.Fatalf("%d gaps, want 2: %+v", len(gaps), gaps)
	}
	want := []struct {
		key       string
		src       schema.Source
		enf, strm schema.Class
	}{
		{stream[3].CallKey, schema.SourceGateway, schema.H1, stream[3].Class},
		{stream[1].CallKey, schema.SourceAPI, schema.OK, stream[1].Class},
	}
	for i, g := range gaps {
		w := want[i]
		if g.CallKey != w.key || g.EnforcementSource != w.src || g.EnforcementClass != w.enf || g.StreamClass != w.strm ||
			g.EnforcementVersion != "rv-0" || g.StreamVersion != "rv-1" || g.Action != schema.ActionEnforced ||
			!g.StreamedAt.Equal(base.Add(time.Hour)) || g.SessionID == "" {
			t.Fatalf("gap %d: %+v, want %+v", i, g, w)
		}
	}
	if gaps, err := w.TOCTOU(context.Background(), "live", 1); err != nil || len(gaps) != 1 {
		t.Fatalf("limit 1: %d gaps, %v", len(gaps), err)
	}
}
