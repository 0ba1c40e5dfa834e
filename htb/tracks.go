package htb

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// Track names.
const (
	TrackSingle  = "single"
	TrackMCP     = "mcp"
	TrackRealMCP = "real-mcp"
	TrackAPIBank = "apibank"
	TrackBFCL    = "bfcl"
)

var hClasses = []string{"H1", "H2", "H3", "H4", "H5"}
var mClasses = []string{"M1", "M2", "M3", "M4", "M5"}

// Frontier sizes.
const (
	singleFrontier  = 10
	apiBankFrontier = 8
)

// pickFrontier draws k tools of the deployment, sorted by name.
func (g *gen) pickFrontier(d *deployment, k int) []*toolDef {
	idx := g.r.Perm(len(d.all))[:min(k, len(d.all))]
	slices.Sort(idx)
	out := make([]*toolDef, len(idx))
	for i, j := range idx {
		out[i] = d.all[j]
	}
	return out
}

// singleTrack: one synthetic registry of 100 tools, 10 on the frontier.
func singleTrack(seed uint64, n, nHonest int) (*Track, error) {
	const reg = "htb-single"
	tools := domainTools(domains, style{idStyle: "noun"})
	lines := [][]byte{listingLine("l-htb-single", reg, "", 0, epoch, tools)}
	w, err := newWorld(lines)
	if err != nil {
		return nil, err
	}
	g := newGen(seed, TrackSingle, epoch.Add(24*time.Hour))
	d := w.deployment(reg, g.base)
	frontier := g.pickFrontier(d, singleFrontier)
	g.genSingle(d, frontier, n, nHonest)
	return &Track{
		Name: TrackSingle, Title: fmt.Sprintf("single registry: %d synthetic tools, %d on the frontier", len(d.all), len(frontier)),
		Classes: hClasses, Listings: lines, Trials: g.trials,
		Notes: []string{"frontier: " + joinNames(names(frontier))}, w: w,
	}, nil
}

func joinNames(ns []string) string {
	var b bytes.Buffer
	for i, n := range ns {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("`" + n + "`")
	}
	return b.String()
}

// mcpTrack: a four-server synthetic deployment with trust tiers.
//
//	hub        trust 0  file + message tools, open schemas (a poisoned hub)
//	acme       trust 2  issue, repo, file, user tools (the vendor)
//	community  trust 1  issue, repo tools keyed by id + project
//	cloud      trust 2  disk, record, user tools, each with a region option
//	legacy     trust 1  ticket, repo tools; removed before any call
//
// acme was re-listed an hour after it connected: its issue and repo tools
// gained fields (priority, labels, default_branch), so the first digests
// are stale. Connection order is hub, acme, legacy, community, cloud.
func mcpTrack(seed uint64, n, nHonest int) (*Track, error) {
	const reg = "htb-mcp"
	at := func(s int) time.Time { return epoch.Add(time.Duration(s) * time.Second) }
	noun := style{idStyle: "noun"}
	region := obj{"region": enum("eu", "us", "ap")}
	lines := [][]byte{
		listingLine("l-hub", reg, "hub", 0, at(0), domainTools(pickDomains("file", "message"), style{open: true})),
		listingLine("l-acme-1", reg, "acme", 2, at(1), domainTools(pickDomains("issue", "repo", "file", "user"),
			style{idStyle: "noun", drop: []string{"priority", "labels", "default_branch"}})),
		listingLine("l-legacy", reg, "legacy", 1, at(2), domainTools(pickDomains("ticket", "repo"), noun)),
		listingLine("l-community", reg, "community", 1, at(3), domainTools(pickDomains("issue", "repo"), style{idStyle: "project"})),
		listingLine("l-cloud", reg, "cloud", 2, at(4), domainTools(pickDomains("disk", "record", "user"), style{idStyle: "noun", extra: region})),
		listingLine("l-acme-2", reg, "acme", 2, at(3600), domainTools(pickDomains("issue", "repo", "file", "user"), noun)),
		removeLine("l-legacy-remove", reg, "legacy", at(3601)),
	}
	w, err := newWorld(lines)
	if err != nil {
		return nil, err
	}
	g := newGen(seed, TrackMCP, epoch.Add(24*time.Hour))
	d := w.deployment(reg, g.base)
	before := w.deployment(reg, at(5))
	ms := multiSetup{removed: before.server("legacy"), absent: []string{"acme-enterprise", "jira", "corp-tools"}}
	for _, t := range d.server("acme") {
		if old := before.tool("acme", t.Name); old != nil && old.Digest != t.Digest {
			ms.stale = append(ms.stale, stalePair{t, old.Digest})
		}
	}
	g.genMulti(d, ms, n, nHonest)
	return &Track{
		Name: TrackMCP, Title: "MCP deployment: four synthetic servers with trust tiers (hub 0, acme 2, community 1, cloud 2; legacy 1 removed)",
		Classes: mClasses, Listings: lines, Trials: g.trials, FlatVariant: "flat", w: w,
	}, nil
}

// readLines reads a JSONL file.
func readLines(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if l := bytes.TrimSpace(sc.Bytes()); len(l) > 0 {
			out = append(out, bytes.Clone(l))
		}
	}
	return out, sc.Err()
}

