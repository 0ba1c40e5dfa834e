// Package reanalyze decides the calls of a past window again, under a new
// analysis id, beside the live decisions: `resolverd reanalyze`. Analysts
// use it after a resolver upgrade, a policy change (strict to
// pin-assisted) or an incident, then compare the two analyses (`resolverd
// diff`).
//
// # What it decides
//
// Every call of the calls topic whose window time is in [From, To)
// (schema.Window): its emitted_at, or, for an event without a usable one
// (MALFORMED), its record's timestamp (schema.WindowTime). Each is
// decided against the registry version at its emitted_at, built from the
// whole listings topic as it stands when the run starts (LoadListings):
// listings that reached Kafka later than the live pipeline's hold count
// here, so a re-analysis may differ from the live decision where the live
// one missed a late listing. The rows are those of the pipeline
// (resolve.RowDecider: same call key, context and argument summary), with
// source "reanalysis", the run's analysis id, resolver build and policy
// version, and the record's topic, partition and offset. An undecodable
// record is a MALFORMED row, as live; it is not dead-lettered again.
//
// Idempotent: the table keeps one row per (analysis_id, call_key,
// source) under FINAL, so running the same analysis again, whole or after
// a failure, leaves one decision per call.
//
// # Sources
//
// KafkaSource reads the calls topic by timestamp. For each partition it
// lists, with kadm's ListOffsetsAfterMilli, the first offset whose record
// timestamp is at or after From - Skew and the first at or after To +
// Skew, and reads the offsets between them as they stood when the run
// started (calls produced later are not read: give a To in the past).
// Kafka's record timestamps are the producers' clocks (ingest stamps each
// record with the call's emitted_at; a live producer, its send time), so
// the window's calls are all read when, in every partition, (a) no
// record's timestamp is more than Skew before its call's emitted_at, and
// (b) no record's timestamp is more than Skew after the emitted_at of a
// call after it. The Runner keeps only the calls of the window among
// what it reads, so the margin costs reading, never a wrong call; and it
// reports the widest gap it saw (Summary.Skew), so that a Skew too narrow
// for the producers shows. A partition whose oldest records were deleted
// (retention, DeleteRecords) and whose first record still held is the
// window's first is refused (ErrTruncated): the deleted ones may have
// been in the window.
//
// ArchiveSource reads the archive (table call_events, written by
// `resolverd run --archive-calls`): the records as they were produced,
// selected by their window time exactly, whatever Kafka still holds. Why
// a table and not files: it is written by the pipeline's own sink in the
// same flush as the decisions, so exactly the committed records are
// archived, deduplicated like the decisions; ClickHouse compresses,
// expires (TTL) and guards it (GRANT) with no new moving part; and a
// window is a range of its sort key. Files (JSONL, Parquet) would need a
// writer of their own beside the sink, rotation, deduplication and access
// control; ClickHouse exports a window to either when needed (INTO
// OUTFILE, the s3 table function).
//
// # Throughput
//
// The calls of a window are independent once the history is loaded, so
// Config.Workers goroutines (every core) decide the records as the source
// reads them, with no consumer group, no offsets to commit and no hold.
// Their rows go, a thousand at a time, into one batch of BatchRows rows
// (encoded at once by sink.Batch), written while the next one fills: two
// batches at most, so memory is bounded and the reading pauses when the
// store is slower than the deciding. A failed write is retried with
// backoff (RetryMin to RetryMax) for up to RetryFor, then the run fails.
package reanalyze
