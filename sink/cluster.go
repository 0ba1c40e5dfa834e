package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/schema"
)

// Cluster lays the schema out on a ClickHouse cluster (a remote_servers
// entry of the servers' configuration) instead of one server.
//
// Every table that a migration creates with a MergeTree-family engine
// becomes NAME_local, one per shard, and a Distributed table NAME over
// them, so that readers and the writer keep using the single-server names.
// decisions is sharded by cityHash64(call_key): a call redelivered by
// Kafka is decided again and lands on the shard that holds its first
// decision, where ReplacingMergeTree collapses the two, so `FINAL` through
// the Distributed table is exact. The rollup decisions_by_minute_local is
// fed per shard by its materialized view on decisions_local; its
// Distributed table takes no inserts and has no sharding key, and
// uniqMerge(calls) over shards stays exact because a call lives on one
// shard.
//
// With Replicated (the production layout, which needs ClickHouse Keeper or
// ZooKeeper), every statement runs ON CLUSTER and the engines are their
// Replicated* forms, at /clickhouse/tables/{shard}/{database}/{table} with
// replica {replica} (macros each server defines); schema_migrations is
// replicated to every server of the cluster (its path has no {shard}), so
// any of them knows what was applied. The cluster's shards must set
// internal_replication=true, so that the Distributed table writes each
// row to one replica and replication copies it.
//
// Without Replicated (shards without replicas and without Keeper, and the
// tests here, whose embedded engines cannot replicate), the same tables are
// plain MergeTree and no statement runs ON CLUSTER: migrate each server.
//
// Migrations are written for one server; the cluster form of each
// statement is derived (ClusterStatements): tables renamed to _local, ON
// CLUSTER added after the object's name, engines replaced. A statement of
// another kind than CREATE TABLE, CREATE MATERIALIZED VIEW, ALTER TABLE and
// DROP VIEW has no derived form and fails the migration (and TestClusterDDL) until
// this file learns it. The Distributed tables are created after the
// migrations, AS their local tables, and re-created (CREATE OR REPLACE)
// whenever a migration was applied, so that an ALTER of a local table
// reaches its Distributed table without being rewritten for it.
type Cluster struct {
	// Name is the cluster of remote_servers. Required.
	Name string
	// Replicated selects Replicated* engines and ON CLUSTER DDL.
	Replicated bool
}

// WithCluster makes WithMigrate lay the schema out on cluster c
// (MigrateCluster). Default: one server. Writes need no option: they go to
// table decisions, which on a cluster is the Distributed table.
func WithCluster(c Cluster) Option { return func(o *options) { o.cluster = &c } }

// shardingKeys are the sharding expressions of the Distributed tables
// that take inserts; the others (rollups fed by views) have none.
// registry_changes and approval_events: every version of a row on one
// shard, so that FINAL per shard is exact. The archive is sharded by the record's position: a redelivered record
// meets its first copy on its shard, where FINAL collapses the two.
var shardingKeys = map[string]string{
	"decisions":        "cityHash64(call_key)",
	"call_events":      "cityHash64(topic, partition, offset)",
	"registry_changes": "cityHash64(registry, server, tool)",
	"approval_events":  "cityHash64(registry, server, tool)",
}

// replicatedArgs are the ZooKeeper path and replica name of a replicated
// table; schema_migrations uses allReplicasArgs.
const (
	replicatedArgs  = "'/clickhouse/tables/{shard}/{database}/{table}', '{replica}'"
	allReplicasArgs = "'/clickhouse/tables/all/{database}/{table}', '{shard}-{replica}'"
)

// Validate checks the cluster's name, which is spliced into DDL.
func (c Cluster) Validate() error {
	if !identifier.MatchString(c.Name) || len(c.Name) > 128 {
		return fmt.Errorf("cluster name %q is not an identifier ([A-Za-z_][A-Za-z0-9_]*)", c.Name)
	}
	return nil
}

