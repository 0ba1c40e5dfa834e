// Package sink stores decisions in ClickHouse: the batch writer at the end
// of the pipeline, the schema migrations of the store, and the reads that
// tests, the demo and `resolverd report` make.
//
// The writer is a batch appender (package appender, the contract of a
// store of decisions): Write(ctx, rows) stores the whole batch and returns
// nil only once the store has acknowledged it, so the caller may then
// commit the Kafka offsets of those rows (acks travel with the data).
// ClickHouse writes each batch as one native-protocol INSERT into table
// decisions (see schema/ddl) and is safe for concurrent use. A caller that gathers rows over time (the pipeline) appends them to
// a Batch, which holds them already encoded as the INSERT's columns, and
// writes that (batch.go): the same INSERT without a slice of rows held in
// between. The columns, their types and the Row fields they store come
// from one table, schema.Columns.
//
// Files of decisions are what `resolverd check` writes (schema.Decision's
// JSON lines); there is no file sink for the pipeline, whose guarantee
// (one decision per call, read with FINAL) rests on the table's
// deduplication.
//
// # Errors and retries
//
// The contract every writer of decisions keeps, and every caller writes
// through, is package appender's: a Batcher (ClickHouse.Appender), and
// the one rule for an error that retrying cannot fix,
// appender.IsPermanent. A failed Write says whether to retry (errors.go):
//
//   - appender.IsPermanent: the batch can never be written as it is
//     (schema mismatch, bad data; the write marks it as a *Permanent).
//     Retrying cannot help: the pipeline stops, the re-analysis fails, the
//     registry history drops the batch.
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
// an upper bound cheap enough to poll; RolledUp what the hourly rollup has
// counted; Sources lists an analysis's sources. Diff compares two
// analyses call by call (`resolverd diff`). Dashboards and the analytics
// of `resolverd report` read the rollups of migration 0007 instead
// (package analytics).
//
// # The registry history
//
// WriteRegistryChanges stores what each listing changed (table
// registry_changes, rows of package registry/diff) and RegistryChanges
// reads it back with FINAL, for `resolverd registry diff`.
//
// # The archive
//
// With `resolverd run --archive-calls`, a Batch also holds the call
// records of its rows (AppendEvents), written to table call_events in the
// same Write, before the decisions: an acknowledged Write means both are
// stored. CallEvents reads a window of them back (the re-analysis beyond
// Kafka's retention), CheckArchive checks the table at start; see
// archive.go and schema/ddl/0006_call_events.sql.
package sink
