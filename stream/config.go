package stream

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/otlp"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// Config configures a [Pipeline]. Start from [DefaultConfig]; the zero value
// is not valid.
type Config struct {
	// Brokers are the seed brokers, host:port. Required.
	Brokers []string
	// Group is the consumer group of the calls topic. Default "resolverd".
	Group string
	// ClientID prefixes the Kafka client ids ("-calls", "-listings").
	// Default "resolverd".
	ClientID string

	// CallsTopic is consumed by the group. Default "tool-calls".
	CallsTopic string
	// ListingsTopic is read whole, every partition from the start, by every
	// instance. Default "tool-listings".
	ListingsTopic string
	// DLQTopic receives undecodable call records, unchanged, with headers
	// error, source-topic, source-partition and source-offset. Default
	// "tool-calls-dlq".
	DLQTopic string
	// AuditTopic holds the decisions taken in the call path (package
	// audit: POST /v1/resolve, the gateway). It is consumed by the same
	// group as CallsTopic, and each record's decision becomes a row as it
	// is, with the record's source (not decided again, not held for
	// listings); an undecodable record goes to DLQTopic only. Empty: not
	// consumed. Default audit.DefaultTopic ("tool-audit").
	AuditTopic string

	// OTLPSpansTopic and OTLPLogsTopic are the OpenTelemetry Collector's
	// Kafka exporter topics (its defaults: "otlp_spans", "otlp_logs"),
	// consumed by the same group beside the calls topic. One record is a
	// batch of the Collector's: package otlp reads its tool calls and the
	// tool definitions the model was given; each call becomes a row, all
	// of a record in one hand-off, so the record's offset is committed
	// behind every decision it yields. A call resolves against the
	// definitions recorded with it (a registry of their own under
	// OTLPRegistry, otlp.DefinitionsRegistry), else against OTLPRegistry
	// in the store; the MCP tools/list results a record holds are produced
	// to ListingsTopic (as OTLPRegistry's) and applied before its calls
	// are decided. A record that is not OTLP goes to DLQTopic. Their
	// records are not archived (ArchiveCalls archives the calls topic).
	// Empty: not consumed (the default).
	OTLPSpansTopic, OTLPLogsTopic string
	// OTLPEncoding is how the records of both are written: otlp.Proto
	// (the exporter's default encoding, otlp_proto) or otlp.JSON
	// (otlp_json). The two are not told apart by sniffing: a protobuf
	// payload may begin with the bytes of JSON's whitespace and brace.
	// Default otlp.Proto.
	OTLPEncoding otlp.Encoding
	// OTLPRegistry is the registry of the calls the OpenTelemetry topics
	// carry; required when one is consumed.
	OTLPRegistry string
	// OTLPLimits bound one record (zero fields: otlp.DefaultLimits).
	OTLPLimits otlp.Limits

	// BatchRows is about the most rows of one sink write, gathered from
	// every assigned partition (a write may exceed it by a worker's
	// hand-off, 255 rows). Two batches are in memory at most: one being
	// written, one filling. Default 100000: ClickHouse's CPU per row
	// falls with the size of an INSERT (on the 1M-call benchmark, 17% less
	// than with 50000, three interleaved pairs of runs), and a batch of
	// decisions without raw arguments is about 45 MB in column form.
	BatchRows int
	// BatchBytes bounds a batch's size (Batch.Size, the bytes its rows
	// take), whatever the rows: with raw arguments kept, a row can be
	// kilobytes. A soft bound: a batch is written once it has reached it,
	// so it may exceed it by one hand-off, and its buffers' capacity by
	// their growth. Default 64 MiB.
	BatchBytes int
	// BatchWait is how long a non-empty batch waits for more rows before
	// it is written: with BatchRows, it sets how stale the store may be
	// behind the stream. Default 1s.
	BatchWait time.Duration
	// BatchIdle writes a batch of at least a tenth of BatchRows early, once
	// no rows were added to it for this long: the stream paused (a backlog
	// was drained, a burst ended), and waiting out BatchWait would only
	// delay its decisions. The tenth keeps a trickle of calls, whose
	// hand-offs come in small gaps, in batches of BatchWait. After a
	// backlog or a burst it saves the last batch's wait, up to BatchWait.
	// The cost: within a backlog, a pause longer than BatchIdle (a slow
	// fetch, the sink holding both batches) writes the batch early, at a
	// tenth or more. Default 50ms; 0 turns it off.
	BatchIdle time.Duration

	// ListingHold aligns the two topics in event time: a call is decided
	// only when every listing that reached Kafka up to ListingHold after the
	// call itself has been applied, so a listing that is late by at most
	// ListingHold still governs the calls emitted after its observed_at.
	// It adds up to ListingHold of latency to each call (plus the
	// ListingsPoll granularity) and never stalls throughput: see the
	// package documentation. 0 disables the wait: calls are decided as soon
	// as the listings topic has been read up to its end once. Default 2s.
	ListingHold time.Duration
	// ListingsPoll is how often the end offsets of the listings and calls
	// topics are listed to track how far the listings have been applied.
	// Default 100ms.
	ListingsPoll time.Duration

	// CheckpointTopic holds checkpoints of the registry store (its state
	// and the listings offsets it covers): a starting instance loads the
	// newest and reads the listings topic from there, instead of from the
	// start (see checkpoint.go). Created when missing (one partition,
	// retention one day). Empty: no checkpoints, every start reads the
	// whole listings topic. Default "tool-listings-checkpoint".
	CheckpointTopic string
	// CheckpointEvery is how often the store is checkpointed, when
	// listings were applied since the last one, and once more at
	// shutdown. Each instance writes its own: set 0 on all but a few to
	// read checkpoints without writing them. Default 10m.
	CheckpointEvery time.Duration

	// AnalysisID, ResolverBuild and PolicyVersion stamp every row.
	// AnalysisID defaults to "live"; PolicyVersion, when empty, is the
	// resolver's policy (resolve.Resolver.Policy: its mode and what else
	// decides, e.g. "strict+formats+approvals(block+tofu)"), the one stamp
	// every path gives the same policy.
	AnalysisID    string
	ResolverBuild string
	PolicyVersion string
	// KeepRawArgs stores the emitted arguments (compact JSON) in every
	// row. Arguments are untrusted and may hold secrets: off by default,
	// rows then keep only their shape and hash.
	KeepRawArgs bool
	// ArchiveCalls stores every record of the calls topic as it was
	// produced in the archive (table call_events), in the same sink write
	// as its decision, so before its offset is committed: what `resolverd
	// reanalyze --source archive` reads once Kafka's retention has
	// dropped the records. The sink's batches must archive (appender.Batch.Archives).
	// The events may hold secrets (see schema/ddl/0006_call_events.sql):
	// off by default.
	ArchiveCalls bool
	// ArgsKey keys every row's args_hash (HMAC-SHA-256, schema.ArgsKey);
	// nil: a plain SHA-256, which lets anyone who reads the table confirm
	// guessed arguments.
	ArgsKey *schema.ArgsKey
	// Resolver decides the calls. The zero value is strict.
	Resolver resolve.Resolver
	// Suggester names, for H1 and M1 rows, the valid tool nearest to the
	// emitted one (Row.SuggestedTool). Nil: the pipeline makes its own;
	// share one with the HTTP API to share its caches.
	Suggester *suggest.Suggester
	// Passthrough switches resolution off: calls are decoded and stored
	// with their identity, context and argument summary, but not resolved
	// (no class, verdict, resolved tool, registry version or digests) and
	// not held for late listings; undecodable records are still MALFORMED
	// and dead-lettered. It is the baseline that measures what resolution
	// costs in the pipeline. Never for production.
	Passthrough bool

	// MaxPartitionBuffer bounds, in record bytes, what the client holds
	// for one partition that its worker has not taken yet; above it the
	// partition's fetching pauses until its worker has drained half of it.
	// It must hold a partition's byte rate times ListingHold, or the hold
	// limits throughput: at the defaults (4 MiB, 2s) a partition's calls
	// are decided at up to 2 MiB/s, about 4,000 calls/s of 500 bytes, after
	// the hold. Memory is about the number of assigned partitions times
	// this, plus FetchMaxBytes, and all of it is work for the garbage
	// collector at full speed: on a 1M-call backlog over 6 partitions,
	// 16 MiB took 38% more CPU than 4 MiB (15.0 s against 10.9 s, one run
	// each). Raise it with the hold or the per-partition rate. Default
	// 4 MiB.
	MaxPartitionBuffer int
	// FetchMaxBytes bounds one fetch response (kgo.FetchMaxBytes).
	// Default 16 MiB.
	FetchMaxBytes int32
	// FetchMaxWait is how long a broker may hold an empty fetch; it also
	// bounds how long a resumed partition waits for its next fetch.
	// Default 500ms.
	FetchMaxWait time.Duration

	// RetryMin and RetryMax bound the exponential backoff between
	// attempts to write to the sink, produce to the DLQ or commit.
	// Defaults 100ms and 5s.
	RetryMin, RetryMax time.Duration
	// DrainTimeout bounds how long a partition worker may take, once its
	// partition is revoked or the pipeline stops, to write and commit the
	// rows it has already decided; what is not committed by then is
	// decided again by the partition's next owner. Keep it well under the
	// group's rebalance timeout (kgo default 60s). Default 10s.
	DrainTimeout time.Duration

	// KafkaOpts are appended to the options of every client the pipeline
	// makes (TLS, SASL, timeouts). Group options are ignored by the
	// listings client.
	KafkaOpts []kgo.Opt
}

