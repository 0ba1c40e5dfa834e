// Package sink stores decisions: the batch writers at the end of the
// pipeline, and the schema migrations of the ClickHouse store.
//
// A writer is a batch appender with one method, Write(ctx, rows): it stores
// the whole batch and returns nil only once the store has acknowledged it, so
// the caller may then commit the Kafka offsets of those rows (acks travel
// with the data). The consumer defines its own one-method interface; both
// writers here satisfy it:
//
//   - ClickHouse writes each batch as one native-protocol INSERT into table
//     decisions (see schema/ddl). Safe for concurrent use. A caller that
//     gathers rows over time (the pipeline) appends them to a Batch, which
//     holds them already encoded as the INSERT's columns, and writes that
//     (batch.go): the same INSERT without a slice of rows held in between.
//   - JSONL writes each row as one JSON object per line to an io.Writer
//     (files, --sink jsonl). Safe for concurrent use.
//
// # Errors and retries
//
// A failed Write says whether to retry (errors.go):
//
//   - IsPermanent: the batch can never be written as it is (schema mismatch,
//     bad data). The caller dead-letters it; retrying cannot help.
//   - IsRetryable: the store did not take the batch this time (network,
//     timeouts, server overload, too many parts, connection refused, and any
//     error not known to be permanent). Back off and write the same rows
//     again.
//   - neither: the writer was closed or the caller's context canceled. Stop
//     without acknowledging; Kafka redelivers the records after a restart.
//
// A failed Write may still have been committed by the server (the ack was
// lost). Retrying is safe: an identical batch is dropped by ClickHouse's
// insert deduplication, and a re-decided one (new decided_at) collapses under
// FINAL because the table keeps one row per (analysis_id, call_key). Write
// itself does not retry: the caller owns the backoff, the context and the
// decision to give up.
//
// # Migrations
//
// Migrate creates the database and applies schema.Migrations in order,
// recording each in schema_migrations with its checksum; see migrate.go.
//
// # Reading
//
// Counts and Rows read decisions back with FINAL (exact, deduplicated): for
// tests, the demo and `resolverd report`. Stored counts rows without FINAL,
// an upper bound cheap enough to poll. Dashboards read the
// decisions_by_minute rollup instead.
package sink
