package analyticsfixture

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/sink"
)

// database is the fixture's database on the shared engine.
const database = "analyticsfixture"

var (
	once    sync.Once
	conn    driver.Conn
	openErr error
)

// Conn returns a connection to the fixture: database "analyticsfixture"
// on the test binary's shared engine (chenginetest.Server), migrated and
// filled by Write on first use, and the connection's default database, as
// the dashboards' datasource's is. It lives until Close; gating as
// chenginetest.Server.
func Conn(tb testing.TB) driver.Conn {
	tb.Helper()
	srv := chenginetest.Server(tb)
	once.Do(func() {
		ctx := context.Background()
		cfg := sink.Config{Addr: []string{srv.Addr()}, Database: database}
		w, err := sink.NewClickHouse(ctx, cfg, sink.WithMigrate())
		if err != nil {
			openErr = err
			return
		}
		defer w.Close()
		if openErr = Write(ctx, w); openErr != nil {
			return
		}
		conn, openErr = cfg.OpenIn(ctx)
	})
	if openErr != nil {
		tb.Fatal(openErr)
	}
	return conn
}

// Close closes Conn's connection, if any: from TestMain, before checking
// for leaked goroutines.
func Close() {
	if conn != nil {
		conn.Close()
	}
}

// ReadOnlyUser is the read-only user of ReadOnlyConn's engine: profile
// readonly = 1 but for max_execution_time (changeable_in_readonly), the
// fixture's database only, as the grafana-clickhouse-datasource plugin's
// documentation recommends for Grafana's user (its client sets
// max_execution_time on every query), and as deploy/compose creates it
// (clickhouse-initdb/grafana-user.sql.in). Defined in the engine's
// configuration: the embedded engine keeps no users created by SQL.
const ReadOnlyUser = "grafana"

// readOnlyConfig defines ReadOnlyUser in the engine's configuration (its
// default user may not create users).
const readOnlyConfig = `<clickhouse>
  <user_directories replace="replace">
    <users_xml><path>{path}</path></users_xml>
  </user_directories>
  <profiles>
    <default></default>
    <toolaudit_readonly>
      <readonly>1</readonly>
      <constraints><max_execution_time><changeable_in_readonly/></max_execution_time></constraints>
    </toolaudit_readonly>
  </profiles>
  <quotas><default></default></quotas>
  <users>
    <default>
      <password></password>
      <profile>default</profile>
      <quota>default</quota>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
    </default>
    <` + ReadOnlyUser + `>
      <password></password>
      <profile>toolaudit_readonly</profile>
      <quota>default</quota>
      <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
      <allow_databases><database>` + database + `</database></allow_databases>
    </` + ReadOnlyUser + `>
  </users>
</clickhouse>
`

// ReadOnlyConn starts an engine of tb's own with ReadOnlyUser defined,
// writes the fixture to it as Conn's, and returns a connection as
// ReadOnlyUser to the fixture's database: a query that changes a setting
// (even in its SETTINGS clause) or writes fails on it, as it would for
// Grafana. The engine stops when tb ends.
func ReadOnlyConn(tb testing.TB) driver.Conn {
	tb.Helper()
	// The engine reads users from the copy of the file it merges.
	dir := tb.TempDir()
	cfg := filepath.Join(tb.TempDir(), "readonly.xml")
	body := strings.ReplaceAll(readOnlyConfig, "{path}", filepath.Join(dir, "chengine.d", "options.xml"))
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	srv := chenginetest.Start(tb, chengine.Options{Dir: dir, ConfigFile: cfg})
	ctx := context.Background()
	w, err := sink.NewClickHouse(ctx, sink.Config{Addr: []string{srv.Addr()}, Database: database}, sink.WithMigrate())
	if err != nil {
		tb.Fatal(err)
	}
	err = Write(ctx, w)
	w.Close()
	if err != nil {
		tb.Fatal(err)
	}
	// As the plugin's client: max_execution_time on every query.
	ro, err := clickhouse.Open(&clickhouse.Options{Addr: []string{srv.Addr()},
		Auth:     clickhouse.Auth{Database: database, Username: ReadOnlyUser},
		Settings: clickhouse.Settings{"max_execution_time": 60}})
	if err == nil {
		err = ro.Ping(ctx)
	}
	if err != nil {
		tb.Fatalf("analyticsfixture: connect as %s: %v", ReadOnlyUser, err)
	}
	tb.Cleanup(func() { ro.Close() })
	return ro
}
