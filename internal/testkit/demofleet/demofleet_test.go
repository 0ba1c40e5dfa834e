package demofleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/demofleet"
	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
	"github.com/toolaudit/toolaudit/registry"
)

// TestSessions: the demo's fleet (htb's single and MCP tracks, regrouped)
// decided by the real resolver (package offline): sessions of tens of
// calls; every call the class it is labelled with but the rug pull's
// tool after it changed; in the rug pull session the tool's calls before
// the change drift and those after are M4 (stale); the inventing session
// calls one unknown name again and again; and the session with the most
// rejections is one of the two incidents, which the report's timeline
// then shows.
func TestSessions(t *testing.T) {
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	outL, outC, rp, err := demofleet.Demo(start, 1, 40, 800) // fleetgen -demo's
	if err != nil {
		t.Fatal(err)
	}
	again, againC, _, _ := demofleet.Demo(start, 1, 40, 800)
	if !slices.EqualFunc(outL, again, bytes.Equal) || len(againC) != len(outC) || !bytes.Equal(againC[len(againC)-1].Line, outC[len(outC)-1].Line) {
		t.Error("not deterministic for a seed")
	}

	store := registry.New()
	if st, err := check.LoadListings(bytes.NewReader(bytes.Join(outL, []byte("\n"))), store, nil); err != nil || st.Bad != 0 {
		t.Fatalf("listings: %+v, %v", st, err)
	}
	var in bytes.Buffer
	for _, c := range outC {
		in.Write(c.Line)
		in.WriteByte('\n')
	}
	var out bytes.Buffer
	if _, err := check.Check(context.Background(), check.Config{Workers: 2}, store.Snapshot(), bytes.NewReader(in.Bytes()), &out); err != nil {
		t.Fatal(err)
	}
	ds := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if len(ds) != len(outC) {
		t.Fatalf("%d decisions of %d calls", len(ds), len(outC))
	}

	perSession := map[string]int{}
	rejects := map[string]int{}
	invented := map[string]int{}
	var last time.Time
	for i, line := range outC {
		var c struct {
			EventID   string `json:"event_id"`
			SessionID string `json:"session_id"`
			Tool      string `json:"tool"`
			EmittedAt string `json:"emitted_at"`
		}
		var d struct {
			EventID      string `json:"event_id"`
			Class        string `json:"class"`
			Verdict      string `json:"verdict"`
			Drift        bool   `json:"drift"`
			ResolvedTool string `json:"resolved_tool"`
		}
		if err := json.Unmarshal(line.Line, &c); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(ds[i], &d); err != nil || d.EventID != c.EventID {
			t.Fatalf("decision %d %s (%v) for call %s", i, ds[i], err, c.EventID)
		}
		at, err := time.Parse(time.RFC3339Nano, c.EmittedAt)
		if err != nil || at.Before(last) || at.Before(start) {
			t.Fatalf("call %s at %q: not in emission order from the start", c.EventID, c.EmittedAt)
		}
		last = at
		perSession[c.SessionID]++
		if d.Verdict == "reject" {
			rejects[c.SessionID]++
		}
		switch {
		case slices.Contains(rp.Before, c.EventID):
			if d.Class != "OK" || !d.Drift {
				t.Errorf("rug pull: %s before the change decided %s, drift %v; want OK with drift", c.EventID, d.Class, d.Drift)
			}
		case slices.Contains(rp.After, c.EventID):
			if d.Class != "M4" {
				t.Errorf("rug pull: %s after the change decided %s, want M4 (stale)", c.EventID, d.Class)
			}
		case d.ResolvedTool == rp.Tool && at.After(rp.At):
			// Other sessions' calls to the changed tool: stale too, or not.
		case d.Class != line.Class:
			t.Errorf("call %s decided %s, labelled %s", c.EventID, d.Class, line.Class)
		}
		if c.SessionID == fleet.InventingSession && (d.Class == "H1" || d.Class == "M1") {
			invented[c.Tool]++
		}
	}
	if len(rp.Before) < 5 || len(rp.After) < 5 {
		t.Errorf("rug pull: %d calls before, %d after", len(rp.Before), len(rp.After))
	}
	most := 0
	for _, n := range invented {
		most = max(most, n)
	}
	if most < 12 {
		t.Errorf("the inventing session's unknown names: %v", invented)
	}
	for s, n := range perSession {
		if n < 20 || n > 60+24 {
			t.Errorf("session %s has %d calls", s, n)
		}
	}
	top, topN := "", 0
	for s, n := range rejects {
		if n > topN || n == topN && s < top {
			top, topN = s, n
		}
	}
	if top != fleet.RugPullSession && top != fleet.InventingSession {
		t.Errorf("the session with the most rejections is %s (%d), not an incident; rejections %v", top, topN, rejects)
	}
	t.Logf("%d calls, %d sessions; rejections: rug pull %d, inventing %d, top %s %d", len(outC), len(perSession), rejects[fleet.RugPullSession], rejects[fleet.InventingSession], top, topN)
}
