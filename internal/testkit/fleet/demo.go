package fleet

import (
	"time"

	"github.com/toolaudit/toolaudit/htb"
)

// Demo is the demo's fleet (scripts/fleetgen -demo, make demo): htb's
// single-registry and MCP tracks (trials hostile calls per class, honest
// per honest kind) regrouped by Sessions from start.
func Demo(start time.Time, seed uint64, trials, honest int) ([][]byte, []Call, RugPull, error) {
	tracks, err := htb.Build(htb.Config{Seed: seed, Tracks: []string{htb.TrackSingle, htb.TrackMCP}, Trials: trials, Honest: honest})
	if err != nil {
		return nil, nil, RugPull{}, err
	}
	var listings [][]byte
	var calls []Call
	for _, t := range tracks {
		listings = append(listings, t.Listings...)
		for _, tr := range t.Trials {
			calls = append(calls, Call{Line: tr.Line, Class: string(tr.Expect)})
		}
	}
	return Sessions(SessionsConfig{Start: start, Seed: seed}, listings, calls)
}
