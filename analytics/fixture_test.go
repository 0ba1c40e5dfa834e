package analytics

import (
	"os"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/toolaudit/toolaudit/internal/testkit/analyticsfixture"
)

// The fixture's day 0 and analysis.
var (
	base     = analyticsfixture.Base
	analysis = analyticsfixture.Analysis
)

func TestMain(m *testing.M) { os.Exit(analyticsfixture.Main(m)) }

// fixture is the analytics fixture (internal/testkit/analyticsfixture).
func fixture(t *testing.T) driver.Conn { return analyticsfixture.Conn(t) }
