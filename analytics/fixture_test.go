package analytics

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/goleak"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/analyticsfixture"
	"github.com/toolaudit/toolaudit/sink"
)

// The fixture's day 0 and analysis.
var (
	base     = analyticsfixture.Base
	analysis = analyticsfixture.Analysis
)

func TestMain(m *testing.M) {
	code := chenginetest.Main(m)
	if fixtureConn != nil {
		fixtureConn.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var (
	fixtureOnce sync.Once
	fixtureConn driver.Conn
	fixtureErr  error
)

// fixture is a database on the shared engine, migrated by the real
// migrations and filled through the real writer (so the materialized
// views fed the rollups), with a connection whose default database is
// it, as the datasource's is.
func fixture(t *testing.T) driver.Conn {
	t.Helper()
	srv := chenginetest.Server(t)
	fixtureOnce.Do(func() {
		ctx := context.Background()
		cfg := sink.Config{Addr: []string{srv.Addr()}, Database: "analyticstest"}
		w, err := sink.NewClickHouse(ctx, cfg, sink.WithMigrate())
		if err != nil {
			fixtureErr = err
			return
		}
		defer w.Close()
		if fixtureErr = analyticsfixture.Write(ctx, w); fixtureErr != nil {
			return
		}
		fixtureConn, fixtureErr = cfg.OpenIn(ctx)
	})
	if fixtureErr != nil {
		t.Fatal(fixtureErr)
	}
	return fixtureConn // closed by TestMain
}
