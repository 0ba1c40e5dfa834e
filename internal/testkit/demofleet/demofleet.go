// Package demofleet is the demo's fleet: htb's tracks regrouped into
// agent sessions (fleet.Sessions). It is apart from package fleet, which
// the registry's tests import, because htb imports the registry.
package demofleet

import (
	"time"

	"github.com/toolaudit/toolaudit/htb"
	"github.com/toolaudit/toolaudit/internal/testkit/fleet"
)

// Demo is the demo's fleet (cmd/fleetgen -demo, make demo): htb's
// single-registry and MCP tracks (trials hostile calls per class, honest
// per honest kind) regrouped by Sessions from start.
func Demo(start time.Time, seed uint64, trials, honest int) ([][]byte, []fleet.Call, fleet.RugPull, error) {
	tracks, err := htb.Build(htb.Config{Seed: seed, Tracks: []string{htb.TrackSingle, htb.TrackMCP}, Trials: trials, Honest: honest})
	if err != nil {
		return nil, nil, fleet.RugPull{}, err
	}
	var listings [][]byte
	var calls []fleet.Call
	for _, t := range tracks {
		listings = append(listings, t.Listings...)
		for _, tr := range t.Trials {
			calls = append(calls, fleet.Call{Line: tr.Line, Class: string(tr.Expect)})
		}
	}
	return fleet.Sessions(fleet.SessionsConfig{Start: start, Seed: seed}, listings, calls)
}
