// Package analyticsfixture is the known content the tests of the fleet
// analytics read (packages analytics and report): decisions of a single
// registry and of an MCP deployment over ten days, an incident session
// with a redelivered call and a call decided differently at the gate and
// from the stream, another analysis, and the MCP deployment's listings.
// The tests of package analytics state what every query returns on it.
package analyticsfixture

import (
	"context"
	"fmt"
	"time"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/registry/history"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

// base is the fixture's day 0, 00:00 UTC.
var Base = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)

// Analysis is the fixture's analysis id; another, "other", holds rows
// no query of Analysis may count.
const Analysis = "a1"

// spec is n decisions alike, emitted a second apart from at.
type spec struct {
	at                              time.Duration
	registry, model, surface        string
	source                          schema.Source
	action                          schema.Action
	class                           schema.Class
	tool, server                    string
	resolvedServer, resolvedTool    string
	suggested, version              string
	coercible, drift                bool
	session, agent, key, analysisID string
	n                               int
	redelivered                     bool // written a second time, decided later
}

var modelProvider = map[string]string{"gpt-5": "openai", "claude": "anthropic"}

// specs is the content: a single registry
// ("single") and an MCP deployment ("mcp": servers github, gitlab, shadow)
// on day 0 and day 5, an incident session, and another analysis that no
// query may count.
func specs() []spec {
	h := time.Hour
	single := func(at time.Duration, model, surface string, class schema.Class, n int) spec {
		return spec{at: at, registry: "single", model: model, surface: surface, class: class, tool: "create_issue",
			resolvedTool: "create_issue", version: "rv-s-1", n: n, agent: "agent-1", session: "s-bulk-" + model}
	}
	h1 := func(at time.Duration, tool, suggested string, n int) spec {
		s := single(at, "gpt-5", "raw_json", schema.H1, n)
		s.tool, s.resolvedTool, s.suggested = tool, "", suggested
		return s
	}
	mcp := func(at time.Duration, class schema.Class, tool, server, rs, rt string, n int) spec {
		return spec{at: at, registry: "mcp", model: "gpt-5", surface: "mcp", class: class, tool: tool, server: server,
			resolvedServer: rs, resolvedTool: rt, version: "rv-m-1", n: n, agent: "agent-2", session: "s-mcp"}
	}
	specs := []spec{
		single(1*h, "gpt-5", "raw_json", schema.OK, 40),
		single(2*h, "claude", "schema_enforced", schema.OK, 30),
		h1(3*h, "functions.create_issue", "create_issue", 5),
		h1(3*h+time.Minute, "Create_Issue", "create_issue", 3),
		h1(3*h+2*time.Minute, "create_issues", "create_issue", 2),
		h1(3*h+3*time.Minute, "create-issue", "create_issue", 2),
		h1(3*h+4*time.Minute, "crate_issue", "create_issue", 1),
		h1(3*h+5*time.Minute, "wipe_disk", "", 4),
		single(3*h+30*time.Minute, "claude", "schema_enforced", schema.H2, 6),
		single(4*h, "gpt-5", "raw_json", schema.H3, 5),
		single(4*h+20*time.Minute, "claude", "schema_enforced", schema.H4, 2),
		single(4*h+25*time.Minute, "gpt-5", "raw_json", schema.H5, 1),
		{at: 5 * h, registry: "single", class: schema.Malformed, n: 2, agent: "agent-1", session: "s-bad"},

		mcp(6*h, schema.OK, "create_issue", "github", "github", "create_issue", 10),
		mcp(6*h+time.Minute, schema.M2, "create_issue", "", "", "", 4),
		mcp(6*h+2*time.Minute, schema.M3, "list_repos", "", "", "", 3),
		mcp(6*h+3*time.Minute, schema.M1, "nothere", "", "", "", 2),
		mcp(6*h+4*time.Minute, schema.M1, "search", "ghost", "", "", 1),
		mcp(7*h, schema.M4, "create_issue", "", "github", "create_issue", 5),
		mcp(7*h+time.Minute, schema.M5, "search", "", "gitlab", "search", 2),

		// day 5, under the second versions
		{at: 5*24*h + 2*h, registry: "single", model: "gpt-5", surface: "raw_json", class: schema.OK, tool: "search", resolvedTool: "search", version: "rv-s-2", n: 20, agent: "agent-1", session: "s-day5"},
		{at: 5*24*h + 2*h + 30*time.Minute, registry: "single", model: "gpt-5", surface: "raw_json", class: schema.H1, tool: "wipe_disk", version: "rv-s-2", n: 1, agent: "agent-1", session: "s-day5"},
		{at: 5*24*h + 3*h, registry: "mcp", model: "gpt-5", surface: "mcp", class: schema.OK, tool: "search", resolvedServer: "gitlab", resolvedTool: "search", version: "rv-m-2", n: 6, agent: "agent-2", session: "s-mcp5"},

		// the other analysis: counted by no query of a1
		{at: 1 * h, registry: "single", model: "gpt-5", surface: "raw_json", class: schema.H1, tool: "x", version: "rv-s-1", n: 7, analysisID: "other", agent: "agent-1", session: "s-other"},
	}
	// Three H3 calls with a coercible value ("5" for 5), four OK calls
	// whose tool drifted after them.
	specs = append(specs,
		spec{at: 4*h + 10*time.Minute, registry: "single", model: "gpt-5", surface: "raw_json", class: schema.H3, tool: "create_issue", resolvedTool: "create_issue", version: "rv-s-1", coercible: true, n: 3, agent: "agent-1", session: "s-bulk-gpt-5"},
		spec{at: 7*h + 2*time.Minute, registry: "mcp", model: "gpt-5", surface: "mcp", class: schema.OK, tool: "create_issue", resolvedServer: "github", resolvedTool: "create_issue", version: "rv-m-1", drift: true, n: 4, agent: "agent-2", session: "s-mcp"},
	)
	// The incident session: a call decided OK at the API gate and H2 from
	// the stream (time of check against time of use), one decided H3 by
	// both, and an H1 redelivered by Kafka.
	inc := func(at time.Duration, key string, src schema.Source, act schema.Action, class schema.Class, tool string) spec {
		return spec{at: at, registry: "single", model: "gpt-5", surface: "raw_json", source: src, action: act, class: class,
			tool: tool, resolvedTool: tool, version: "rv-s-1", n: 1, agent: "agent-7", session: "s-incident", key: key}
	}
	i1 := inc(3*h+10*time.Second, "c-i1", schema.SourceStream, "", schema.OK, "create_issue")
	i2 := inc(3*h+20*time.Second, "c-i2", schema.SourceStream, "", schema.H1, "wipe_disk")
	i2.resolvedTool, i2.redelivered = "", true
	specs = append(specs, i1, i2,
		inc(3*h+30*time.Second, "c-i3", schema.SourceAPI, schema.ActionEnforced, schema.OK, "create_issue"),
		inc(3*h+30*time.Second, "c-i3", schema.SourceStream, "", schema.H2, "create_issue"),
		inc(3*h+40*time.Second, "c-i4", schema.SourceGateway, schema.ActionObserved, schema.H3, "create_issue"),
		inc(3*h+40*time.Second, "c-i4", schema.SourceStream, "", schema.H3, "create_issue"),
	)
	return specs
}

