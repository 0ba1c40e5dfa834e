package topic

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/internal/topicrange"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestLoadListings: every partition is read whole and applied, a bad
// listing is counted and skipped, and a missing topic is an error, not an
// empty registry.
func TestLoadListings(t *testing.T) {
	ctx := context.Background()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, schema.TopicListings))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i, srv := range []string{"a", "b", "c"} {
		l := &schema.Listing{EventID: srv, ObservedAt: t0.Add(time.Duration(i) * time.Second), Registry: "prod", Server: srv, Op: schema.OpSnapshot,
			Tools: []schema.Tool{{Name: "t", InputSchema: []byte(`{"type":"object"}`)}}}
		recs = append(recs, &kgo.Record{Topic: schema.TopicListings, Key: []byte(srv), Value: schema.AppendListing(nil, l, [][]byte{[]byte(`{"name":"t","inputSchema":{"type":"object"}}`)})})
	}
	recs = append(recs, &kgo.Record{Topic: schema.TopicListings, Value: []byte(`{"type":"listing"}`)})
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	store := registry.New()
	st, err := LoadListings(ctx, opts, schema.TopicListings, store, nil)
	if err != nil || st != (Stats{Records: 4, Applied: 3, Bad: 1}) {
		t.Fatalf("%+v: %v", st, err)
	}
	if v := store.At("prod", t0.Add(time.Hour)); v == nil || len(v.Servers()) != 3 {
		t.Fatalf("version %v", v)
	}
	if _, err := LoadListings(ctx, opts, "nope", registry.New(), nil); !errors.Is(err, topicrange.ErrNoTopic) {
		t.Fatalf("a missing topic: %v", err)
	}
}
