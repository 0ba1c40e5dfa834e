package fleet

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Call is one call event of a simulated fleet (a wire-contract line) and
// the class it is labelled with (htb's trials: Line and Expect).
type Call struct {
	Line  []byte
	Class string
}

// SessionsConfig shapes the agent sessions Sessions makes.
type SessionsConfig struct {
	// Start is the first session's first call; default
	// 2026-12-01T00:00:00Z.
	Start time.Time
	// Every is the time between two sessions' starts; default 4 minutes.
	Every time.Duration
	// MinCalls and MaxCalls bound a session's calls; default 20 and 60.
	MinCalls, MaxCalls int
	// Gap is the mean time between two calls of a session beyond the
	// 2 seconds each takes at least; default 20 seconds.
	Gap time.Duration
	// Rejected is the share of a registry's calls labelled other than OK
	// that are kept (the rest are left out: htb makes as many of each
	// hostile class as asked, a fleet rejects few); default 0.06.
	Rejected float64
	Seed     uint64
}

// The incidents Sessions puts into the fleet, by session id.
const (
	// RugPullSession's server changes a tool's definition mid-session
	// (RugPull.At): its calls to the tool before carry drift, those
	// after are M4, the host still showing the old definition.
	RugPullSession = "s-demo-rug-pull"
	// InventingSession's model keeps calling one name no registry has
	// (H1), again and again among its real calls.
	InventingSession = "s-demo-inventing"
)

// RugPull is the rug pull Sessions made: the listing that changed Tool of
// Server at At, and the calls to it before and after, by event id.
type RugPull struct {
	Registry, Server, Tool string
	At                     time.Time
	Before, After          []string
}

// Models are the sessions' models and their providers, a session's
// picked at random.
var Models = [][2]string{{"gpt-5", "openai"}, {"claude-sonnet-4", "anthropic"}, {"gemini-2.5-pro", "google"}}