var (
	createTable  = regexp.MustCompile(`(?is)^CREATE\s+TABLE\s+IF\s+NOT\s+EXISTS\s+\{db\}\.([A-Za-z_][A-Za-z0-9_]*)`)
	createView   = regexp.MustCompile(`(?is)^CREATE\s+MATERIALIZED\s+VIEW\s+IF\s+NOT\s+EXISTS\s+\{db\}\.([A-Za-z_][A-Za-z0-9_]*)`)
	alterTable   = regexp.MustCompile(`(?is)^ALTER\s+TABLE\s+\{db\}\.([A-Za-z_][A-Za-z0-9_]*)`)
	dropView     = regexp.MustCompile(`(?is)^DROP\s+VIEW\s+IF\s+EXISTS\s+\{db\}\.([A-Za-z_][A-Za-z0-9_]*)`)
	mergeTree    = regexp.MustCompile(`(?s)ENGINE\s*=\s*(Replacing|Aggregating|Summing|Collapsing|VersionedCollapsing|Graphite|)MergeTree\b(\s*\(([^()]*)\))?`)
	anyMergeTree = regexp.MustCompile(`(?s)ENGINE\s*=\s*\w*MergeTree\b`)
	errNoCluster = errors.New("no cluster form")
)

const (
	localSuffix   = "_local"
	schemaMigrTbl = "schema_migrations"
)

// ClusterStatements returns every statement that MigrateCluster runs on a
// fresh database db of cluster c, in order: the database and
// schema_migrations, each migration's statements in their cluster form
// (each preceded by a comment naming its file), and the Distributed
// tables. For review (`resolverd migrate --cluster NAME --print`) and
// tests.
func ClusterStatements(c Cluster, db string) ([]string, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := validDatabase(db); err != nil {
		return nil, err
	}
	q := "`" + db + "`"
	ms, err := loadMigrations(schema.Migrations, "ddl")
	if err != nil {
		return nil, err
	}
	l := newClusterLayout(c, ms)
	out := l.bootstrap(q)
	for _, m := range ms {
		for i, s := range m.stmts {
			r, err := l.statement(s)
			if err != nil {
				return nil, fmt.Errorf("%s statement %d: %w", m.file, i+1, err)
			}
			out = append(out, "-- "+m.file+"\n"+strings.ReplaceAll(r, "{db}", q))
		}
	}
	return append(out, l.distributed(q, true)...), nil
}

// clusterLayout derives the cluster form of migration statements.
type clusterLayout struct {
	c      Cluster
	tables []string // created by the migrations with a MergeTree engine, in order
}

func newClusterLayout(c Cluster, ms []migration) *clusterLayout {
	l := &clusterLayout{c: c}
	for _, m := range ms {
		for _, s := range m.stmts {
			if sm := createTable.FindStringSubmatch(s); sm != nil && anyMergeTree.MatchString(s) {
				l.tables = append(l.tables, sm[1])
			}
		}
	}
	return l
}

func (l *clusterLayout) onCluster() string {
	if l.c.Replicated {
		return " ON CLUSTER `" + l.c.Name + "`"
	}
	return ""
}

// bootstrap is the database and schema_migrations, in db (quoted).
func (l *clusterLayout) bootstrap(db string) []string {
	engine := "ReplacingMergeTree(applied_at)"
	if l.c.Replicated {
		engine = "ReplicatedReplacingMergeTree(" + allReplicasArgs + ", applied_at)"
	}
	return []string{
		"CREATE DATABASE IF NOT EXISTS " + db + l.onCluster(),
		"CREATE TABLE IF NOT EXISTS " + db + "." + schemaMigrTbl + l.onCluster() + "\n" + schemaMigrationsColumns + "\nENGINE = " + engine + "\nORDER BY version",
	}
}

