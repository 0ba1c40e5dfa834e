// Package stream is the engine of `resolverd run`: Kafka in, decision rows
// out, offsets committed only behind the sink.
//
// # Topics
//
// The listings topic (default "tool-listings") is read by every instance,
// every partition, by a client outside any group; each listing is decoded
// (schema.DecodeListing; a bad one is logged, counted and skipped) and
// applied to the registry.Store, which keeps the history in event
// time (and, made registry.WithChanges, reports what each batch
// changed: resolverd's registry history). An instance starts from the newest registry checkpoint in
// Config.CheckpointTopic (default "tool-listings-checkpoint": the store's
// state and the listings offsets it covers) and reads each partition from
// where it ends, so start-up does not replay the topic's years; without
// one, from the start. Instances write checkpoints every
// Config.CheckpointEvery and at shutdown (checkpoint.go). Listings that
// arrive after a checkpoint but were observed long before it are applied
// as exactly as by a full replay. The calls topic (default "tool-calls")
// is consumed by a consumer group (default "resolverd") with one worker
// goroutine per assigned partition. Each worker decodes a call
// (schema.CallDecoder), resolves it against the registry version current
// at its emitted_at (resolve.Resolver on store.Snapshot()), and appends a
// schema.Row: CallKey is the event_id, or schema.KafkaCallKey for a record
// without one; arguments are kept as shape and hash, raw only with
// Config.KeepRawArgs. An undecodable record becomes a MALFORMED row and is
// also produced, unchanged, to the DLQ topic (default "tool-calls-dlq")
// with headers error, source-topic, source-partition and source-offset.
// An H1 or M1 row names the valid tool nearest to the emitted one
// (Row.SuggestedTool, package resolve/suggest).
//
// The OpenTelemetry Collector's Kafka exporter topics (Config.OTLPSpansTopic,
// OTLPLogsTopic: off by default) are consumed by the same group and
// workers (otlp.go). A record is a batch of the Collector's: package otlp
// reads its calls and the tool definitions recorded with them, package
// ingest makes them the contract's call events (the same events `ingest
// --format otel` makes of the same export, the same event ids), and each
// is decided into a row of the record's hand-off, so the record's offset
// is committed behind all of them. A call resolves against the
// definitions recorded with it (one registry version per distinct tool
// set, package registry/declared) or else against Config.OTLPRegistry in
// the store, under the hold; the MCP tools/list results a record holds
// are produced to the listings topic and applied before its calls are
// decided; a record that is not OTLP goes to the DLQ.
//
// The audit topic (Config.AuditTopic, default "tool-audit") holds the
// decisions taken in the call path (package audit: POST /v1/resolve, the
// MCP gateway), each produced before its caller was answered. The same
// group consumes it beside the calls topic, with the same workers and
// writer, so its rows are stored exactly once like the stream's. A
// record is not decided again and not held for listings: its decision,
// source, action, resolver build, policy version and decided_at become
// the row; the call bytes it carries give the row the call's identity,
// context and argument summary; its Kafka position is the row's. The
// store keeps one row per (analysis, call key, source), so the stream's
// own decision of the same event, when it arrives through the calls
// topic, is a second row: comparing the two shows what changed between
// enforcement and the stream (`resolverd report --toctou`). A record that does not decode
// (package audit's strict rules) is dead-lettered and makes no row.
//
// # Acks travel with the data
//
// Workers hand their rows, a few hundred at a time, to the pipeline's one
// writer (writer.go) as one value, a hand-off: the rows, the DLQ records
// among them and the position to commit behind them. The writer copies
// what it keeps, so a hand-off belongs to one side at a time. The writer
// gathers the rows of every partition into a batch (Config.BatchRows
// rows, or what it has after Config.BatchWait) and writes it in three
// steps: the batch's bad records to the DLQ, the rows to the
// sink (an appender.Sink), then one commit of the offset after the last record of each
// partition in the batch. Each step is retried with exponential backoff
// (RetryMin to RetryMax) until it succeeds: a failing sink stalls the
// pipeline, never drops or skips a record. One batch is written while the
// next one fills; when that one is full too, workers wait, and while a
// worker is behind its partition's fetching is paused
// (Config.MaxPartitionBuffer), so memory stays bounded. Batches are written
// one at a time, so a partition's committed offset only grows. A sink that
// implements appender.Batcher receives the rows as they are gathered (the
// ClickHouse sink encodes them into the INSERT's columns at once). Delivery
// is at least once: a batch written but not committed (crash, lost
// partition) is decided again, with the same CallKeys, by the partition's
// next owner.
//
// One writer rather than one per partition because ClickHouse's cost per
// row falls steeply with the size of an INSERT (measured on ClickHouse
// 26.7 with this table: about 20 µs of server CPU per row at 5,000 rows
// per INSERT, about 10 µs at 50,000, merges included; on the 1M-call
// benchmark, 17% less again at 100,000), and the rows of all partitions
// together make large inserts whatever the partition count.
//
// # The archive
//
// With Config.ArchiveCalls, a worker also keeps each record's key and
// value (copied into its hand-off's buffer: the client reuses a record's
// memory) as a schema.CallEvent at its window time (schema.WindowTime),
// and the writer appends them to the batch that holds their rows
// (appender.Batch.AppendEvents): the sink stores them (table call_events) in the same Write
// as the rows, so a committed record is archived. A redelivered record is
// archived again, and the table keeps one per position under FINAL.
//
// # Rebalances and shutdown
//
// The group client blocks rebalances while the poll loop hands records to
// workers (kgo.BlockRebalanceOnPoll), which never blocks on a worker. On
// revocation a partition's worker stops deciding, hands what it has
// decided to the writer and waits until it is committed (within
// Config.DrainTimeout), and exits before the callback returns; on loss it
// exits at once. The writer commits a partition's offsets under the lease
// of the worker that decided them; a worker releases its lease as it
// exits, and from then on no commit for it is issued or in flight (the
// partition may have a new owner). Run shuts down in two phases when its
// context ends: stop fetching, drain every worker as on revocation, then
// leave the group and close the clients.
//
// # Event time: ListingHold
//
// A call must be resolved against the listings observed before it was
// emitted, whatever order the two topics deliver in. The hold is read on
// one clock, the listings watermark (watermark.go): the latest wall time T
// such that every listing record produced before T has been applied. Every
// ListingsPoll (default 100ms) a prober lists the listings topic's end
// offsets at time T and, once the listings reader's applied positions
// reach them, the watermark becomes T. No call is decided before the first
// such catch-up; Ready reports it (and the group join).
//
// Config.ListingHold (default 2s) covers listings that reach Kafka late: a
// call that reached Kafka at A is decided only once the watermark >= A +
// ListingHold, so a listing produced up to ListingHold after the calls it
// governs is applied before they are decided. A is bounded from above by
// the time the poll that returned the record ended and by the same
// periodic listing of the calls topic's end offsets (the first listing
// whose end offset exceeds the record's), whichever is earlier. The hold
// is latency, not a stall: a worker waits for the record at the head of
// its queue while fetching goes on behind it, so in steady state calls are
// decided ListingHold (plus ListingsPoll) after they arrive at full
// throughput, provided MaxPartitionBuffer holds ListingHold worth of a
// partition's records; a backlog, whose records arrived long ago, waits
// once at most. ListingHold 0 disables the wait: calls are decided as soon
// as the listings have been read to their end once, and a listing that
// reaches Kafka after its calls were fetched is not seen by them (they
// become H1 or M1). Raise it when toolaudit_stream_listing_lateness_seconds
// shows listings arriving later than the hold.
//
// # Metrics
//
// Under toolaudit_stream_*: decisions_total{class,verdict}, batch_rows,
// flush_seconds, sink_retries_total, commit_errors_total,
// dlq_records_total, consumer_lag{topic,partition} (high watermark from
// fetches minus committed offset), assigned_partitions,
// partition_pauses_total, listings_applied_total, listings_bad_total,
// listing_issues_total, listing_lateness_seconds,
// listings_caught_up_age_seconds; the registry store's size, read at each
// scrape: registries, registry_versions, registry_listings_total,
// registry_duplicate_listings_total, registry_relistings_total,
// registry_points, registry_server_states, registry_definitions,
// registry_contents, registry_bytes; checkpoints:
// registry_checkpoints_written_total, registry_checkpoint_errors_total,
// registry_checkpoint_bytes, registry_checkpoint_loaded. The Kafka clients'
// own metrics are toolaudit_kafka_* (plugin/kprom, label client_id).
package stream
