package analytics

import (
	"fmt"
	"os"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"go.uber.org/goleak"

	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/internal/analyticsfixture"
)

// The fixture's day 0 and analysis.
var (
	base     = analyticsfixture.Base
	analysis = analyticsfixture.Analysis
)

func TestMain(m *testing.M) {
	code := chenginetest.Main(m)
	analyticsfixture.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fixture is the analytics fixture (internal/analyticsfixture).
func fixture(t *testing.T) driver.Conn { return analyticsfixture.Conn(t) }