// statement is the cluster form of one migration statement.
func (l *clusterLayout) statement(s string) (string, error) {
	for _, t := range l.tables {
		s = regexp.MustCompile(`\{db\}\.`+regexp.QuoteMeta(t)+`\b`).ReplaceAllString(s, "{db}."+t+localSuffix)
	}
	var loc []int
	for _, re := range []*regexp.Regexp{createTable, createView, alterTable, dropView} {
		if loc = re.FindStringIndex(s); loc != nil {
			break
		}
	}
	if loc == nil {
		first, _, _ := strings.Cut(s, "\n")
		return "", fmt.Errorf("%w for %q: sink/cluster.go derives CREATE TABLE, CREATE MATERIALIZED VIEW, ALTER TABLE and DROP VIEW only", errNoCluster, first)
	}
	s = s[:loc[1]] + l.onCluster() + s[loc[1]:]
	if !l.c.Replicated {
		return s, nil
	}
	if anyMergeTree.MatchString(s) && !mergeTree.MatchString(s) {
		return "", fmt.Errorf("%w: an engine of the MergeTree family with no Replicated form here", errNoCluster)
	}
	return mergeTree.ReplaceAllStringFunc(s, func(m string) string {
		sm := mergeTree.FindStringSubmatch(m)
		args := replicatedArgs
		if a := strings.TrimSpace(sm[3]); a != "" {
			args += ", " + a
		}
		return "ENGINE = Replicated" + sm[1] + "MergeTree(" + args + ")"
	}), nil
}

// distributed creates the Distributed tables in db (quoted) if absent, or
// re-creates them (replace) from their local tables' current columns.
func (l *clusterLayout) distributed(db string, replace bool) []string {
	verb := "CREATE TABLE IF NOT EXISTS "
	if replace {
		verb = "CREATE OR REPLACE TABLE "
	}
	unquoted := strings.Trim(db, "`")
	var out []string
	for _, t := range l.tables {
		args := "`" + l.c.Name + "`, `" + unquoted + "`, `" + t + localSuffix + "`"
		if k := shardingKeys[t]; k != "" {
			args += ", " + k
		}
		out = append(out, verb+db+"."+t+l.onCluster()+" AS "+db+"."+t+localSuffix+"\nENGINE = Distributed("+args+")")
	}
	return out
}

// upToDate reports whether db holds every table of the layout and has
// applied every migration of ms, unchanged: then MigrateCluster has
// nothing to do. Any doubt (an error, a missing table) says no, and the
// full migration decides.
func (l *clusterLayout) upToDate(ctx context.Context, conn driver.Conn, db string, ms []migration) bool {
	done, err := appliedMigrations(ctx, conn, "`"+db+"`")
	if err != nil {
		return false
	}
	for _, m := range ms {
		if r, ok := done[m.version]; !ok || r.checksum != m.checksum {
			return false
		}
	}
	var n uint64
	err = conn.QueryRow(ctx, "SELECT count() FROM system.tables WHERE database = ? AND name IN (?)", db, l.tables).Scan(&n)
	return err == nil && int(n) == len(l.tables)
}

// checkLayout refuses to migrate db into the other layout than the one
// its decisions table has: a single-server table under a cluster
// migration, or a Distributed one under a single-server migration (which
// would ALTER the Distributed table and leave the shards behind).
func checkLayout(ctx context.Context, conn driver.Conn, db string, cluster *Cluster) error {
	var engine string
	err := conn.QueryRow(ctx, "SELECT engine FROM system.tables WHERE database = ? AND name = 'decisions'", db).Scan(&engine)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil // a fresh database
		}
		return fmt.Errorf("sink: migrate: layout: %w", err)
	}
	switch {
	case cluster == nil && engine == "Distributed":
		return fmt.Errorf("%w: %s.decisions is Distributed: the database is laid out for a cluster; migrate it with the cluster's name (resolverd --cluster NAME)", ErrLayout, db)
	case cluster != nil && engine != "Distributed":
		return fmt.Errorf("%w: %s.decisions is a %s table of one server; a cluster needs a new database (copy the rows with INSERT INTO new.decisions SELECT * FROM old.decisions)", ErrLayout, db, engine)
	}
	return nil
}

// ErrLayout means the database is laid out for one server and the
// migration is for a cluster, or the other way round.
var ErrLayout = errors.New("sink: migrate: the database has another layout")