// DefaultConfig returns the defaults, without brokers.
func DefaultConfig() Config {
	return Config{
		Group:              "resolverd",
		ClientID:           "resolverd",
		CallsTopic:         schema.TopicCalls,
		ListingsTopic:      schema.TopicListings,
		DLQTopic:           schema.TopicCallsDLQ,
		AuditTopic:         audit.DefaultTopic,
		OTLPEncoding:       otlp.Proto,
		BatchRows:          100000,
		BatchBytes:         64 << 20,
		BatchWait:          time.Second,
		BatchIdle:          50 * time.Millisecond,
		ListingHold:        2 * time.Second,
		ListingsPoll:       100 * time.Millisecond,
		CheckpointTopic:    "tool-listings-checkpoint",
		CheckpointEvery:    10 * time.Minute,
		AnalysisID:         "live",
		MaxPartitionBuffer: 4 << 20,
		FetchMaxBytes:      16 << 20,
		FetchMaxWait:       500 * time.Millisecond,
		RetryMin:           100 * time.Millisecond,
		RetryMax:           5 * time.Second,
		DrainTimeout:       10 * time.Second,
	}
}

// Validate reports every missing or invalid field.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(c.Brokers) == 0 {
		bad("no brokers")
	}
	if c.Group == "" {
		bad("empty group")
	}
	if c.CallsTopic == "" || c.ListingsTopic == "" || c.DLQTopic == "" {
		bad("empty topic name")
	} else if c.CallsTopic == c.ListingsTopic || c.CallsTopic == c.DLQTopic || c.ListingsTopic == c.DLQTopic {
		bad("calls, listings and DLQ topics must differ (%q, %q, %q)", c.CallsTopic, c.ListingsTopic, c.DLQTopic)
	} else if t := c.CheckpointTopic; t != "" && (t == c.CallsTopic || t == c.ListingsTopic || t == c.DLQTopic) {
		bad("checkpoint topic %q is also the calls, listings or DLQ topic", t)
	}
	if c.CheckpointEvery < 0 {
		bad("checkpoint every %v, want >= 0", c.CheckpointEvery)
	}
	if a := c.AuditTopic; a != "" && (a == c.CallsTopic || a == c.ListingsTopic || a == c.DLQTopic || a == c.CheckpointTopic) {
		bad("the audit topic %q must differ from the calls, listings, DLQ and checkpoint topics", a)
	}
	if c.OTLPSpansTopic != "" || c.OTLPLogsTopic != "" {
		if c.OTLPRegistry == "" {
			bad("OpenTelemetry topics consumed without a registry for their calls (OTLPRegistry; resolverd run --otlp-registry)")
		}
		if c.OTLPEncoding != otlp.Proto && c.OTLPEncoding != otlp.JSON {
			bad("unknown OTLP encoding %d", c.OTLPEncoding)
		}
	}
	seen := map[string]bool{}
	for _, t := range []string{c.CallsTopic, c.ListingsTopic, c.DLQTopic, c.CheckpointTopic, c.AuditTopic, c.OTLPSpansTopic, c.OTLPLogsTopic} {
		if t != "" && seen[t] {
			bad("topic %q is given two roles", t)
		}
		seen[t] = true
	}
	if c.BatchRows <= 0 {
		bad("batch rows %d, want > 0", c.BatchRows)
	}
	if c.BatchBytes <= 0 {
		bad("batch bytes %d, want > 0", c.BatchBytes)
	}
	if c.BatchIdle < 0 {
		bad("batch idle %v, want >= 0", c.BatchIdle)
	}
	if c.BatchWait <= 0 {
		bad("batch wait %v, want > 0", c.BatchWait)
	}
	if c.ListingHold < 0 {
		bad("listing hold %v, want >= 0", c.ListingHold)
	}
	if c.ListingsPoll <= 0 {
		bad("listings poll %v, want > 0", c.ListingsPoll)
	}
	if c.AnalysisID == "" {
		bad("empty analysis id")
	}
	if c.Resolver.Mode != resolve.Strict && c.Resolver.Mode != resolve.PinAssisted {
		bad("unknown resolver mode %d", c.Resolver.Mode)
	}
	if c.MaxPartitionBuffer <= 0 {
		bad("max partition buffer %d, want > 0", c.MaxPartitionBuffer)
	}
	if c.FetchMaxBytes <= 0 {
		bad("fetch max bytes %d, want > 0", c.FetchMaxBytes)
	}
	if c.FetchMaxWait <= 0 {
		bad("fetch max wait %v, want > 0", c.FetchMaxWait)
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		bad("retry backoff %v..%v, want 0 < min <= max", c.RetryMin, c.RetryMax)
	}
	if c.DrainTimeout <= 0 {
		bad("drain timeout %v, want > 0", c.DrainTimeout)
	}
	return errors.Join(errs...)
}

// topics are the topics the group consumes.
func (c Config) topics() []string {
	ts := []string{c.CallsTopic}
	for _, t := range []string{c.AuditTopic, c.OTLPSpansTopic, c.OTLPLogsTopic} {
		if t != "" {
			ts = append(ts, t)
		}
	}
	return ts
}

// policyVersion is the PolicyVersion stamped on rows.
func (c Config) policyVersion() string {
	if c.PolicyVersion != "" {
		return c.PolicyVersion
	}
	return c.Resolver.Policy()
}