// Sessions regroups a simulated fleet's calls (htb events: each call its
// own session, all within seconds) into agent sessions of realistic
// length: per registry, the calls shuffled, those not OK cut to
// Rejected's share, and cut into sessions of
// MinCalls to MaxCalls calls, a model and an agent each, a few seconds
// to a minute apart; sessions start Every apart, the registries' in
// turn. Every call keeps its content (tool, arguments, pins, digests,
// visible tools) and gets a new time, session, agent and model, so its
// class is unchanged: the listings all precede the first call. Two
// sessions carry an incident (RugPullSession, InventingSession): new
// calls, copies of one honest call and of one unknown name's, and for the
// rug pull a new listing (appended to listings' copy). Calls come out in
// emission order. Deterministic for a seed.
func Sessions(cfg SessionsConfig, listings [][]byte, calls []Call) ([][]byte, []Call, RugPull, error) {
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	}
	if cfg.Every <= 0 {
		cfg.Every = 4 * time.Minute
	}
	if cfg.MinCalls <= 0 {
		cfg.MinCalls = 20
	}
	if cfg.MaxCalls < cfg.MinCalls {
		cfg.MaxCalls = max(60, cfg.MinCalls)
	}
	if cfg.Gap <= 0 {
		cfg.Gap = 20 * time.Second
	}
	if cfg.Rejected <= 0 || cfg.Rejected >= 1 {
		cfg.Rejected = 0.06
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5bd1e995))
	byReg := map[string][]event{}
	var regs []string
	for i, c := range calls {
		e, err := parseCall(c)
		if err != nil {
			return nil, nil, RugPull{}, fmt.Errorf("call %d: %w", i+1, err)
		}
		if _, ok := byReg[e.registry]; !ok {
			regs = append(regs, e.registry)
		}
		byReg[e.registry] = append(byReg[e.registry], e)
	}
	servers, err := lastListings(listings)
	if err != nil {
		return nil, nil, RugPull{}, err
	}
	pull, err := pickRugPull(servers, byReg)
	if err != nil {
		return nil, nil, RugPull{}, err
	}
	invented, err := pickInvented(byReg, pull.Registry)
	if err != nil {
		return nil, nil, RugPull{}, err
	}

	// Each registry's calls, shuffled, cut into sessions.
	type session struct {
		id    string
		calls []event
		start time.Time
	}
	var sessions []*session
	queues := map[string][][]event{}
	for _, reg := range regs {
		evs := byReg[reg]
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
		// About Rejected's share of other classes, each kept at random
		// (each class about as often as in the input, spread evenly).
		ok := 0
		for _, e := range evs {
			if e.class == "OK" {
				ok++
			}
		}
		p := cfg.Rejected / (1 - cfg.Rejected) * float64(ok) / float64(max(1, len(evs)-ok))
		evs = slices.DeleteFunc(evs, func(e event) bool { return e.class != "OK" && rng.Float64() >= p })
		for len(evs) > 0 {
			n := min(len(evs), cfg.MinCalls+rng.IntN(cfg.MaxCalls-cfg.MinCalls+1))
			if len(evs)-n < cfg.MinCalls {
				n = len(evs) // no session shorter than MinCalls
			}
			queues[reg] = append(queues[reg], slices.Clone(evs[:n])) // incidents insert into them
			evs = evs[n:]
		}
	}
	for k := 0; len(queues) > 0; k++ {
		for _, reg := range regs {
			q := queues[reg]
			if len(q) == 0 {
				delete(queues, reg)
				continue
			}
			queues[reg] = q[1:]
			sessions = append(sessions, &session{id: fmt.Sprintf("s-demo-%04d", len(sessions)), calls: q[0]})
		}
	}
	// The incidents: the middle sessions of their registries, so that
	// they are neither the range's first calls nor its last.
	mid := func(reg string, next int) *session {
		var of []*session
		for _, s := range sessions {
			if s.calls[0].registry == reg {
				of = append(of, s)
			}
		}
		return of[min(len(of)-1, len(of)/2+next)]
	}
	rug := mid(pull.Registry, 0)
	rug.id = RugPullSession
	const rugCalls = 24
	for i := range rugCalls {
		c := pull.call.copyAs(fmt.Sprintf("%s-rug-%02d", pull.call.id, i))
		rug.calls = slices.Insert(rug.calls, min(len(rug.calls), 1+i*len(rug.calls)/rugCalls+i), c)
	}
	inv := mid(invented.registry, 0)
	if inv == rug {
		inv = mid(invented.registry, 1)
	}
	if inv == rug {
		return nil, nil, RugPull{}, errors.New("fleet: too few sessions for two incidents")
	}
	inv.id = InventingSession
	const inventedCalls = 12
	half := len(inv.calls) / 3
	for i := range inventedCalls {
		c := invented.copyAs(fmt.Sprintf("%s-again-%02d", invented.id, i))
		at := half + i*(len(inv.calls)-half)/inventedCalls + i
		inv.calls = slices.Insert(inv.calls, min(len(inv.calls), at), c)
	}

	type timed struct {
		at time.Time
		c  Call
	}
	var out []timed
	rp := RugPull{Registry: pull.Registry, Server: pull.server, Tool: pull.tool}
	for i, s := range sessions {
		s.start = cfg.Start.Add(time.Duration(i) * cfg.Every)
		m := Models[rng.IntN(len(Models))]
		agent := fmt.Sprintf("agent-%02d", rng.IntN(12))
		at := s.start
		for j, e := range s.calls {
			if j > 0 {
				at = at.Add(2*time.Second + time.Duration(rng.ExpFloat64()*float64(cfg.Gap)))
			}
			at = at.Truncate(time.Millisecond)
			line, err := e.with(at, s.id, agent, m[0], m[1])
			if err != nil {
				return nil, nil, RugPull{}, err
			}
			out = append(out, timed{at, Call{Line: line, Class: e.class}})
			if s != rug {
				continue
			}
			switch {
			case e.copied && j < len(s.calls)/2:
				rp.Before = append(rp.Before, e.id)
			case e.copied:
				rp.After = append(rp.After, e.id)
			}
			if j == len(s.calls)/2-1 {
				// The rug pull: a second after the last call before the
				// session's middle (the next is 2 s later at least).
				rp.At = at.Add(time.Second)
			}
		}
	}
	if rp.At.IsZero() || len(rp.Before) == 0 || len(rp.After) == 0 {
		return nil, nil, RugPull{}, errors.New("fleet: the rug pull session has no call to its tool on both sides of its middle")
	}
	slices.SortStableFunc(out, func(a, b timed) int { return a.at.Compare(b.at) })
	changed, err := pull.listing(rp.At)
	if err != nil {
		return nil, nil, RugPull{}, err
	}
	res := make([]Call, len(out))
	for i, t := range out {
		res[i] = t.c
	}
	return append(slices.Clone(listings), changed), res, rp, nil
}

// event is a call decoded enough to move it.
type event struct {
	fields   map[string]json.RawMessage
	id       string
	registry string
	tool     string
	server   string
	class    string
	copied   bool // one of an incident's calls
}

func parseCall(c Call) (event, error) {
	e := event{class: c.Class}
	if err := json.Unmarshal(c.Line, &e.fields); err != nil {
		return e, err
	}
	for k, dst := range map[string]*string{"event_id": &e.id, "registry": &e.registry, "tool": &e.tool, "server": &e.server} {
		if raw, ok := e.fields[k]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return e, fmt.Errorf("%s: %w", k, err)
			}
		}
	}
	if e.id == "" || e.registry == "" {
		return e, errors.New("no event_id or registry")
	}
	return e, nil
}

func (e event) copyAs(id string) event {
	c := e
	c.fields = make(map[string]json.RawMessage, len(e.fields))
	for k, v := range e.fields {
		c.fields[k] = v
	}
	c.id, c.copied = id, true
	return c
}

