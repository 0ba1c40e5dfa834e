package embedded

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
)

func needEngine(t *testing.T) {
	if _, err := chengine.Find(""); err != nil {
		if chenginetest.Required() {
			t.Fatalf("ClickHouse engine required: %v", err)
		}
		t.Skipf("ClickHouse engine not fetched (scripts/fetch-chengine.sh): %v", err)
	}
}

// TestStackPersists: records and ClickHouse data survive a restart of the
// stack on the same directory.
func TestStackPersists(t *testing.T) {
	needEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	opts := Options{Dir: dir, KafkaPort: -1, ClickHouseTCP: -1, ClickHouseHTTP: -1}
	s, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "tool-calls", Key: []byte("k"), Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "CREATE TABLE t (x UInt8) ENGINE = MergeTree ORDER BY x"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "INSERT INTO t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cl, err = kgo.NewClient(kgo.SeedBrokers(s.Brokers...), kgo.ConsumeTopics("tool-calls"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	if err := fs.Err(); err != nil {
		t.Fatal(err)
	}
	if recs := fs.Records(); len(recs) != 1 || string(recs[0].Value) != "v1" {
		t.Fatalf("after restart: %d records", len(recs))
	}
	conn, err = clickhouse.Open(&clickhouse.Options{Addr: []string{s.ClickHouse.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var x uint8
	if err := conn.QueryRow(ctx, "SELECT x FROM t").Scan(&x); err != nil || x != 7 {
		t.Fatalf("after restart: x=%d err=%v", x, err)
	}
}