// Rows are the fixture's decisions as delivered to the store: first
// every call, then again the calls Kafka redelivered (decided a minute
// later), in a second write.
func Rows() (first, again []schema.Row) {
	for si, s := range specs() {
		for i := range s.n {
			var r schema.Row
			r.Set(s.class, "reason of "+string(s.class))
			r.EventID = s.key
			if r.EventID == "" {
				r.EventID = fmt.Sprintf("c-%02d-%03d", si, i)
			}
			r.CallKey = r.EventID
			r.AnalysisID = s.analysisID
			if r.AnalysisID == "" {
				r.AnalysisID = Analysis
			}
			r.Source = s.source
			if r.Source == "" {
				r.Source = schema.SourceStream
			}
			r.Action, r.SuggestedTool = s.action, s.suggested
			r.Registry, r.Model, r.Provider, r.Surface = s.registry, s.model, modelProvider[s.model], s.surface
			r.Tool, r.Server, r.ResolvedServer, r.ResolvedTool = s.tool, s.server, s.resolvedServer, s.resolvedTool
			r.RegistryVersion, r.Coercible, r.Drift = s.version, s.coercible, s.drift
			r.SessionID, r.AgentID = s.session, s.agent
			if s.class == schema.M4 {
				r.SeenDigest, r.CurrentDigest = "sha256:old", "sha256:new"
			}
			if s.class == schema.Malformed {
				r.RegistryVersion = ""
			}
			r.EmittedAt = Base.Add(s.at + time.Duration(i)*time.Second)
			r.DecidedAt = r.EmittedAt.Add(time.Second)
			r.ResolverBuild, r.PolicyVersion, r.Topic = "test", "strict/v1", schema.TopicCalls
			first = append(first, r)
			if s.redelivered {
				r.DecidedAt = r.DecidedAt.Add(time.Minute)
				again = append(again, r)
			}
		}
	}
	return first, again
}

