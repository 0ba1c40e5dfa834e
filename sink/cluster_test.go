package sink

import (
	"context"
	"errors"
	"flag"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
)

var updateClusterDDL = flag.Bool("update-cluster-ddl", false, "rewrite testdata/cluster_replicated.sql")

// TestClusterDDL: the Replicated cluster DDL, which the embedded engine
// cannot run (no replication, no ON CLUSTER), is checked as text: against
// its reviewed copy in testdata (go test -update-cluster-ddl rewrites it), for the
// properties the layout promises, and by the real engine's parser
// (formatQuery parses a statement without running it).
func TestClusterDDL(t *testing.T) {
	stmts, err := ClusterStatements(Cluster{Name: "prod", Replicated: true}, "toolaudit")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(stmts, ";\n\n") + ";\n"
	const golden = "testdata/cluster_replicated.sql"
	if *updateClusterDDL {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the cluster DDL changed; review it and run go test ./sink -run TestClusterDDL -update-cluster-ddl:\n%s", got)
	}

	engine := regexp.MustCompile(`ENGINE = (\w+)`)
	var tables, distributed, null []string
	for _, s := range stmts {
		body := strings.TrimSpace(regexp.MustCompile(`(?m)^--.*$`).ReplaceAllString(s, ""))
		if !strings.Contains(strings.SplitN(body, "\n", 2)[0], "ON CLUSTER `prod`") {
			t.Errorf("statement without ON CLUSTER on its first line:\n%s", body)
		}
		for _, m := range engine.FindAllStringSubmatch(body, -1) {
			switch e := m[1]; {
			case e == "Distributed":
				distributed = append(distributed, body)
			case e == "Null":
				null = append(null, body)
			case strings.HasSuffix(e, "MergeTree") && !strings.HasPrefix(e, "Replicated"):
				t.Errorf("engine %s is not replicated:\n%s", e, body)
			default:
				tables = append(tables, body)
			}
		}
	}
	// schema_migrations, decisions_local, decisions_by_minute_local,
	// call_events_local, the nine tables of 0007_analytics and
	// approval_events_local; each but schema_migrations behind a
	// Distributed table. decisions_groups (0010) stores nothing: a Null
	// table on every server, between decisions_local's view and the
	// rollups' views.
	if len(tables) != 14 || len(distributed) != 13 || len(null) != 1 {
		t.Fatalf("%d replicated, %d Distributed and %d Null tables, want 14, 13 and 1", len(tables), len(distributed), len(null))
	}
	for _, tbl := range []string{"registry_changes", "approval_events"} {
		if !strings.Contains(got, "Distributed(`prod`, `toolaudit`, `"+tbl+"_local`, cityHash64(registry, server, tool))") {
			t.Errorf("%s is not Distributed by cityHash64(registry, server, tool): every copy of a row must land on one shard", tbl)
		}
	}
	if !strings.Contains(distributed[0], "CREATE OR REPLACE TABLE `toolaudit`.decisions ON CLUSTER `prod` AS `toolaudit`.decisions_local") ||
		!strings.Contains(distributed[0], "Distributed(`prod`, `toolaudit`, `decisions_local`, cityHash64(call_key))") {
		t.Errorf("decisions is not Distributed by cityHash64(call_key) over decisions_local:\n%s", distributed[0])
	}
	if !strings.Contains(distributed[2], "Distributed(`prod`, `toolaudit`, `call_events_local`, cityHash64(topic, partition, offset))") {
		t.Errorf("call_events is not Distributed by the record's position over call_events_local:\n%s", distributed[2])
	}
	for _, s := range stmts {
		if regexp.MustCompile("`toolaudit`\\.(decisions(_by_minute)?|call_events)\\b").MatchString(s) && !strings.Contains(s, "Distributed") {
			t.Errorf("a migration statement names a Distributed table instead of its local table:\n%s", s)
		}
	}

	// The engine's parser takes every statement.
	srv := chenginetest.Server(t)
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var formatted string
	if err := conn.QueryRow(context.Background(), "SELECT formatQuery(?)", "CREATE TABLE x ON CLUSTER c (a UInt8 ENGINE = M").Scan(&formatted); err == nil {
		t.Fatal("formatQuery took a broken statement: the parse check below checks nothing")
	}
	for _, s := range stmts {
		if err := conn.QueryRow(context.Background(), "SELECT formatQuery(?)", s).Scan(&formatted); err != nil {
			t.Errorf("the engine does not parse:\n%s\n%v", s, err)
		}
	}
}

