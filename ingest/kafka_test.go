package ingest

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

const (
	testPartitions = 3
	callsTopic     = "tool-calls"
	listingsTopic  = "tool-listings"
)

// newCluster starts an in-process Kafka with the two topics.
func newCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(testPartitions, callsTopic, listingsTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// tee records every appended event before handing it on.
type tee struct {
	Sink
	events []Event
}

func (s *tee) Append(ctx context.Context, ev Event) error {
	s.events = append(s.events, ev)
	return s.Sink.Append(ctx, ev)
}

// readAll reads every record of topic with kafka-go, partition by
// partition, up to each partition's end offset.
func readAll(t *testing.T, ctx context.Context, addr, topic string) []kafka.Message {
	t.Helper()
	var out []kafka.Message
	for p := 0; p < testPartitions; p++ {
		conn, err := kafka.DialLeader(ctx, "tcp", addr, topic, p)
		if err != nil {
			t.Fatalf("kafka-go dial %s/%d: %v", topic, p, err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatalf("kafka-go last offset %s/%d: %v", topic, p, err)
		}
		if end == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:   []string{addr},
			Topic:     topic,
			Partition: p,
			MinBytes:  1,
			MaxBytes:  10 << 20,
			MaxWait:   100 * time.Millisecond,
		})
		for i := int64(0); i < end; i++ {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("kafka-go read %s/%d: %v", topic, p, err)
			}
			out = append(out, m)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// The ingest producer (franz-go) writes fixture files into kfake; an
// independent client (kafka-go) reads them back.
func TestProducerToKafkaGo(t *testing.T) {
	ctx := testContext(t)
	cluster := newCluster(t)
	addr := cluster.ListenAddrs()[0]

	cfg := DefaultProducerConfig()
	cfg.Brokers = cluster.ListenAddrs()
	cfg.DeliveryTimeout = 10 * time.Second
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	sink := &tee{Sink: p}
	in := &Ingester{Sink: sink, Defaults: testDefaults}
	start := time.Now()
	var total Stats
	for _, file := range []string{"events.good.jsonl", "openai.good.jsonl", "anthropic.good.jsonl", "bedrock.good.jsonl", "mcp.good.jsonl", "otel.good.jsonl", "garbage.bad.jsonl"} {
		f, err := os.Open(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		st, err := in.Ingest(ctx, file, f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		total.Add(st)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	end := time.Now()

	delivered := p.Delivered()
	if delivered[callsTopic] != int64(total.Events[KindCall]) || delivered[listingsTopic] != int64(total.Events[KindListing]) {
		t.Fatalf("delivered %v, stats %v", delivered, total.Events)
	}
	if total.Events[KindListing] < 4 || total.Events[KindCall] < 20 {
		t.Fatalf("too few events to mean anything: %v", total.Events)
	}

	// Index what was appended by value (event ids are unique).
	type sent struct {
		ev    Event
		order int
	}
	byValue := map[string]sent{}
	for i, ev := range sink.events {
		if _, dup := byValue[string(ev.Value)]; dup {
			t.Fatalf("duplicate value %s", ev.Value)
		}
		byValue[string(ev.Value)] = sent{ev, i}
	}

	seen := 0
	for _, topic := range []string{callsTopic, listingsTopic} {
		msgs := readAll(t, ctx, addr, topic)
		lastOrder := map[int]int{}
		for _, m := range msgs {
			s, ok := byValue[string(m.Value)]
			if !ok {
				t.Fatalf("%s: unexpected record %s", topic, m.Value)
			}
			seen++
			if want := p.Topic(s.ev.Kind); want != topic {
				t.Errorf("%s event on topic %s, want %s", s.ev.Kind, topic, want)
			}
			if string(m.Key) != string(s.ev.Key) || (m.Key == nil) != (s.ev.Key == nil) {
				t.Errorf("key %q, want %q", m.Key, s.ev.Key)
			}
			if s.ev.Timestamp.IsZero() {
				if m.Time.Before(start.Add(-time.Second)) || m.Time.After(end.Add(time.Second)) {
					t.Errorf("event without time got record time %v, want the produce time", m.Time)
				}
			} else if !m.Time.Equal(s.ev.Timestamp.Truncate(time.Millisecond)) {
				t.Errorf("record time %v, want %v for %s", m.Time, s.ev.Timestamp, m.Value)
			}
			if s.ev.Key != nil {
				// Keys are hashed as the Java client does (murmur2), so a
				// session's calls stay in one partition, in order.
				if want := (kafka.Murmur2Balancer{}).Balance(m, 0, 1, 2); m.Partition != want {
					t.Errorf("key %q on partition %d, murmur2 says %d", m.Key, m.Partition, want)
				}
			}
			if prev, ok := lastOrder[m.Partition]; ok && s.order < prev {
				t.Errorf("partition %d out of order", m.Partition)
			}
			lastOrder[m.Partition] = s.order
		}
	}
	if seen != len(sink.events) {
		t.Fatalf("kafka-go read %d records, %d were produced", seen, len(sink.events))
	}
}

// kafka-go produces contract events (keyed and stamped by this package's
// converter) into kfake; franz-go consumes them.
func TestKafkaGoToFranz(t *testing.T) {
	ctx := testContext(t)
	cluster := newCluster(t)

	b, err := os.ReadFile(filepath.Join("testdata", "events.good.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sink := &collect{}
	if _, err := (&Ingester{Sink: sink}).Ingest(ctx, "events.good.jsonl", bytesReader(b)); err != nil {
		t.Fatal(err)
	}
	topicOf := map[Kind]string{KindCall: callsTopic, KindListing: listingsTopic}
	var msgs []kafka.Message
	want := map[string]Event{}
	for _, ev := range sink.events {
		m := kafka.Message{Topic: topicOf[ev.Kind], Key: ev.Key, Value: ev.Value}
		if !ev.Timestamp.IsZero() {
			m.Time = ev.Timestamp
		}
		msgs = append(msgs, m)
		want[string(ev.Value)] = ev
	}

	tr := &kafka.Transport{}
	w := &kafka.Writer{
		Addr:         kafka.TCP(cluster.ListenAddrs()...),
		Balancer:     &kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 10 * time.Millisecond,
		Transport:    tr,
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("kafka-go write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cluster.ListenAddrs()...),
		kgo.ConsumeTopics(callsTopic, listingsTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	hash := kgo.StickyKeyPartitioner(nil)
	got := 0
	for got < len(msgs) {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("franz-go consumed %d of %d: %v", got, len(msgs), err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got++
			ev, ok := want[string(r.Value)]
			if !ok {
				t.Fatalf("unexpected record %s", r.Value)
			}
			delete(want, string(r.Value))
			if r.Topic != topicOf[ev.Kind] {
				t.Errorf("record on %s, want %s", r.Topic, topicOf[ev.Kind])
			}
			if string(r.Key) != string(ev.Key) {
				t.Errorf("key %q, want %q", r.Key, ev.Key)
			}
			if !ev.Timestamp.IsZero() && !r.Timestamp.Equal(ev.Timestamp.Truncate(time.Millisecond)) {
				t.Errorf("timestamp %v, want %v", r.Timestamp, ev.Timestamp)
			}
			if Detect(r.Value) != FormatEvent {
				t.Errorf("consumed value is not a contract event: %s", r.Value)
			}
			if r.Key != nil {
				// Both clients put a key on the same partition.
				if p := hash.ForTopic(r.Topic).Partition(r, testPartitions); int32(p) != r.Partition {
					t.Errorf("key %q: kafka-go chose partition %d, franz-go would choose %d", r.Key, r.Partition, p)
				}
			}
		})
	}
	if len(want) != 0 {
		t.Errorf("%d events not consumed", len(want))
	}
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestProducerFailures(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		cfg := DefaultProducerConfig()
		cfg.Brokers = []string{closedAddr(t)}
		cfg.DeliveryTimeout = time.Second
		p, err := NewProducer(cfg, kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := p.Ping(ctx); err == nil {
			t.Fatal("Ping of a closed port succeeded")
		}
		ctx = testContext(t)
		if err := p.Append(ctx, Event{Kind: KindCall, Value: []byte(`{}`)}); err != nil {
			t.Fatalf("first Append: %v", err)
		}
		if err := p.Flush(ctx); err == nil {
			t.Fatal("Flush succeeded with no broker")
		}
		if err := p.Append(ctx, Event{Kind: KindCall, Value: []byte(`{}`)}); err == nil {
			t.Fatal("Append after a failed delivery succeeded")
		}
	})
	t.Run("missing topic", func(t *testing.T) {
		cluster := newCluster(t)
		cfg := DefaultProducerConfig()
		cfg.Brokers = cluster.ListenAddrs()
		cfg.CallsTopic = "no-such-topic"
		cfg.DeliveryTimeout = 2 * time.Second
		p, err := NewProducer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ctx := testContext(t)
		in := &Ingester{Sink: p}
		line := `{"type":"call","event_id":"c-1","emitted_at":"2026-11-29T10:00:00Z"}` + "\n"
		if _, err := in.Ingest(ctx, "a", bytesReader([]byte(line))); err != nil {
			t.Fatalf("first ingest: %v", err)
		}
		if err := p.Flush(ctx); err == nil {
			t.Fatal("Flush to a missing topic succeeded")
		}
		_, err = in.Ingest(ctx, "b", bytesReader([]byte(line)))
		if !errors.Is(err, ErrSink) {
			t.Fatalf("ingest after a failed delivery: %v, want ErrSink", err)
		}
	})
	t.Run("config", func(t *testing.T) {
		cfg := DefaultProducerConfig()
		if _, err := NewProducer(cfg); err == nil {
			t.Error("no brokers: no error")
		}
		cfg.Brokers = []string{"x:1"}
		cfg.CallsTopic = ""
		if err := cfg.Validate(); err == nil {
			t.Error("empty topic: no error")
		}
	})
}

func TestProducerTopics(t *testing.T) {
	cfg := DefaultProducerConfig()
	cfg.Brokers = []string{closedAddr(t)}
	cfg.CallsTopic, cfg.ListingsTopic = "c", "l"
	p, err := NewProducer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	got := []string{p.Topic(KindCall), p.Topic(KindListing), p.Topic(Kind(7))}
	if got[0] != "c" || got[1] != "l" || got[2] != "" {
		t.Errorf("topics %v", got)
	}
	if err := p.Append(context.Background(), Event{Kind: Kind(7)}); err == nil {
		t.Error("event of unknown kind accepted")
	}
	sort.Strings(got)
}