// Listings is the MCP registry's history: three servers listed
// before day 0; on day 5 github changes create_issue and shadow drops
// delete_repo; an hour later gitlab's trust falls to 1.
func Listings() []*schema.Listing {
	const (
		issue1 = `{"type":"object","properties":{"owner":{"type":"string"},"title":{"type":"string"}},"required":["owner","title"]}`
		issue2 = `{"type":"object","properties":{"owner":{"type":"string"},"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}}},"required":["owner","title"]}`
		plain  = `{"type":"object","properties":{"q":{"type":"string"}}}`
	)
	l := func(id string, at time.Duration, server string, trust int, tools ...string) *schema.Listing {
		li := &schema.Listing{EventID: id, ObservedAt: Base.Add(at), Registry: "mcp", Server: server, Trust: trust, Op: schema.OpSnapshot}
		for i := 0; i+1 < len(tools); i += 2 {
			li.Tools = append(li.Tools, schema.Tool{Name: tools[i], InputSchema: []byte(tools[i+1])})
		}
		return li
	}
	day := 24 * time.Hour
	return []*schema.Listing{
		l("l-gh-1", -time.Hour, "github", 2, "create_issue", issue1, "search", plain, "list_repos", plain),
		l("l-gl-1", -time.Hour, "gitlab", 2, "create_issue", issue1, "search", plain),
		l("l-sh-1", -time.Hour, "shadow", 1, "search", plain, "list_repos", plain, "delete_repo", plain),
		l("l-gh-2", 5*day, "github", 2, "create_issue", issue2, "search", plain, "list_repos", plain),
		l("l-sh-2", 5*day, "shadow", 1, "search", plain, "list_repos", plain),
		l("l-gl-2", 5*day+time.Hour, "gitlab", 1, "create_issue", issue1, "search", plain),
	}
}

// Write stores the fixture through the real writer, as resolverd does:
// the rows (their materialized views feed the rollups), the redelivered
// rows in a second INSERT, the registry history of Listings and the
// approval history of Approvals.
func Write(ctx context.Context, w *sink.ClickHouse) error {
	first, again := Rows()
	if err := w.Write(ctx, first); err != nil {
		return err
	}
	if err := w.Write(ctx, again); err != nil {
		return err
	}
	if err := w.WriteRegistryChanges(ctx, history.Rows(Listings()...)); err != nil {
		return err
	}
	return w.WriteApprovalEvents(ctx, Approvals())
}

// Approvals is the history of the MCP registry's approved baseline, at
// versions 1 to 5: before day 0 ana approves github's create_issue and
// search as listed; at 02:00 bo rejects shadow's search; on day 5 +
// 3h cy revokes github's search; on day 10 + 1h cy approves github's
// create_issue as changed on day 5.
func Approvals() []approvals.Recorded {
	const (
		issue1 = `{"type":"object","properties":{"owner":{"type":"string"},"title":{"type":"string"}},"required":["owner","title"]}`
		issue2 = `{"type":"object","properties":{"owner":{"type":"string"},"title":{"type":"string"},"labels":{"type":"array","items":{"type":"string"}}},"required":["owner","title"]}`
		plain  = `{"type":"object","properties":{"q":{"type":"string"}}}`
	)
	var out []approvals.Recorded
	add := func(at time.Duration, server, tool, inputSchema string, verb approvals.Verb, by, reason string) {
		d, err := schema.Digest(tool, []byte(inputSchema))
		if err != nil {
			panic(err)
		}
		out = append(out, approvals.Recorded{Version: int64(len(out) + 1), Event: approvals.Event{
			EventID: fmt.Sprintf("ap-%d", len(out)+1), Registry: "mcp", Server: server, Tool: tool, Digest: d,
			Verb: verb, By: by, At: Base.Add(at), Reason: reason}})
	}
	day := 24 * time.Hour
	add(-30*time.Minute, "github", "create_issue", issue1, approvals.Approve, "ana", "reviewed")
	add(-30*time.Minute, "github", "search", plain, approvals.Approve, "ana", "reviewed")
	add(2*time.Hour, "shadow", "search", plain, approvals.Reject, "bo", "shadows github's search")
	add(5*day+3*time.Hour, "github", "search", plain, approvals.Revoke, "cy", "to review again")
	add(10*day+time.Hour, "github", "create_issue", issue2, approvals.Approve, "cy", "labels are harmless")
	return out
}