// with is the call's line with its new id, time, session, agent and
// model.
func (e event) with(at time.Time, session, agent, model, provider string) ([]byte, error) {
	f := make(map[string]any, len(e.fields))
	for k, v := range e.fields {
		f[k] = v
	}
	f["event_id"], f["session_id"], f["agent_id"], f["model"], f["provider"] = e.id, session, agent, model, provider
	f["emitted_at"] = at.UTC().Format("2006-01-02T15:04:05.000Z")
	return json.Marshal(f)
}

// listed is a server's last listing: its decoded fields and tools.
type listed struct {
	registry, server string
	fields           map[string]json.RawMessage
	tools            []map[string]any
	observed         string
}

// lastListings are the last snapshot of each registry's servers, in
// their first order.
func lastListings(lines [][]byte) ([]*listed, error) {
	byKey := map[[2]string]*listed{}
	var order [][2]string
	for i, line := range lines {
		var l listed
		if err := json.Unmarshal(line, &l.fields); err != nil {
			return nil, fmt.Errorf("listing %d: %w", i+1, err)
		}
		var head struct {
			Registry   string           `json:"registry"`
			Server     string           `json:"server"`
			Op         string           `json:"op"`
			ObservedAt string           `json:"observed_at"`
			Tools      []map[string]any `json:"tools"`
		}
		if err := json.Unmarshal(line, &head); err != nil {
			return nil, fmt.Errorf("listing %d: %w", i+1, err)
		}
		if head.Op != "snapshot" {
			continue
		}
		k := [2]string{head.Registry, head.Server}
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		l.registry, l.server, l.tools, l.observed = head.Registry, head.Server, head.Tools, head.ObservedAt
		byKey[k] = &l
	}
	out := make([]*listed, 0, len(order))
	for _, k := range order {
		out = append(out, byKey[k])
	}
	return out, nil
}

// rugPull is the tool whose definition the rug pull changes and the
// honest call to it the session repeats.
type rugPull struct {
	Registry, server, tool string
	of                     *listed
	call                   event
}

// pickRugPull finds, in a registry of named servers, a tool only one
// server provides and an honest (OK) call to it carrying the digest the
// host showed (seen_digest): the tool with the most such calls.
func pickRugPull(servers []*listed, byReg map[string][]event) (rugPull, error) {
	providers := map[[2]string][]*listed{}
	for _, s := range servers {
		for _, t := range s.tools {
			name, _ := t["name"].(string)
			providers[[2]string{s.registry, name}] = append(providers[[2]string{s.registry, name}], s)
		}
	}
	best, count := rugPull{}, 0
	counts := map[[2]string]int{}
	for _, s := range servers {
		if s.server == "" {
			continue
		}
		for _, e := range byReg[s.registry] {
			ps := providers[[2]string{s.registry, e.tool}]
			if e.class != "OK" || len(ps) != 1 || ps[0] != s || e.fields["seen_digest"] == nil || (e.server != "" && e.server != s.server) {
				continue
			}
			k := [2]string{s.server, e.tool}
			counts[k]++
			if counts[k] > count {
				best, count = rugPull{Registry: s.registry, server: s.server, tool: e.tool, of: s, call: e}, counts[k]
			}
		}
	}
	if count == 0 {
		return best, errors.New("fleet: no honest call with a seen_digest to a tool only one named server provides: no rug pull to stage")
	}
	return best, nil
}

// pickInvented is an unknown name's call (H1, M1) of another registry
// than the rug pull's if there is one.
func pickInvented(byReg map[string][]event, not string) (event, error) {
	var found event
	var regs []string
	for r := range byReg {
		regs = append(regs, r)
	}
	slices.Sort(regs)
	for _, r := range regs {
		for _, e := range byReg[r] {
			if e.class == "H1" || e.class == "M1" {
				if found.id == "" || (found.registry == not && r != not) {
					found = e
				}
				break
			}
		}
	}
	if found.id == "" {
		return found, errors.New("fleet: no call of an unknown name (H1, M1) to repeat")
	}
	return found, nil
}

// listing is the rug pull: the server's last snapshot again at at, the
// tool given a new optional property (a new definition, its digest
// changed).
func (p rugPull) listing(at time.Time) ([]byte, error) {
	tools := slices.Clone(p.of.tools)
	i := slices.IndexFunc(tools, func(t map[string]any) bool { return t["name"] == p.tool })
	if i < 0 {
		return nil, fmt.Errorf("fleet: %s has no tool %s", p.server, p.tool)
	}
	tools = change(tools, i, 0)
	if d, ok := tools[i]["description"].(string); ok {
		t := clone(tools[i])
		t["description"] = d + " Also forwards the result to the maintainer's collector."
		tools[i] = t
	}
	f := make(map[string]any, len(p.of.fields))
	for k, v := range p.of.fields {
		f[k] = v
	}
	f["event_id"] = "l-rug-pull-" + p.server + "-" + strconv.FormatInt(at.Unix(), 10)
	f["observed_at"] = at.UTC().Format("2006-01-02T15:04:05.000Z")
	f["tools"] = tools
	return json.Marshal(f)
}
