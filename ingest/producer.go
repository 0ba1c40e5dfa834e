package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/schema"
)

// ProducerConfig configures a [Producer]. Start from
// [DefaultProducerConfig].
type ProducerConfig struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// CallsTopic receives call events. Default "tool-calls".
	CallsTopic string
	// ListingsTopic receives listing events. Default "tool-listings".
	ListingsTopic string
	// DeliveryTimeout bounds how long a record may take from Append,
	// waiting for buffer space and retries included, before it fails.
	// Default 60s; 0 means no limit.
	DeliveryTimeout time.Duration
	// ClientID is the Kafka client id. Default "toolaudit-ingest".
	ClientID string
	// Logger receives the first delivery failure; nil logs nothing.
	Logger *slog.Logger
}

// DefaultProducerConfig returns the defaults, without brokers.
func DefaultProducerConfig() ProducerConfig {
	return ProducerConfig{
		CallsTopic:      schema.TopicCalls,
		ListingsTopic:   schema.TopicListings,
		DeliveryTimeout: 60 * time.Second,
		ClientID:        "toolaudit-ingest",
	}
}

// Validate reports what is missing or wrong.
func (c ProducerConfig) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("no brokers"))
	}
	if c.CallsTopic == "" || c.ListingsTopic == "" {
		errs = append(errs, errors.New("empty topic name"))
	}
	if c.DeliveryTimeout < 0 {
		errs = append(errs, errors.New("negative delivery timeout"))
	}
	return errors.Join(errs...)
}

// Producer is the Kafka [Sink]: a franz-go client, idempotent with acks
// from all in-sync replicas, that keys and stamps each record as the
// contract says. Append is asynchronous; Flush waits for every record. It
// is safe for concurrent use.
type Producer struct {
	cl      *kgo.Client
	topics  [3]string // by Kind
	log     *slog.Logger
	timeout time.Duration

	recordCtx context.Context // records outlive a canceled Append context
	cancel    context.CancelFunc

	mu        sync.Mutex
	err       error // first delivery failure
	delivered map[string]int64
}

// NewProducer connects lazily to cfg.Brokers; see [Producer.Ping]. extra
// options are appended to the producer's own (tests, TLS, SASL).
func NewProducer(cfg ProducerConfig, extra ...kgo.Opt) (*Producer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("producer config: %w", err)
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes stay on (kgo's default)
		// Snappy, else none: kgo's default, said outright. Of none,
		// snappy, lz4 and zstd it cost the producer least (1.3 µs a call
		// against 2.2 - 2.9) and the pipeline no more than none, which
		// moves five times the bytes (docs/performance.md §3, issue 25).
		kgo.ProducerBatchCompression(kgo.SnappyCompression(), kgo.NoCompression()),
	}
	// Not kgo.RecordDeliveryTimeout: kgo measures it from the record's
	// timestamp, which here is the event's own (often past) time, so every
	// record would time out at once. Each record gets a context deadline
	// instead (see Append).
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rctx, cancel := context.WithCancel(context.Background())
	p := &Producer{
		cl:        cl,
		log:       log,
		timeout:   cfg.DeliveryTimeout,
		recordCtx: rctx,
		cancel:    cancel,
		delivered: make(map[string]int64),
	}
	p.topics[KindCall] = cfg.CallsTopic
	p.topics[KindListing] = cfg.ListingsTopic
	return p, nil
}

// Ping checks that a broker answers.
func (p *Producer) Ping(ctx context.Context) error {
	if err := p.cl.Ping(ctx); err != nil {
		return fmt.Errorf("kafka unreachable: %w", err)
	}
	return nil
}

// Append produces ev asynchronously. It returns the first delivery failure
// seen so far, if any, and blocks while the client's buffer is full. A
// record, once appended, is delivered even if ctx is canceled later; Close
// abandons what is left.
func (p *Producer) Append(ctx context.Context, ev Event) error {
	if err := p.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if int(ev.Kind) >= len(p.topics) || p.topics[ev.Kind] == "" {
		return fmt.Errorf("no topic for event kind %s", ev.Kind)
	}
	rec := &kgo.Record{
		Topic:     p.topics[ev.Kind],
		Key:       ev.Key,
		Value:     ev.Value,
		Timestamp: ev.Timestamp,
	}
	if rec.Timestamp.IsZero() {
		rec.Timestamp = time.Now() // every record carries a time (kgo's default too, said here)
	}
	if p.timeout <= 0 {
		p.cl.Produce(p.recordCtx, rec, p.promise)
		return nil
	}
	rctx, cancel := context.WithTimeout(p.recordCtx, p.timeout)
	p.cl.Produce(rctx, rec, func(r *kgo.Record, err error) {
		cancel()
		p.promise(r, err)
	})
	return nil
}

func (p *Producer) promise(r *kgo.Record, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.err == nil {
			p.err = fmt.Errorf("produce to %s: %w", r.Topic, err)
			p.log.Error("kafka delivery failed", "topic", r.Topic, "err", err)
		}
		return
	}
	p.delivered[r.Topic]++
}

// Err returns the first delivery failure, or nil.
func (p *Producer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Flush waits until every appended record is acknowledged or failed, and
// returns the first failure.
func (p *Producer) Flush(ctx context.Context) error {
	if err := p.cl.Flush(ctx); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return p.Err()
}

// Delivered returns how many records each topic acknowledged.
func (p *Producer) Delivered() map[string]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := make(map[string]int64, len(p.delivered))
	for k, v := range p.delivered {
		m[k] = v
	}
	return m
}

// Topic returns the topic of events of kind k.
func (p *Producer) Topic(k Kind) string {
	if int(k) >= len(p.topics) {
		return ""
	}
	return p.topics[k]
}

// Close abandons unflushed records and closes the client.
func (p *Producer) Close() {
	p.cancel()
	p.cl.Close()
}
