package sink

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/schema"
)

// A migration is one file NNNN_name.sql of schema.Migrations.
type migration struct {
	version  uint32
	file     string // "0001_decisions.sql"
	stmts    []string
	checksum string // "sha256:" + hex of the file's bytes
}

var migrationName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

// Migrate brings database db up to date with schema.Migrations: it creates
// the database and table schema_migrations if absent, then applies, in
// version order, every migration not recorded there, recording each
// (version, name, checksum, applied_at) once all its statements succeeded.
// It returns the files it applied: none when the store was up to date.
//
// It refuses, before applying anything, when a migration recorded as applied
// has changed since (ErrChecksumMismatch): the store would no longer match
// the files. A recorded version that no file has (a newer build migrated) is
// logged and left alone.
//
// Statements. A file holds one or more statements; a statement ends with a
// line whose last non-blank character is ";" and which is not a "--"
// comment line. So no line inside a statement may end with ";" (not even in
// a trailing comment). "{db}" in a file stands for the database, which must
// be a plain identifier.
//
// ClickHouse has no transactional DDL: a migration that fails halfway leaves
// its earlier statements applied and is not recorded, so the next run
// executes it again from the top. Every statement must therefore be
// idempotent (CREATE ... IF NOT EXISTS, ADD COLUMN IF NOT EXISTS). The same
// makes concurrent Migrate calls (several instances starting at once) safe:
// both may apply a migration, and schema_migrations keeps one record per
// version.
//
// log may be nil.
//
// It refuses a database whose decisions table is Distributed (laid out by
// MigrateCluster) with ErrLayout.
func Migrate(ctx context.Context, conn driver.Conn, db string, log *slog.Logger) (applied []string, err error) {
	return migrate(ctx, conn, db, schema.Migrations, "ddl", nil, log)
}

// MigrateCluster is Migrate for cluster c: the same migrations in their
// cluster form (see Cluster), then the Distributed tables. With
// c.Replicated it runs ON CLUSTER, so one server suffices; without, run it
// on every server. It refuses a database laid out for one server with
// ErrLayout.
func MigrateCluster(ctx context.Context, conn driver.Conn, db string, c Cluster, log *slog.Logger) (applied []string, err error) {
	return migrate(ctx, conn, db, schema.Migrations, "ddl", &c, log)
}

// schemaMigrationsColumns are the columns of table schema_migrations.
const schemaMigrationsColumns = `(
    version    UInt32,
    name       String,
    checksum   String,
    applied_at DateTime64(3, 'UTC')
)`

func migrate(ctx context.Context, conn driver.Conn, db string, fsys fs.FS, dir string, cluster *Cluster, log *slog.Logger) ([]string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := validDatabase(db); err != nil {
		return nil, fmt.Errorf("sink: migrate: %w", err)
	}
	ms, err := loadMigrations(fsys, dir)
	if err != nil {
		return nil, err
	}
	q := "`" + db + "`"
	bootstrap := []string{
		"CREATE DATABASE IF NOT EXISTS " + q,
		"CREATE TABLE IF NOT EXISTS " + q + ".schema_migrations\n" + schemaMigrationsColumns + `
ENGINE = ReplacingMergeTree(applied_at)
ORDER BY version`,
	}
	var layout *clusterLayout
	if cluster != nil {
		if err := cluster.Validate(); err != nil {
			return nil, fmt.Errorf("sink: migrate: %w", err)
		}
		layout = newClusterLayout(*cluster, ms)
		bootstrap = layout.bootstrap(q)
	}
	if err := checkLayout(ctx, conn, db, cluster); err != nil {
		return nil, err
	}
	if layout != nil && layout.upToDate(ctx, conn, db, ms) {
		// No DDL at all: ON CLUSTER statements wait for every server, so
		// even an idempotent one would hold up (or fail) the start of an
		// instance while a server is down.
		return nil, nil
	}
	for _, stmt := range bootstrap {
		if err := conn.Exec(ctx, stmt); err != nil {
			return nil, fmt.Errorf("sink: migrate: %w", err)
		}
	}
	done, err := appliedMigrations(ctx, conn, q)
	if err != nil {
		return nil, err
	}
	known := map[uint32]bool{}
	for _, m := range ms {
		known[m.version] = true
		if r, ok := done[m.version]; ok && r.checksum != m.checksum {
			return nil, fmt.Errorf("%w: %s was applied as %s with checksum %s, the file now has %s; add a new migration instead of editing one",
				ErrChecksumMismatch, m.file, r.name, r.checksum, m.checksum)
		}
	}
	for v, r := range done {
		if !known[v] {
			log.Warn("sink: migrate: store has a migration this build does not know", "version", v, "name", r.name)
		}
	}
	var applied []string
	for _, m := range ms {
		if _, ok := done[m.version]; ok {
			continue
		}
		t0 := time.Now()
		for i, stmt := range m.stmts {
			if layout != nil {
				if stmt, err = layout.statement(stmt); err != nil {
					return applied, fmt.Errorf("sink: migrate: %s statement %d: %w", m.file, i+1, err)
				}
			}
			if err := conn.Exec(ctx, strings.ReplaceAll(stmt, "{db}", q)); err != nil {
				return applied, fmt.Errorf("sink: migrate: %s statement %d: %w", m.file, i+1, err)
			}
		}
		ins := clickhouse.Context(ctx, clickhouse.WithSettings(clickhouse.Settings{"async_insert": 0}))
		if err := conn.Exec(ins, "INSERT INTO "+q+".schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
			m.version, m.file, m.checksum, time.Now().UTC()); err != nil {
			return applied, fmt.Errorf("sink: migrate: record %s: %w", m.file, err)
		}
		applied = append(applied, m.file)
		log.Info("sink: migration applied", "database", db, "migration", m.file, "statements", len(m.stmts), "took", time.Since(t0))
	}
	if layout != nil {
		for _, stmt := range layout.distributed(q, len(applied) > 0) {
			if err := conn.Exec(ctx, stmt); err != nil {
				return applied, fmt.Errorf("sink: migrate: distributed table: %w", err)
			}
		}
	}
	return applied, nil
}

