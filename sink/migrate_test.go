package sink

import (
	"context"
	"errors"
	"io/fs"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/schema"
)

func TestLoadMigrations(t *testing.T) {
	tests := []struct {
		dir     string
		want    []string // files, in order
		wantErr bool
	}{
		{dir: "good", want: []string{"0001_a.sql", "0002_b_and_c.sql"}},
		{dir: "badname", wantErr: true},
		{dir: "upper", wantErr: true},
		{dir: "dupversion", wantErr: true},
		{dir: "empty", wantErr: true},
		{dir: "none", wantErr: true},
		{dir: "missing", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			ms, err := loadMigrations(os.DirFS("testdata/migrations"), tt.dir)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			var files []string
			for _, m := range ms {
				files = append(files, m.file)
			}
			if !slices.Equal(files, tt.want) {
				t.Errorf("files = %q, want %q", files, tt.want)
			}
		})
	}
	// The good fixture: 0002 holds two statements, one with a comment
	// inside; comments ending in ";" do not split.
	ms, _ := loadMigrations(os.DirFS("testdata/migrations"), "good")
	if n := len(ms[1].stmts); n != 2 {
		t.Fatalf("0002: %d statements, want 2: %q", n, ms[1].stmts)
	}
	if want := "CREATE TABLE IF NOT EXISTS {db}.c (x UInt8)\nENGINE = MergeTree\n-- inside a statement;\nORDER BY x"; ms[1].stmts[1] != want {
		t.Errorf("0002 statement 2 = %q, want %q", ms[1].stmts[1], want)
	}
}

