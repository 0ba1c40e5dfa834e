// Package decisions produces every stored decision row to a Kafka topic
// (resolverd run --decisions-topic, off by default), so that enforcers, a
// session kill switch or a SIEM can act on rejections within a second,
// without querying ClickHouse.
//
// # The record
//
// Key: the call's session (schema.CallKey: session_id, else agent_id).
// Value: the row as one compact JSON object, one member per column of
// table decisions (schema.Columns, in their order) except args_raw: raw
// arguments may hold secrets and never leave the store. Times are RFC
// 3339 UTC with milliseconds, or null when the call had no usable time.
//
//	{"event_id":"c-1","verdict":"reject","class":"H1","reason":"...",...,
//	 "call_key":"c-1","analysis_id":"live",...,"source":"api","action":"enforced",
//	 "suggested_tool":"create_issue",...,"session_id":"s-19",...,
//	 "emitted_at":"2026-11-29T10:00:05.250Z","decided_at":"...",...,
//	 "topic":"tool-audit","partition":0,"offset":17}
//
// # Delivery
//
// The pipeline writes through appender.Tee(ClickHouse, Kafka): a batch goes
// to ClickHouse first, then to the topic, and the calls' offsets are
// committed only when both acknowledged (acks=all). Delivery is at least
// once: a crash between the topic's ack and the commit produces the
// batch's records again when the calls are decided again, and a failed
// produce is retried. Consumers deduplicate by (analysis_id, call_key,
// source), the store's key; a later record of the same key supersedes an
// earlier one (decided_at is greater or equal).
package decisions

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/internal/promutil"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/sink/appender"
)

// DefaultTopic is a suggested name; the topic is off unless configured.
const DefaultTopic = schema.TopicDecisions

// skipped are the columns the records leave out.
var skipped = map[string]bool{"args_raw": true}

var columns = func() []schema.Column {
	var out []schema.Column
	for _, c := range schema.Columns() {
		if !skipped[c.Name] {
			out = append(out, c)
		}
	}
	return out
}()

// AppendJSON appends r as a decisions record's value.
func AppendJSON(b []byte, r *schema.Row) []byte {
	b = append(b, '{')
	for i, c := range columns {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, c.Name...)
		b = append(b, '"', ':')
		switch {
		case c.Str != nil:
			b = schema.AppendString(b, *c.Str(r))
		case c.Bool != nil:
			b = strconv.AppendBool(b, *c.Bool(r))
		case c.Time != nil:
			if t := *c.Time(r); t.IsZero() {
				b = append(b, "null"...)
			} else {
				b = append(b, '"')
				b = schema.AppendTime(b, t)
				b = append(b, '"')
			}
		case c.Int32 != nil:
			b = strconv.AppendInt(b, int64(*c.Int32(r)), 10)
		default:
			b = strconv.AppendInt(b, *c.Int64(r), 10)
		}
	}
	return append(b, '}')
}

// Config configures NewKafka. Brokers and Topic are required.
type Config struct {
	Brokers []string
	Topic   string
	// ClientID of the producer. Default "resolverd-decisions".
	ClientID string
	// Opts are appended to the client's options (TLS, SASL).
	Opts []kgo.Opt
}

// Kafka is the pipeline's sink for the decisions topic (appender.Batcher).
// Use it through appender.Tee after the store.
type Kafka struct {
	cl       *kgo.Client
	topic    string
	produced prometheus.Counter
	retries  prometheus.Counter
}

var _ appender.Batcher = (*Kafka)(nil)

