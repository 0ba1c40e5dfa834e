package report

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/demofleet"
	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

// demoConn is the demo's fleet (cmd/fleetgen -demo: htb's tracks as
// agent sessions, fleet.Sessions) starting at start, decided by the real
// resolver (package offline) and written with its registry history
// through resolverd's writer into database db of the shared engine.
func demoConn(t *testing.T, db string, start time.Time) (driver.Conn, fleet.RugPull) {
	t.Helper()
	lines, calls, rp, err := demofleet.Demo(start, 1, 40, 800) // fleetgen -demo's
	if err != nil {
		t.Fatal(err)
	}
	store := registry.New()
	if st, err := check.LoadListings(bytes.NewReader(bytes.Join(lines, []byte("\n"))), store, nil); err != nil || st.Bad != 0 {
		t.Fatalf("listings: %+v, %v", st, err)
	}
	var in, out bytes.Buffer
	for _, c := range calls {
		in.Write(c.Line)
		in.WriteByte('\n')
	}
	if _, err := check.Check(context.Background(), check.Config{Workers: 2}, store.Snapshot(), &in, &out); err != nil {
		t.Fatal(err)
	}
	ds := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	rows := make([]schema.Row, len(calls))
	for i, c := range calls {
		var call struct {
			EventID                                          string `json:"event_id"`
			Registry, Tool, Server, Model, Provider, Surface string
			AgentID                                          string `json:"agent_id"`
			SessionID                                        string `json:"session_id"`
			EmittedAt                                        string `json:"emitted_at"`
			SeenDigest                                       string `json:"seen_digest"`
		}
		var d struct {
			Class, Verdict, Reason, Path string
			ResolvedServer               string `json:"resolved_server"`
			ResolvedTool                 string `json:"resolved_tool"`
			RegistryVersion              string `json:"registry_version"`
			Drift                        bool
		}
		if err := json.Unmarshal(c.Line, &call); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ds[i], &d); err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339Nano, call.EmittedAt)
		if err != nil {
			t.Fatal(err)
		}
		r := &rows[i]
		r.Set(schema.Class(d.Class), d.Reason)
		r.EventID, r.CallKey, r.Path, r.Drift = call.EventID, call.EventID, d.Path, d.Drift
		r.ResolvedServer, r.ResolvedTool, r.RegistryVersion, r.SeenDigest = d.ResolvedServer, d.ResolvedTool, d.RegistryVersion, call.SeenDigest
		r.AnalysisID, r.Source = "demo", schema.SourceStream
		r.Registry, r.Model, r.Provider, r.Surface, r.Tool, r.Server = call.Registry, call.Model, call.Provider, call.Surface, call.Tool, call.Server
		r.SessionID, r.AgentID = call.SessionID, call.AgentID
		r.EmittedAt, r.DecidedAt = at, at.Add(time.Second)
		r.ResolverBuild, r.PolicyVersion, r.Topic = "test", "strict/v1", "tool-calls"
	}
	var listings []*schema.Listing
	for _, l := range lines {
		dl, err := schema.DecodeListing(l)
		if err != nil {
			t.Fatal(err)
		}
		listings = append(listings, dl)
	}
	return writeDB(t, db, rows, listings), rp
}

var (
	changeLineRe = regexp.MustCompile(`<g data-q="changes.in_range" data-v="([^"]+)"><line [^>]*>(?:</line>)?<text [^>]*>([^<]*)</text>`)
	timelineRe   = regexp.MustCompile(`<circle [^>]*?( stroke="[^"]*" stroke-width="[^"]*")? data-q="incident.session_decisions" data-class="([^"]+)" data-v="([^"]+)"`)
	axisRe       = regexp.MustCompile(`on a time axis \(([0-9:.]+) to ([0-9:.]+) UTC\)`)
)

// TestDemoIncident: over the demo's fleet (as make demo ingests it, over
// all of its span), the report's sessions with the most rejections are
// sessions of tens of calls led by the rug pull, and the timeline of
// that session, as headless Chromium reads the page, spans minutes: the
// tool's calls before the listing that changed it ringed (drift), the
// change drawn between them, the calls after it stale (M4). The
// inventing session's timeline shows its model's one unknown name again
// and again.
func TestDemoIncident(t *testing.T) {
	start := time.Now().UTC().Truncate(24 * time.Hour).Add(-2 * 24 * time.Hour)
	conn, rp := demoConn(t, "demo_incident", start)
	from, to, ok, err := SpanOf(context.Background(), conn, "demo")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	o := Options{Analysis: "demo", From: from, To: to}
	r, err := Collect(context.Background(), conn, o)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Sessions
	if len(s.Rows) < 5 || cellAt(s, 0, "session") != fleet.RugPullSession {
		t.Fatalf("sessions with the most rejections: %v", s.Rows)
	}
	for i := range s.Rows {
		if n, _ := s.Rows[i][s.Col("decisions")].(uint64); n < 20 {
			t.Errorf("session %s has %d decisions: not a session of tens of calls", cellAt(s, i, "session"), n)
		}
	}

	o.Session = fleet.RugPullSession
	if r, err = Collect(context.Background(), conn, o); err != nil {
		t.Fatal(err)
	}
	dom := pageDOM(t, r, "rug-pull")
	if ax := axisRe.FindStringSubmatch(dom); ax == nil || ax[1] == ax[2] {
		t.Errorf("the timeline's axis: %q", ax)
	}
	lines := changeLineRe.FindAllStringSubmatch(dom, -1)
	var at time.Time
	for _, l := range lines {
		if strings.Contains(l[2], rp.Server+": changed "+rp.Tool) {
			at, _ = time.Parse(time.RFC3339Nano, l[1])
		}
	}
	if !at.Equal(rp.At) {
		t.Fatalf("the timeline draws the changes %q, not the rug pull of %s %s at %s", lines, rp.Server, rp.Tool, rp.At)
	}
	marks := timelineRe.FindAllStringSubmatch(dom, -1)
	var ringedBefore, staleAfter, decisions int
	for _, m := range marks {
		when, err := time.Parse(time.RFC3339Nano, m[3])
		if err != nil {
			t.Fatal(err)
		}
		decisions++
		switch {
		case m[1] != "" && when.Before(at):
			ringedBefore++
		case m[2] == "M4" && when.After(at):
			staleAfter++
		case m[1] != "" || m[2] == "M4":
			t.Errorf("mark %v on the wrong side of the rug pull at %s", m, at)
		}
	}
	if decisions < 20 || ringedBefore != len(rp.Before) || staleAfter < len(rp.After) {
		t.Errorf("timeline: %d marks, %d ringed before the change (the session called the tool %d times), %d stale after (%d calls)",
			decisions, ringedBefore, len(rp.Before), staleAfter, len(rp.After))
	}

	o.Session = fleet.InventingSession
	if r, err = Collect(context.Background(), conn, o); err != nil {
		t.Fatal(err)
	}
	dom = pageDOM(t, r, "inventing")
	unknown := 0
	for _, m := range timelineRe.FindAllStringSubmatch(dom, -1) {
		if m[2] == "H1" || m[2] == "M1" {
			unknown++
		}
	}
	if unknown < 12 {
		t.Errorf("the inventing session's timeline shows %d unknown names", unknown)
	}
}