// TestClusterNoForm: a migration statement the layout cannot derive fails
// the cluster migration, naming the statement, instead of running as is.
func TestClusterNoForm(t *testing.T) {
	l := newClusterLayout(Cluster{Name: "c", Replicated: true}, nil)
	for _, s := range []string{"DROP TABLE {db}.decisions", "INSERT INTO {db}.decisions SELECT 1", "RENAME TABLE {db}.a TO {db}.b"} {
		if _, err := l.statement(s); !errors.Is(err, errNoCluster) {
			t.Errorf("%q: %v", s, err)
		}
	}
	if _, err := l.statement("CREATE TABLE IF NOT EXISTS {db}.x (a UInt8) ENGINE = ReplicatedMergeTree('/p', 'r') ORDER BY a"); !errors.Is(err, errNoCluster) {
		t.Errorf("an engine already replicated: %v", err)
	}
	for _, bad := range []string{"", "two shards", "x;DROP"} {
		if _, err := ClusterStatements(Cluster{Name: bad}, "toolaudit"); err == nil {
			t.Errorf("cluster name %q accepted", bad)
		}
	}
}

// TestTwoShards: the cluster layout on two engines with a remote_servers
// cluster (no replicas): writes through the Distributed table split the
// calls over both shards by cityHash64(call_key), a redelivered call is
// collapsed on its shard so FINAL through the Distributed table counts
// each call once, a retried identical batch is dropped by each shard, the
// rollup counts calls exactly across shards, and each layout refuses the
// other's database.
func TestTwoShards(t *testing.T) {
	srvs := chenginetest.StartCluster(t, "two", 2)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const db = "cluster_two"
	cl := Cluster{Name: "two"}
	for _, s := range srvs {
		w, err := NewClickHouse(ctx, Config{Addr: []string{s.Addr()}, Database: db}, WithMigrate(), WithCluster(cl))
		if err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	w := newWriterAt(t, srvs[0].Addr(), db, WithCluster(cl)) // migrates again: nothing to apply
	if applied, err := MigrateCluster(ctx, w.Conn(), db, cl, nil); err != nil || len(applied) != 0 {
		t.Fatalf("second migration: %v, %v", applied, err)
	}
	ms, err := loadMigrations(schema.Migrations, "ddl")
	if err != nil {
		t.Fatal(err)
	}
	if !newClusterLayout(cl, ms).upToDate(ctx, w.Conn(), db, ms) { // so a restart runs no ON CLUSTER DDL
		t.Fatal("a migrated cluster database is not up to date")
	}
	if newClusterLayout(cl, ms).upToDate(ctx, w.Conn(), "cluster_absent", ms) {
		t.Fatal("an absent database is up to date")
	}

	first := mkRows("a1", 0, 10000, base.Add(time.Hour))
	mustWrite(t, w, first)
	mustWrite(t, w, first)                                            // an identical retry: dropped
	mustWrite(t, w, mkRows("a1", 5000, 10000, base.Add(2*time.Hour))) // 5000 redelivered, 5000 new

	var perShard []uint64
	for _, s := range srvs {
		c, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.Addr()}})
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		if err := c.QueryRow(ctx, "SELECT count() FROM "+db+".decisions_local FINAL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		c.Close()
		perShard = append(perShard, n)
	}
	t.Logf("calls per shard: %v", perShard)
	if perShard[0]+perShard[1] != 15000 || perShard[0] < 6000 || perShard[1] < 6000 {
		t.Fatalf("shards hold %v calls, want 15000 split about evenly", perShard)
	}
	if _, total, err := w.Counts(ctx, "a1"); err != nil || total != 15000 {
		t.Fatalf("Counts through the Distributed table: %d, %v; want 15000", total, err)
	}
	if n := count(t, w, "SELECT count() FROM {db}.decisions WHERE decided_at = toDateTime64('2026-11-29 12:00:00', 3, 'UTC') AND call_key < 'c-00010000'"); n != 5000 {
		t.Fatalf("%d redelivered rows stored, want 5000", n)
	}
	if n := count(t, w, "SELECT uniqMerge(calls) FROM {db}.decisions_by_minute WHERE analysis_id = 'a1'"); n != 15000 {
		t.Fatalf("rollup: %d calls, want 15000", n)
	}
	if n := count(t, w, "SELECT sum(rows) FROM {db}.decisions_by_minute WHERE analysis_id = 'a1'"); n != 20000 {
		t.Fatalf("rollup: %d rows, want 20000 (the identical retry dropped, the redelivery counted)", n)
	}

	if _, err := Migrate(ctx, w.Conn(), db, nil); !errors.Is(err, ErrLayout) {
		t.Fatalf("single-server migration of a cluster database: %v", err)
	}
	single := newWriterAt(t, srvs[1].Addr(), "single_one")
	if _, err := MigrateCluster(ctx, single.Conn(), "single_one", cl, nil); !errors.Is(err, ErrLayout) {
		t.Fatalf("cluster migration of a single-server database: %v", err)
	}
}