// realMCPTrack: the real manifests of corpus/mcp (14 servers, their
// natural collisions and shadows) and the older real github snapshot.
func realMCPTrack(corpus string, seed uint64, n, nHonest int) (*Track, error) {
	const reg = "mcp-real"
	cur, err := readLines(filepath.Join(corpus, "mcp", "listings.jsonl"))
	if err != nil {
		return nil, err
	}
	hist, err := readLines(filepath.Join(corpus, "mcp", "history.jsonl"))
	if err != nil {
		return nil, err
	}
	lines := append(slices.Clone(hist), cur...)
	w, err := newWorld(lines)
	if err != nil {
		return nil, err
	}
	last := time.Time{}
	first := time.Time{}
	for _, l := range lines {
		ls, _ := schema.DecodeListing(l)
		if ls.ObservedAt.After(last) {
			last = ls.ObservedAt
		}
		if first.IsZero() || ls.ObservedAt.Before(first) {
			first = ls.ObservedAt
		}
	}
	g := newGen(seed, TrackRealMCP, last.Add(time.Hour))
	d := w.deployment(reg, g.base)
	before := w.deployment(reg, first)
	ms := multiSetup{absent: []string{"github-enterprise", "jira", "slack"}}
	for _, t := range d.all {
		if old := before.tool(t.Server, t.Name); old != nil && old.Digest != t.Digest {
			ms.stale = append(ms.stale, stalePair{t, old.Digest})
		}
	}
	g.genMulti(d, ms, n, nHonest)
	return &Track{
		Name: TrackRealMCP, Title: fmt.Sprintf("real MCP manifests: %d servers, %d tools (corpus/mcp)", len(d.servers), len(d.all)),
		Classes: mClasses, Listings: lines, Trials: g.trials, FlatVariant: "flat", w: w,
	}, nil
}

// apiBankTrack: the API-Bank-style registry, converted, with the hand-
// written honest calls and generated H1-H5 trials.
func apiBankTrack(seed uint64, n, nHonest int) (*Track, error) {
	const reg = "apibank"
	apis, fixture, err := loadAPIBank()
	if err != nil {
		return nil, err
	}
	tools, warnings := ConvertAPIBank(apis)
	lines := [][]byte{listingLine("l-apibank", reg, "", 0, epoch, tools)}
	w, err := newWorld(lines)
	if err != nil {
		return nil, err
	}
	g := newGen(seed, TrackAPIBank, epoch.Add(24*time.Hour))
	d := w.deployment(reg, g.base)
	frontier := g.pickFrontier(d, apiBankFrontier)
	g.genSingle(d, frontier, n, max(0, nHonest-len(fixture)))
	vis := names(frontier)
	for _, fc := range fixture {
		t := d.tool("", fc.APIName)
		if t == nil {
			return nil, fmt.Errorf("apibank fixture calls unknown API %q", fc.APIName)
		}
		args, err := decodeObj(fc.Input)
		if err != nil {
			return nil, fmt.Errorf("apibank fixture call %s: %w", fc.APIName, err)
		}
		v := slices.Clone(vis)
		if !slices.Contains(v, t.Name) {
			v = append(v, t.Name)
		}
		slices.Sort(v)
		g.add(Honest, "fixture", schema.OK, t.ref(), callSpec{registry: reg, tool: t.Name, args: args,
			seen: t.Digest, visible: v, agent: agentFor(t.Contract.Risk)})
	}
	notes := []string{"frontier: " + joinNames(names(frontier))}
	for _, wn := range warnings {
		notes = append(notes, "converter: "+wn)
	}
	return &Track{
		Name: TrackAPIBank, Title: fmt.Sprintf("API-Bank-style registry: %d APIs, %d on the frontier (htb/testdata/apibank)", len(d.all), len(frontier)),
		Classes: hClasses, Listings: lines, Trials: g.trials, Notes: notes, w: w,
	}, nil
}

// bfclTrack: the independent honest corpus (BFCL ground truth converted by
// others): every call is honest, so only over-rejection is measured.
func bfclTrack(corpus string) (*Track, error) {
	lines, err := readLines(filepath.Join(corpus, "bfcl", "listings.jsonl"))
	if err != nil {
		return nil, err
	}
	calls, err := readLines(filepath.Join(corpus, "bfcl", "calls.jsonl"))
	if err != nil {
		return nil, err
	}
	category := map[string]string{}
	for _, l := range lines {
		o, err := decodeObj(l)
		if err != nil {
			return nil, err
		}
		reg, _ := o["registry"].(string)
		cat, _ := o["category"].(string)
		category[reg] = cat
	}
	w, err := newWorld(lines)
	if err != nil {
		return nil, err
	}
	tr := &Track{Name: TrackBFCL, Title: fmt.Sprintf("BFCL honest corpus: %d ground-truth calls over %d registries (corpus/bfcl)", len(calls), len(lines)),
		Listings: lines, w: w}
	var dec schema.CallDecoder
	var c schema.Call
	for _, l := range calls {
		if err := dec.Decode(l, &c); err != nil {
			return nil, fmt.Errorf("bfcl call: %w", err)
		}
		tr.Trials = append(tr.Trials, Trial{ID: c.EventID, Kind: Honest, Variant: category[c.Registry], Expect: schema.OK,
			Intended: Ref{c.Server, c.Tool}, Line: l})
	}
	return tr, nil
}
