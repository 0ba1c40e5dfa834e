// Package fleet generates the listing events of a fleet of MCP hosts: each
// host session lists its servers' tools when it starts, so almost every
// listing repeats one the registry already has, and a few carry a changed
// definition (a server upgraded). Benchmarks and tests of the registry
// store use it; it is deterministic for a seed. Sessions (and Demo, the
// demo's fleet) regroup a simulated fleet's calls into agent sessions of
// tens of calls, two of them with an incident: a rug pull mid-session and
// a model inventing a name again and again.
package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"
)

// Manifest is one server's listing as the corpus has it.
type Manifest struct {
	Server string
	Trust  int
	Tools  []map[string]any
}

// ReadManifests is Manifests of a file.
func ReadManifests(path string) ([]Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Manifests(data)
}

// Manifests reads the servers of listing events (JSONL), one per server,
// the last listing of each in the input winning.
func Manifests(jsonl []byte) ([]Manifest, error) {
	byServer := map[string]Manifest{}
	var order []string
	for i, line := range bytes.Split(bytes.TrimSpace(jsonl), []byte("\n")) {
		var l struct {
			Server string           `json:"server"`
			Trust  int              `json:"trust"`
			Op     string           `json:"op"`
			Tools  []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		if l.Op == "remove" {
			continue
		}
		if _, ok := byServer[l.Server]; !ok {
			order = append(order, l.Server)
		}
		byServer[l.Server] = Manifest{l.Server, l.Trust, l.Tools}
	}
	out := make([]Manifest, 0, len(order))
	for _, s := range order {
		out = append(out, byServer[s])
	}
	return out, nil
}

// Config of a generated fleet.
type Config struct {
	Registry          string        // default "fleet"
	Sessions          int           // host sessions
	ServersPerSession int           // default 3
	Every             time.Duration // between sessions, default 130s
	ChangeRate        float64       // share of listings that change one definition of their server, from then on
	Start             time.Time     // first session; default 2026-12-01T00:00:00Z
	Seed              uint64
	IDPrefix          string // event ids are IDPrefix + a sequence number; default "f-"
}

// Event is one generated listing.
type Event struct {
	ObservedAt time.Time
	Server     string
	Changed    bool // carries a definition changed by this event
	Line       []byte
}

// Generate returns the fleet's listing events in event time order.
func Generate(cfg Config, ms []Manifest) []Event {
	if cfg.Registry == "" {
		cfg.Registry = "fleet"
	}
	if cfg.ServersPerSession <= 0 {
		cfg.ServersPerSession = 3
	}
	if cfg.Every <= 0 {
		cfg.Every = 130 * time.Second
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	}
	if cfg.IDPrefix == "" {
		cfg.IDPrefix = "f-"
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	// Each server's tools as JSON, re-encoded when a definition changes.
	tools := make([][]byte, len(ms))
	cur := make([][]map[string]any, len(ms))
	for i, m := range ms {
		cur[i] = m.Tools
		tools[i] = mustJSON(m.Tools)
	}
	var out []Event
	seq := 0
	for s := range cfg.Sessions {
		at := cfg.Start.Add(time.Duration(s) * cfg.Every)
		for k, i := range rng.Perm(len(ms))[:min(cfg.ServersPerSession, len(ms))] {
			changed := false
			if rng.Float64() < cfg.ChangeRate && len(cur[i]) > 0 {
				cur[i] = change(cur[i], rng.IntN(len(cur[i])), seq)
				tools[i] = mustJSON(cur[i])
				changed = true
			}
			m := ms[i]
			ts := at.Add(time.Duration(k) * time.Millisecond)
			var b bytes.Buffer
			b.WriteString(`{"type":"listing","event_id":`)
			b.WriteString(strconv.Quote(cfg.IDPrefix + strconv.Itoa(seq)))
			b.WriteString(`,"observed_at":"`)
			b.WriteString(ts.Format("2006-01-02T15:04:05.000Z"))
			b.WriteString(`","registry":`)
			b.WriteString(strconv.Quote(cfg.Registry))
			b.WriteString(`,"server":`)
			b.WriteString(strconv.Quote(m.Server))
			b.WriteString(`,"trust":`)
			b.WriteString(strconv.Itoa(m.Trust))
			b.WriteString(`,"op":"snapshot","tools":`)
			b.Write(tools[i])
			b.WriteString("}")
			out = append(out, Event{ObservedAt: ts, Server: m.Server, Changed: changed, Line: b.Bytes()})
			seq++
		}
	}
	return out
}

// change returns tools with tool i's inputSchema given one more optional
// property: a new definition (new digest), as a server upgrade makes.
func change(tools []map[string]any, i, seq int) []map[string]any {
	tools = slices.Clone(tools)
	t := clone(tools[i])
	is, _ := t["inputSchema"].(map[string]any)
	is = clone(is)
	props, _ := is["properties"].(map[string]any)
	props = clone(props)
	props["fleet_option_"+strconv.Itoa(seq)] = map[string]any{"type": "string"}
	is["properties"] = props
	t["inputSchema"] = is
	tools[i] = t
	return tools
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// Arrival reorders events as Kafka might deliver them: a share arrive
// late (up to maxLate positions after their place) and a share are
// delivered twice (again up to maxLate positions later). It returns the
// delivery order as indices into events.
func Arrival(n int, late, redelivered float64, maxLate int, seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	type slot struct {
		pos float64
		i   int
	}
	slots := make([]slot, 0, n+n/10)
	for i := range n {
		pos := float64(i)
		if rng.Float64() < late {
			pos += 1 + float64(rng.IntN(max(maxLate, 1)))
		}
		slots = append(slots, slot{pos, i})
		if rng.Float64() < redelivered {
			slots = append(slots, slot{pos + 1 + float64(rng.IntN(max(maxLate, 1))) + 0.5, i})
		}
	}
	slices.SortStableFunc(slots, func(a, b slot) int {
		switch {
		case a.pos < b.pos:
			return -1
		case a.pos > b.pos:
			return 1
		}
		return 0
	})
	out := make([]int, len(slots))
	for k, s := range slots {
		out[k] = s.i
	}
	return out
}
