package topicrange

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// cluster is a broker holding topic "t" (two partitions): on partition 0
// five records in a transaction, whose end is a control record (the
// partition's last offset); on partition 1 four plain records.
func cluster(t *testing.T) (*kfake.Cluster, []kgo.Opt) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := kgo.NewClient(append(opts, kgo.TransactionalID("tx"), kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := tx.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, "tx%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	pl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("t"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	for i := range 4 {
		if err := pl.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: fmt.Appendf(nil, "p%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return c, opts
}

// TestReadAll: every partition to its end, a range ending on a control
// record seen to end, control records left out, each partition in order.
func TestReadAll(t *testing.T) {
	_, opts := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ranges, err := List(ctx, opts, "t")
	if err != nil {
		t.Fatal(err)
	}
	if ranges[0] != (Range{0, 6}) || ranges[1] != (Range{0, 4}) {
		t.Fatalf("ranges %v: want partition 0 [0, 6) (5 records and the commit marker), 1 [0, 4)", ranges)
	}
	got := map[int32]string{}
	err = ReadAll(ctx, opts, "t", nil, func(p int32, recs []*kgo.Record) error {
		for _, r := range recs {
			got[p] += string(r.Value) + " "
		}
		return nil
	})
	if err != nil || got[0] != "tx0 tx1 tx2 tx3 tx4 " || got[1] != "p0 p1 p2 p3 " {
		t.Fatalf("read %q: %v", got, err)
	}
	if _, err := List(ctx, opts, "nope"); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("a missing topic: %v", err)
	}
}

// TestRead: a partition fn calls done ends there; a range whose records
// were deleted fails with ErrTruncated, never a silent jump.
func TestRead(t *testing.T) {
	_, opts := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	err := Read(ctx, opts, "t", map[int32]Range{1: {0, 4}}, nil, func(_ int32, recs []*kgo.Record) (bool, error) {
		n += len(recs)
		return true, nil
	})
	if err != nil || n == 0 {
		t.Fatalf("%d records: %v", n, err)
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var off kadm.Offsets
	off.Add(kadm.Offset{Topic: "t", Partition: 1, At: 3})
	if _, err := kadm.NewClient(cl).DeleteRecords(ctx, off); err != nil {
		t.Fatal(err)
	}
	err = Read(ctx, opts, "t", map[int32]Range{1: {0, 4}}, nil, func(int32, []*kgo.Record) (bool, error) { return false, nil })
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("a range whose records were deleted: %v", err)
	}
}
