package sink

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/schema"
)

// TestMain runs every test against one shared engine (chenginetest), then
// checks that no goroutine outlived its test: writers, pools and private
// servers must all be closed by then.
func TestMain(m *testing.M) { leakcheck.Main(m, leakcheck.Run(chenginetest.Main)) }

var dbSeq atomic.Int32

// testDB returns a fresh database name for t on the shared server.
func testDB(t testing.TB) string {
	name := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "_"))
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("sinktest_%s_%d", name, dbSeq.Add(1))
}

// newWriter starts (or reuses) the shared server and returns a writer on a
// fresh, migrated database, closed at the end of the test.
func newWriter(t testing.TB, opts ...Option) *ClickHouse {
	t.Helper()
	srv := chenginetest.Server(t)
	return newWriterAt(t, srv.Addr(), testDB(t), opts...)
}

func newWriterAt(t testing.TB, addr, db string, opts ...Option) *ClickHouse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := NewClickHouse(ctx, Config{Addr: []string{addr}, Database: db}, append([]Option{WithMigrate()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil {
			t.Error(err)
		}
	})
	return w
}

var base = time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)

// mkRows returns n rows of analysis, call keys from..from+n-1, classes in
// turn, emitted one millisecond apart, decided at decided.
func mkRows(analysis string, from, n int, decided time.Time) []schema.Row {
	rows := make([]schema.Row, n)
	for i := range rows {
		k := from + i
		class := schema.Classes[k%schema.NumClasses]
		r := &rows[i]
		r.EventID = fmt.Sprintf("c-%08d", k)
		r.Set(class, "reason "+string(class))
		r.ResolvedServer, r.ResolvedTool = "github", fmt.Sprintf("tool_%d", k%50)
		r.RegistryVersion = "rv-1"
		r.CallKey = r.EventID
		r.AnalysisID, r.ResolverBuild, r.PolicyVersion = analysis, "test", "strict/v1"
		r.Source = schema.SourceStream
		r.Registry, r.AgentID, r.SessionID = "fleet-a", fmt.Sprintf("a-%d", k%100), fmt.Sprintf("s-%d", k%1000)
		r.Model, r.Provider, r.Surface = "mistral-large-3", "bedrock", "raw_json"
		r.Tool = r.ResolvedTool
		r.EmittedAt = base.Add(time.Duration(k) * time.Millisecond)
		r.DecidedAt = decided
		r.ArgsShape = `{"owner":"string","repo":"string"}`
		r.ArgsHash = fmt.Sprintf("sha256:%064x", k)
		r.Topic, r.Partition, r.Offset = "tool-calls", int32(k%8), int64(k/8)
	}
	return rows
}

func mustWrite(t testing.TB, w interface {
	Write(context.Context, []schema.Row) error
}, rows []schema.Row) {
	t.Helper()
	if err := w.Write(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
}

// count runs a single-number query.
func count(t testing.TB, w *ClickHouse, query string) uint64 {
	t.Helper()
	var n uint64
	q := strings.ReplaceAll(query, "{db}", "`"+w.Database()+"`")
	if err := w.Conn().QueryRow(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
