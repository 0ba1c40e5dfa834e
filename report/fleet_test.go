package report

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/analytics"
	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/registry/history"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink"
)

// fleetDay is the generated fleet's day.
var fleetDay = time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)

// fleetAnalysis is the generated fleet's analysis.
const fleetAnalysis = "live"

// genFleet is one day of a fleet of n registries, perRegistry calls
// each, spread over the day (and a tenth of them, allowed, the day
// before): every third registry an MCP deployment of
// two servers that both provide "search" (a tie on even registries, the
// second shadowing on odd ones) and one stale "deploy"; three models
// that invent names; a session per registry and model. Deterministic.
func genFleet(n, perRegistry int) ([]schema.Row, []*schema.Listing) {
	models := []string{"gpt-5", "claude-sonnet-4", "gemini-2.5-pro"}
	providers := []string{"openai", "anthropic", "google"}
	var rows []schema.Row
	var listings []*schema.Listing
	step := 24 * time.Hour / time.Duration(perRegistry+1)
	for i := range n {
		reg := fmt.Sprintf("fleet-%04d", i)
		mcp := i%3 == 0
		if mcp {
			plain := []byte(`{"type":"object","properties":{"q":{"type":"string"}}}`)
			trustB := 2
			if i%2 == 1 {
				trustB = 1
			}
			listings = append(listings,
				&schema.Listing{EventID: "l-" + reg + "-a", ObservedAt: fleetDay.Add(-time.Hour), Registry: reg, Server: "alpha", Trust: 2, Op: schema.OpSnapshot,
					Tools: []schema.Tool{{Name: "search", InputSchema: plain}, {Name: "deploy", InputSchema: plain}}},
				&schema.Listing{EventID: "l-" + reg + "-b", ObservedAt: fleetDay.Add(-time.Hour), Registry: reg, Server: "beta", Trust: trustB, Op: schema.OpSnapshot,
					Tools: []schema.Tool{{Name: "search", InputSchema: plain}}})
		}
		for j := range perRegistry {
			m := (i + j) % len(models)
			var r schema.Row
			class, tool, suggested, server, rtool := schema.OK, "search", "", "", "search"
			switch k := (i*7 + j) % 20; {
			case k == 0:
				class, tool, suggested, rtool = schema.H1, "functions.search", "search", ""
			case k == 1 && i%5 == 0:
				class, tool, rtool = schema.H1, fmt.Sprintf("invented_%d", i%40), ""
			case k == 2:
				class = schema.H2
			case k == 3 && mcp:
				class, rtool = schema.M2, ""
				if i%2 == 1 {
					class = schema.M3
				}
			case k == 4 && mcp:
				class, tool, server, rtool = schema.M4, "deploy", "alpha", "deploy"
			case k == 5 && m == 1, k == 6 && m == 1:
				class = schema.H3
			}
			r.Set(class, "reason of "+string(class))
			r.EventID = fmt.Sprintf("c-%s-%d", reg, j)
			r.CallKey = r.EventID
			r.AnalysisID, r.Source = fleetAnalysis, schema.SourceStream
			r.Registry, r.Model, r.Provider = reg, models[m], providers[m]
			r.Surface = "raw_json"
			if mcp {
				r.Surface = "mcp"
			}
			r.Tool, r.Server, r.ResolvedTool, r.SuggestedTool = tool, server, rtool, suggested
			if mcp && rtool != "" {
				r.ResolvedServer = "alpha"
			}
			if class == schema.M4 {
				r.SeenDigest, r.CurrentDigest = "sha256:old", "sha256:new"
			}
			r.RegistryVersion = "rv-" + reg
			r.SessionID, r.AgentID = fmt.Sprintf("s-%s-%d", reg, m), fmt.Sprintf("agent-%d", i%50)
			r.EmittedAt = fleetDay.Add(time.Duration(j+1) * step)
			r.DecidedAt = r.EmittedAt.Add(time.Second)
			r.ResolverBuild, r.PolicyVersion, r.Topic = "test", "strict/v1", "tool-calls"
			rows = append(rows, r)
			// The day before: a tenth of the calls, all allowed, for the
			// headline's change.
			if j%10 == 0 {
				r.Set(schema.OK, "reason of OK")
				r.EventID, r.CallKey = r.EventID+"-before", r.CallKey+"-before"
				r.EmittedAt, r.DecidedAt = r.EmittedAt.Add(-24*time.Hour), r.DecidedAt.Add(-24*time.Hour)
				rows = append(rows, r)
			}
		}
	}
	return rows, listings
}

