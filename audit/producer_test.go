package audit

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/kafkatest"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func cluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, DefaultTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestKafkaProduce: acknowledged records are in the topic, keyed by
// session, and decode to what was produced; a session's records share a
// partition, in order.
func TestKafkaProduce(t *testing.T) {
	c := cluster(t)
	reg := prometheus.NewRegistry()
	k, err := NewKafka(KafkaConfig{Brokers: c.ListenAddrs()}, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ctx := context.Background()
	if err := k.Check(ctx); err != nil {
		t.Fatal(err)
	}
	var recs []*Record
	for i, key := range []string{"s-1", "s-2", "s-1", ""} {
		r := sampleRecord(`{"event_id":"c-` + string(rune('a'+i)) + `"}`)
		r.Key = key
		r.Decision.EventID = "c-" + string(rune('a'+i))
		recs = append(recs, &r)
	}
	if err := k.Produce(ctx, recs[0]); err != nil {
		t.Fatal(err)
	}
	if err := k.Produce(ctx, recs[1:]...); err != nil {
		t.Fatal(err)
	}
	got := kafkatest.Consume(t, c.ListenAddrs(), DefaultTopic, len(recs), 10*time.Second)
	if len(got) != len(recs) {
		t.Fatalf("%d records in the topic, want %d", len(got), len(recs))
	}
	byID := map[string]*kgo.Record{}
	for _, kr := range got {
		var r Record
		if err := Decode(kr.Value, &r); err != nil {
			t.Fatal(err)
		}
		byID[r.Decision.EventID] = kr
		for _, want := range recs {
			if want.Decision.EventID == r.Decision.EventID {
				w := *want
				w.Key = ""
				if !reflect.DeepEqual(w, r) {
					t.Fatalf("record %s:\n got %+v\nwant %+v", r.Decision.EventID, r, w)
				}
				if string(kr.Key) != want.Key {
					t.Fatalf("record %s: key %q, want %q", r.Decision.EventID, kr.Key, want.Key)
				}
			}
		}
	}
	a, c2 := byID["c-a"], byID["c-c"]
	if a.Partition != c2.Partition || a.Offset >= c2.Offset {
		t.Fatalf("session s-1: partitions %d/%d offsets %d/%d", a.Partition, c2.Partition, a.Offset, c2.Offset)
	}
	if n := testCounter(t, reg, "acked"); n != 4 {
		t.Fatalf("acked counter %v", n)
	}
}

// TestKafkaUnavailable: a missing topic or a broker that is gone fails
// Produce within the configured timeout with ErrUnavailable.
func TestKafkaUnavailable(t *testing.T) {
	c := cluster(t)
	for _, tc := range []struct {
		name  string
		topic string
		down  bool
	}{
		{"missing topic", "absent", false},
		{"broker gone after a produce", DefaultTopic, true}, // its own cluster: the next case closes the shared one
		{"broker down", DefaultTopic, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := NewKafka(KafkaConfig{Brokers: c.ListenAddrs(), Topic: tc.topic, Timeout: time.Second,
				Opts: []kgo.Opt{kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond })}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer k.Close()
			ctx := context.Background()
			down := c
			if tc.name == "broker gone after a produce" {
				down = cluster(t)
				k.Close()
				if k, err = NewKafka(KafkaConfig{Brokers: down.ListenAddrs(), Topic: tc.topic, Timeout: time.Second}, nil, nil); err != nil {
					t.Fatal(err)
				}
				defer k.Close()
				r := sampleRecord(`{}`)
				if err := k.Produce(ctx, &r); err != nil {
					t.Fatalf("first Produce: %v", err)
				}
			}
			if tc.down {
				down.Close()
			} else if err := k.Check(ctx); err == nil {
				t.Fatal("Check: no error for a missing topic")
			}
			r := sampleRecord(`{}`)
			start := time.Now()
			err = k.Produce(ctx, &r)
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Produce: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("Produce failed after %v", d)
			}
		})
	}
}

func testCounter(t *testing.T, g prometheus.Gatherer, result string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "toolaudit_audit_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
