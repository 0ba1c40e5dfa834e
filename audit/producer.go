package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/promutil"
)

// Producer produces audit records. Produce returns nil only once the
// broker has acknowledged every record (acks=all); any error means the
// caller must not answer the decisions as audited. It is safe for
// concurrent use.
type Producer interface {
	Produce(ctx context.Context, recs ...*Record) error
}

// ProducerFunc adapts a function to a Producer.
type ProducerFunc func(ctx context.Context, recs ...*Record) error

// Produce calls f.
func (f ProducerFunc) Produce(ctx context.Context, recs ...*Record) error { return f(ctx, recs...) }

var (
	_ Producer = ProducerFunc(nil)
	_ Producer = (*Kafka)(nil)
)

// ErrUnavailable is wrapped by the errors of Kafka.Produce: the records
// are not known to be in the topic. A front end answers 503.
var ErrUnavailable = errors.New("audit trail unavailable")

// KafkaConfig configures NewKafka. Brokers is required.
type KafkaConfig struct {
	Brokers []string
	// Topic receives the records. Default DefaultTopic.
	Topic string
	// MaxRecordBytes bounds one record (kgo.ProducerBatchMaxBytes): a
	// call event plus its decision. The topic's max.message.bytes must
	// be at least as large, or the broker refuses the larger calls.
	// Default 1 MiB + 64 KiB (a call of the API's default 1 MiB limit).
	MaxRecordBytes int32
	// Timeout bounds how long a record may take to be acknowledged,
	// retries included (kgo.RecordDeliveryTimeout); the caller's context
	// may end it sooner. At least 1s (franz-go's floor); default 5s.
	Timeout time.Duration
	// ClientID of the Kafka client. Default "resolverd-audit".
	ClientID string
	// Opts are appended to the client's options (TLS, SASL).
	Opts []kgo.Opt
}

// Kafka produces audit records to a Kafka topic with franz-go: idempotent,
// acks=all, records keyed by session (so a session's records stay in
// order on one partition), no linger (records produced while a request is
// in flight share the next one).
type Kafka struct {
	cl      *kgo.Client
	topic   string
	log     *slog.Logger
	bufs    sync.Pool
	timeout time.Duration // KafkaConfig.Timeout

	produced *prometheus.CounterVec
	latency  prometheus.Histogram
}

// NewKafka returns a producer of the records to cfg.Topic. It connects
// lazily; Check tells whether the topic exists. A nil log logs nothing; a
// nil reg registers no metrics.
func NewKafka(cfg KafkaConfig, log *slog.Logger, reg prometheus.Registerer) (*Kafka, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("audit: no brokers")
	}
	if cfg.Topic == "" {
		cfg.Topic = DefaultTopic
	}
	if cfg.MaxRecordBytes <= 0 {
		cfg.MaxRecordBytes = 1<<20 + 64<<10
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "resolverd-audit"
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(cfg.MaxRecordBytes),
		kgo.RecordDeliveryTimeout(cfg.Timeout),
	}, cfg.Opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("audit: kafka client: %w", err)
	}
	k := &Kafka{cl: cl, topic: cfg.Topic, log: log, timeout: cfg.Timeout}
	k.bufs.New = func() any { b := make([]byte, 0, 2048); return &b }
	k.produced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolaudit_audit_records_total",
		Help: "Audit records produced, by result (acked, failed).",
	}, []string{"result"})
	k.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "toolaudit_audit_produce_seconds",
		Help:    "Time from producing a request's audit records to the broker's acknowledgement of all of them.",
		Buckets: prometheus.ExponentialBuckets(25e-6, 2, 14),
	})
	if err := promutil.Register(reg, k.produced, k.latency); err != nil {
		cl.Close()
		return nil, err
	}
	return k, nil
}

// Topic is the topic the records go to.
func (k *Kafka) Topic() string { return k.topic }

// Check reports an error when the topic does not exist (every Produce
// would fail) or the brokers cannot be reached.
func (k *Kafka) Check(ctx context.Context) error {
	td, err := kadm.NewClient(k.cl).ListTopics(ctx, k.topic)
	if err != nil {
		return fmt.Errorf("audit: list topic %s: %w", k.topic, err)
	}
	if !td.Has(k.topic) {
		return fmt.Errorf("audit: topic %s does not exist", k.topic)
	}
	if err := td[k.topic].Err; err != nil {
		return fmt.Errorf("audit: topic %s: %w", k.topic, err)
	}
	return nil
}

// Produce produces the records and waits for every acknowledgement.
func (k *Kafka) Produce(ctx context.Context, recs ...*Record) error {
	if len(recs) == 0 {
		return nil
	}
	start := time.Now()
	krs := make([]kgo.Record, 0, len(recs))
	ptrs := make([]*kgo.Record, len(recs))
	bufs := make([]*[]byte, len(recs))
	for i, r := range recs {
		bp := k.bufs.Get().(*[]byte)
		*bp = r.AppendJSON((*bp)[:0])
		bufs[i] = bp
		kr := kgo.Record{Topic: k.topic, Value: *bp}
		if r.Key != "" {
			kr.Key = []byte(r.Key)
		}
		krs = append(krs, kr)
		ptrs[i] = &krs[i]
	}
	err := k.wait(ctx, ptrs, func() {
		for _, bp := range bufs {
			if cap(*bp) <= 64<<10 {
				k.bufs.Put(bp)
			}
		}
	})
	if err != nil {
		k.produced.WithLabelValues("failed").Add(float64(len(recs)))
		return fmt.Errorf("%w: produce to %s: %w", ErrUnavailable, k.topic, err)
	}
	k.produced.WithLabelValues("acked").Add(float64(len(recs)))
	k.latency.Observe(time.Since(start).Seconds())
	return nil
}

// wait produces the records and waits for every acknowledgement, for as
// long as the caller's context allows and at most the delivery timeout
// plus a second. A record the client has sent is not failed while its
// broker stays silent (the idempotent producer keeps it in flight until
// it hears back: ProduceSync outlived both deadlines when the broker
// vanished after a first produce), so the wait gives up on its own and
// the call is refused. release runs once the client is done with every
// record, which may be after wait returns.
func (k *Kafka) wait(ctx context.Context, recs []*kgo.Record, release func()) error {
	done := make(chan error, len(recs))
	for _, r := range recs {
		k.cl.Produce(ctx, r, func(_ *kgo.Record, err error) { done <- err })
	}
	timer := time.NewTimer(k.timeout + time.Second)
	defer timer.Stop()
	var first error
	for left := len(recs); left > 0; left-- {
		select {
		case err := <-done:
			if first == nil {
				first = err
			}
			continue
		case <-ctx.Done():
			first = cmp.Or(first, ctx.Err())
		case <-timer.C:
			first = cmp.Or(first, fmt.Errorf("no acknowledgement within %v", k.timeout+time.Second))
		}
		go func() { // the records still in flight keep their buffers until the client lets them go (Close fails them)
			for range left {
				<-done
			}
			release()
		}()
		return first
	}
	release()
	return first
}

// Close flushes nothing (every Produce has waited) and closes the client.
func (k *Kafka) Close() { k.cl.Close() }