type appliedRecord struct{ name, checksum string }

func appliedMigrations(ctx context.Context, conn driver.Conn, q string) (map[uint32]appliedRecord, error) {
	rows, err := conn.Query(ctx, "SELECT version, name, checksum FROM "+q+".schema_migrations FINAL")
	if err != nil {
		return nil, fmt.Errorf("sink: migrate: read schema_migrations: %w", err)
	}
	defer rows.Close()
	done := map[uint32]appliedRecord{}
	for rows.Next() {
		var v uint32
		var r appliedRecord
		if err := rows.Scan(&v, &r.name, &r.checksum); err != nil {
			return nil, fmt.Errorf("sink: migrate: read schema_migrations: %w", err)
		}
		done[v] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: migrate: read schema_migrations: %w", err)
	}
	return done, nil
}

// loadMigrations reads the .sql files of dir of fsys: each must be named
// NNNN_name.sql with a distinct version and hold at least one statement.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("sink: migrations: %w", err)
	}
	var ms []migration
	seen := map[uint32]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue // READMEs and the like
		}
		m := migrationName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("sink: migrations: %q is not NNNN_name.sql (lower case)", e.Name())
		}
		v, _ := strconv.ParseUint(m[1], 10, 32)
		if prev, ok := seen[uint32(v)]; ok {
			return nil, fmt.Errorf("sink: migrations: %s and %s have the same version", prev, e.Name())
		}
		seen[uint32(v)] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("sink: migrations: %w", err)
		}
		stmts := splitStatements(string(b))
		if len(stmts) == 0 {
			return nil, fmt.Errorf("sink: migrations: %s has no statement", e.Name())
		}
		sum := sha256.Sum256(b)
		ms = append(ms, migration{
			version:  uint32(v),
			file:     e.Name(),
			stmts:    stmts,
			checksum: "sha256:" + hex.EncodeToString(sum[:]),
		})
	}
	if len(ms) == 0 {
		return nil, errors.New("sink: migrations: none found")
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// splitStatements splits a migration file into statements: each ends with a
// line whose last non-blank character is ";" and that is not a "--" comment
// line. Comment lines before a statement are dropped, those inside kept; a
// last statement without ";" counts too.
func splitStatements(sql string) []string {
	var (
		stmts []string
		cur   strings.Builder
	)
	flush := func() {
		s := strings.TrimSpace(cur.String())
		s = strings.TrimSpace(strings.TrimSuffix(s, ";"))
		if s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for _, line := range strings.SplitAfter(sql, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			if cur.Len() > 0 {
				cur.WriteString(line)
			}
			continue
		}
		cur.WriteString(line)
		if strings.HasSuffix(t, ";") {
			flush()
		}
	}
	flush() // a last statement without ";"
	return stmts
}
