package analytics

import (
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/testkit/analyticsfixture"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

// The fixture's day 0 and analysis.
var (
	base     = analyticsfixture.Base
	analysis = analyticsfixture.Analysis
)

func TestMain(m *testing.M) {
	leakcheck.Main(m, leakcheck.Run(chenginetest.Main), leakcheck.After(analyticsfixture.Close))
}

// fixture is the analytics fixture (internal/testkit/analyticsfixture).
func fixture(t *testing.T) driver.Conn { return analyticsfixture.Conn(t) }