func TestSplitStatements(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"-- only a comment;\n", nil},
		{"SELECT 1", []string{"SELECT 1"}},
		{"SELECT 1;", []string{"SELECT 1"}},
		{"SELECT 1;  \r\nSELECT 2 ;\n", []string{"SELECT 1", "SELECT 2"}},
		{"SELECT 'a;b'\n, 1;\n", []string{"SELECT 'a;b'\n, 1"}},
		{"-- head\nSELECT 1\n-- mid;\nFROM x;\n-- tail;\n", []string{"SELECT 1\n-- mid;\nFROM x"}},
	}
	for _, tt := range tests {
		if got := splitStatements(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitStatements(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The shipped migrations load, and each file splits as intended.
func TestShippedMigrations(t *testing.T) {
	ms, err := loadMigrations(schema.Migrations, "ddl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"0001_decisions.sql": 1, "0002_decisions_by_minute.sql": 2, "0003_decisions_compact_inserts.sql": 1, "0004_decisions_digests_lowcardinality.sql": 1, "0007_analytics.sql": 17}
	for _, m := range ms {
		if n, ok := want[m.file]; ok && len(m.stmts) != n {
			t.Errorf("%s: %d statements, want %d", m.file, len(m.stmts), n)
		}
	}
}

// migrationsFS copies schema.Migrations into a MapFS under ddl/, to tamper
// with.
func migrationsFS(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(schema.Migrations, "ddl", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schema.Migrations, p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestMigrate(t *testing.T) {
	srv := chenginetest.Server(t)
	ctx := context.Background()
	// Config.Open, as `resolverd migrate` uses it: NewClickHouse would
	// refuse the database before its first migration.
	conn, err := Config{Addr: []string{srv.Addr()}}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	db := testDB(t)

	applied, err := Migrate(ctx, conn, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"0001_decisions.sql", "0002_decisions_by_minute.sql", "0003_decisions_compact_inserts.sql", "0004_decisions_digests_lowcardinality.sql", "0005_decisions_source_action.sql", "0006_call_events.sql", "0007_analytics.sql", "0008_decisions_approval.sql", "0009_approval_events.sql", "0010_rollups_from_groups.sql", "0011_session_calls_in_sessions.sql", "0012_decisions_merges.sql", "0013_decisions_trace.sql"}; !slices.Equal(applied, want) {
		t.Fatalf("first run applied %q, want %q", applied, want)
	}
	var ddl string
	if err := conn.QueryRow(ctx, "SELECT create_table_query FROM system.tables WHERE database = ? AND name = 'decisions'", db).Scan(&ddl); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ddl, "min_bytes_for_wide_part = 67108864") {
		t.Errorf("0003 not in effect: %s", ddl)
	}
	var tables []string
	rows, err := conn.Query(ctx, "SELECT name FROM system.tables WHERE database = ? ORDER BY name", db)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	if want := []string{"approval_events", "call_events", "call_path_decisions", "call_path_decisions_mv", "decisions", "decisions_by_minute", "decisions_by_minute_mv",
		"decisions_by_tool_day", "decisions_by_tool_day_mv", "decisions_groups", "decisions_groups_mv", "decisions_rollup_hour", "decisions_rollup_hour_mv",
		"decisions_rollup_minute", "decisions_rollup_minute_mv", "fabricated_names_day", "fabricated_names_day_mv",
		"registry_changes", "registry_versions_seen", "registry_versions_seen_mv", "schema_migrations", "session_calls",
		"sessions_by_hour", "sessions_by_hour_mv"}; !slices.Equal(tables, want) {
		t.Errorf("tables = %q, want %q", tables, want)
	}

	applied, err = Migrate(ctx, conn, db, nil)
	if err != nil || len(applied) != 0 {
		t.Fatalf("second run applied %q, %v; want nothing", applied, err)
	}

	// A new migration is applied alone, and the writer tolerates the
	// column it adds.
	fsys := migrationsFS(t)
	fsys["ddl/0099_note.sql"] = &fstest.MapFile{Data: []byte("ALTER TABLE {db}.decisions ADD COLUMN IF NOT EXISTS note String DEFAULT '';\n")}
	applied, err = migrate(ctx, conn, db, fsys, "ddl", nil, nil)
	if err != nil || !slices.Equal(applied, []string{"0099_note.sql"}) {
		t.Fatalf("with 0099: applied %q, %v", applied, err)
	}
	w := newWriterAt(t, srv.Addr(), db)
	mustWrite(t, w, mkRows("a", 0, 10, base))
	if _, n, err := w.Counts(ctx, "a"); err != nil || n != 10 {
		t.Fatalf("Counts = %d, %v", n, err)
	}

	// An applied migration that changed is refused, before anything runs.
	fsys["ddl/0001_decisions.sql"].Data = append(fsys["ddl/0001_decisions.sql"].Data, "\n-- edited\n"...)
	fsys["ddl/0100_more.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE IF NOT EXISTS {db}.more (x UInt8) ENGINE = MergeTree ORDER BY x;\n")}
	applied, err = migrate(ctx, conn, db, fsys, "ddl", nil, nil)
	if !errors.Is(err, ErrChecksumMismatch) || len(applied) != 0 {
		t.Fatalf("tampered: applied %q, err %v; want ErrChecksumMismatch", applied, err)
	}
	t.Log(err)
	var exists uint8
	if err := conn.QueryRow(ctx, "SELECT count() > 0 FROM system.tables WHERE database = ? AND name = 'more'", db).Scan(&exists); err != nil || exists != 0 {
		t.Errorf("0100 ran despite the refusal (%v)", err)
	}
}

func TestMigrateBadDatabase(t *testing.T) {
	if _, err := Migrate(context.Background(), nil, "x; DROP DATABASE y", nil); err == nil {
		t.Fatal("no error for a database name that is not an identifier")
	}
}

// TestMigrateSource: after 0005, rows written before it read source
// 'stream', and a call decided by the API and by the stream keeps both rows
// under FINAL, while a redelivery of either is still one row.
func TestMigrateSource(t *testing.T) {
	srv := chenginetest.Server(t)
	ctx := context.Background()
	conn, err := Config{Addr: []string{srv.Addr()}}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	db := testDB(t)
	before := migrationsFS(t)
	for name := range before { // the schema as it was before 0005
		if name >= "ddl/0005" {
			delete(before, name)
		}
	}
	if _, err := migrate(ctx, conn, db, before, "ddl", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "INSERT INTO "+db+".decisions (event_id, call_key, analysis_id, class, decided_at) VALUES ('old', 'old', 'a', 'OK', now64(3))"); err != nil {
		t.Fatal(err)
	}
	if _, err := Migrate(ctx, conn, db, nil); err != nil {
		t.Fatal(err)
	}
	// Instances of a rolling start migrate at once: a second run of each
	// statement (the other instance's) must succeed.
	ddl, err := schema.Migrations.ReadFile("ddl/0005_decisions_source_action.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.SplitAfter(string(ddl), ";\n") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		if err := conn.Exec(ctx, strings.ReplaceAll(stmt, "{db}", db)); err != nil {
			t.Fatalf("0005 again: %v", err)
		}
	}
	w := newWriterAt(t, srv.Addr(), db)
	rows := mkRows("a", 0, 2, base) // two calls from the stream...
	api := rows[0]
	api.Source, api.Action, api.Class = schema.SourceAPI, schema.ActionEnforced, schema.H1
	mustWrite(t, w, append(rows, api)) // ...the first also from the API
	mustWrite(t, w, rows[:1])          // and redelivered from the stream

	got := map[string]string{}
	q, err := conn.Query(ctx, "SELECT call_key, source, action, class FROM "+db+".decisions FINAL ORDER BY call_key, source")
	if err != nil {
		t.Fatal(err)
	}
	for q.Next() {
		var key, src, act, class string
		if err := q.Scan(&key, &src, &act, &class); err != nil {
			t.Fatal(err)
		}
		got[key+"/"+src] = act + "/" + class
	}
	q.Close()
	want := map[string]string{
		"old/stream":                     "/OK",
		rows[0].CallKey + "/stream":      "/" + string(rows[0].Class),
		rows[0].CallKey + "/api":         "enforced/H1",
		rows[1].CallKey + "/" + "stream": "/" + string(rows[1].Class),
	}
	if !maps.Equal(got, want) {
		t.Errorf("rows under FINAL:\n got %v\nwant %v", got, want)
	}
}