// fleetConn starts an engine of tb's own holding genFleet(n, perRegistry)
// in database "fleet", written through resolverd's writer, and returns a
// connection whose default database it is.
func fleetConn(tb testing.TB, n, perRegistry int) driver.Conn {
	tb.Helper()
	srv := chenginetest.Start(tb, chengine.Options{})
	ctx := context.Background()
	cfg := sink.Config{Addr: []string{srv.Addr()}, Database: "fleet"}
	w, err := sink.NewClickHouse(ctx, cfg, sink.WithMigrate())
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	rows, listings := genFleet(n, perRegistry)
	for len(rows) > 0 {
		batch := rows[:min(len(rows), 50_000)]
		rows = rows[len(batch):]
		if err := w.Write(ctx, batch); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.WriteRegistryChanges(ctx, history.Rows(listings...)); err != nil {
		tb.Fatal(err)
	}
	conn, err := cfg.OpenIn(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// countingConn counts the queries run through it.
type countingConn struct {
	driver.Conn
	n int
}

func (c *countingConn) Query(ctx context.Context, q string, args ...any) (driver.Rows, error) {
	c.n++
	return c.Conn.Query(ctx, q, args...)
}

func fleetOptions() Options {
	return Options{Analysis: fleetAnalysis, From: fleetDay, To: fleetDay.Add(24 * time.Hour)}
}

// TestQueriesPerSection: a report runs as many queries over a fleet of
// 600 registries as over one of 6 (one per section, never one per
// registry), and finds the larger fleet's problems.
func TestQueriesPerSection(t *testing.T) {
	var counts []int
	for _, n := range []int{6, 600} {
		c := &countingConn{Conn: fleetConn(t, n, 40)}
		r, err := Collect(context.Background(), c, fleetOptions())
		if err != nil {
			t.Fatal(err)
		}
		counts = append(counts, c.n)
		if d, _ := num(r.Verdicts, "decisions"); d != float64(n*40) { // the day before not counted
			t.Errorf("%d registries: %v decisions, want %d", n, d, n*40)
		}
		if len(r.Problems()) != MaxProblems {
			t.Errorf("%d registries: %d problems, want %d", n, len(r.Problems()), MaxProblems)
		}
	}
	if counts[0] != counts[1] || counts[0] > 20 {
		t.Errorf("queries: %d for 6 registries, %d for 600: want the same few", counts[0], counts[1])
	}
}

// BenchmarkCollect: one report over a day of 10 and of 2,500 registries
// (40 calls each). Recorded in docs/performance.md.
func BenchmarkCollect(b *testing.B) {
	for _, n := range []int{10, 2500} {
		b.Run(fmt.Sprintf("registries=%d", n), func(b *testing.B) {
			conn := fleetConn(b, n, 40)
			b.ResetTimer()
			for b.Loop() {
				if _, err := Collect(context.Background(), conn, fleetOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPerRegistryLoop is what a report cost before its queries were
// per section: the MCP servers dashboard's three panels run for each
// registry of the fleet, as Collect did until then. For comparison in
// docs/performance.md.
func BenchmarkPerRegistryLoop(b *testing.B) {
	for _, n := range []int{10, 2500} {
		b.Run(fmt.Sprintf("registries=%d", n), func(b *testing.B) {
			conn := fleetConn(b, n, 40)
			p := fleetOptions().Params(time.Hour)
			var qs []analytics.Query
			for _, q := range analytics.Servers() {
				if q.ID == "servers.shared_names" || q.ID == "servers.collisions" || q.ID == "servers.mcp_classes" {
					qs = append(qs, q)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				for i := range n {
					rp := p
					rp.Vars = maps.Clone(p.Vars)
					rp.Vars[analytics.VarRegistry] = analytics.Text(fmt.Sprintf("fleet-%04d", i))
					for _, q := range qs {
						if _, err := analytics.Run(context.Background(), conn, q, rp); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		})
	}
}
