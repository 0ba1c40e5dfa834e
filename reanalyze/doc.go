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
// KafkaSource reads each partition of the calls topic as it stood when
// the run started (calls produced later are not read: give a To in the
// past), from the first record stamped at or after From - Horizon (kadm's
// ListOffsetsAfterMilli: every record before it is stamped earlier) until
// Confirm calls in a row emitted at or after To + Horizon have been read,
// or to the partition's end. It decodes each record's emitted_at as it
// reads, so record timestamps decide only where a partition's read
// starts: a record stamped at ingestion (an unusable emitted_at), by a
// producer hours off, or not at all cannot end a read early. A call
// without a usable emitted_at neither counts towards the run nor breaks it
// unless it is placed (by its record's timestamp) before To + Horizon.
//
// The read holds every call of the window when, in every partition, (a)
// no call of the window is stamped more than Horizon before its
// emitted_at and placed before the read's start, and (b) none comes after
// Confirm calls in a row emitted at or after To + Horizon. Neither can be
// checked without reading the whole partition, so the source checks what
// it reads and reports (KafkaSource.Report), per partition, the offsets
// read, the calls in the window, the records outside it, the widest
// disorder (a call's emitted_at behind the latest before it) and the
// widest early stamp; a partition is unproven, naming offsets, when its
// records before the read's start were deleted (retention, DeleteRecords)
// while the read starts at its first record held, or when a record read is
// stamped more than Horizon before its call's emitted_at (one so stamped
// before the start would not be read). The Runner keeps only the calls of
// the window among what is read, so margins cost reading, never a wrong
// call. Records deleted while they are read fail the run (ErrTruncated).
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