// NewKafka returns the sink; it connects lazily. A nil reg registers no
// metrics.
func NewKafka(cfg Config, reg prometheus.Registerer) (*Kafka, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("decisions: brokers and topic are required")
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "resolverd-decisions"
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ClientID(cfg.ClientID),
		kgo.DefaultProduceTopic(cfg.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5 * time.Millisecond),
	}, cfg.Opts...)...)
	if err != nil {
		return nil, fmt.Errorf("decisions: kafka client: %w", err)
	}
	k := &Kafka{cl: cl, topic: cfg.Topic}
	k.produced = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolaudit_decisions_topic_records_total",
		Help: "Decision records acknowledged by the decisions topic.",
	})
	k.retries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "toolaudit_decisions_topic_failures_total",
		Help: "Decision records the decisions topic did not acknowledge (each is produced again).",
	})
	if err := promutil.Register(reg, k.produced, k.retries); err != nil {
		cl.Close()
		return nil, err
	}
	return k, nil
}

// Close closes the client.
func (k *Kafka) Close() { k.cl.Close() }

// Write produces rows and waits for every ack (appender.Sink).
func (k *Kafka) Write(ctx context.Context, rows []schema.Row) error {
	b := k.NewBatch()
	b.Append(rows)
	return b.Write(ctx)
}

// NewBatch returns an empty batch (appender.Batcher): rows are encoded as
// they are appended.
func (k *Kafka) NewBatch() appender.Batch { return &batch{k: k} }

// batch holds the records of a write: values in one buffer, and which
// records are still to be acknowledged.
type batch struct {
	k       *Kafka
	buf     []byte
	ends    []int // end of record i's value in buf
	keys    []string
	recs    []kgo.Record
	pending []*kgo.Record // not acknowledged yet; nil before the first attempt
	tried   bool
	events  bool // given call records, which the topic does not keep: Write fails
}

func (b *batch) Append(rows []schema.Row) {
	for i := range rows {
		r := &rows[i]
		b.buf = AppendJSON(b.buf, r)
		b.ends = append(b.ends, len(b.buf))
		b.keys = append(b.keys, schema.CallKey(r.SessionID, r.AgentID))
	}
}

// AppendEvents notes that the batch was given call records: the decisions
// topic keeps no archive of them (Archives), so Write fails for good
// rather than drop them. Through appender.Tee after ClickHouse they go to
// ClickHouse alone.
func (b *batch) AppendEvents(evs []schema.CallEvent) { b.events = b.events || len(evs) > 0 }
func (b *batch) Archives() bool                      { return false }
func (b *batch) Reserve(rows, bytes int)             {}

func (b *batch) Len() int  { return len(b.ends) }
func (b *batch) Size() int { return len(b.buf) }

// Write produces the records not yet acknowledged; after an error the
// next call produces only those that failed.
func (b *batch) Write(ctx context.Context) error {
	if b.events {
		return fmt.Errorf("decisions: %w", appender.ErrNoArchive)
	}
	if !b.tried {
		b.tried = true
		b.recs = b.recs[:0]
		start := 0
		for i, end := range b.ends {
			r := kgo.Record{Topic: b.k.topic, Value: b.buf[start:end:end]}
			if b.keys[i] != "" {
				r.Key = []byte(b.keys[i])
			}
			b.recs = append(b.recs, r)
			start = end
		}
		b.pending = b.pending[:0]
		for i := range b.recs {
			b.pending = append(b.pending, &b.recs[i])
		}
	}
	if len(b.pending) == 0 {
		return nil
	}
	var failed []*kgo.Record
	var ferr error
	for _, res := range b.k.cl.ProduceSync(ctx, b.pending...) {
		if res.Err != nil {
			failed, ferr = append(failed, res.Record), res.Err
		}
	}
	b.k.produced.Add(float64(len(b.pending) - len(failed)))
	b.pending = failed
	if ferr != nil {
		b.k.retries.Add(float64(len(failed)))
		return fmt.Errorf("decisions: %d of the batch's records not produced to %s: %w", len(failed), b.k.topic, ferr)
	}
	return nil
}

func (b *batch) Reset() {
	b.buf, b.ends, b.keys = b.buf[:0], b.ends[:0], b.keys[:0]
	clear(b.recs)
	b.recs, b.pending, b.tried, b.events = b.recs[:0], nil, false, false
}
