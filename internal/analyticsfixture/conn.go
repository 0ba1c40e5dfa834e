package analyticsfixture

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/goleak"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/sink"
)

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
		cfg := sink.Config{Addr: []string{srv.Addr()}, Database: "analyticsfixture"}
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

// Main is the TestMain of a package whose tests read the fixture: it
// runs them on the shared engine (chenginetest.Main), closes Conn's
// connection, then fails the run on leaked goroutines. It returns the
// exit code.
func Main(m *testing.M) int {
	code := chenginetest.Main(m)
	Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
