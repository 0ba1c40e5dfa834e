// Package history writes the registry history to table
// registry_changes as resolverd applies listings. The history is the
// registry store's: a store made registry.WithChanges(
// r.ObserveChanges) reports to the Recorder what each applied batch of
// listings changed (recomputed, or deleted, where a late listing landed
// before them); the Recorder queues the changes and, from its own
// goroutine, describes them (diff.Describe: the schema diff) and
// writes them, so that the listings path never waits for ClickHouse.
//
// Delivery. The store sees every listing (it loads no checkpoint), so the
// history it reports is right whatever the table does; only the writing
// of the rows can fall behind. Rows wait in a queue of Options.MaxQueued;
// when it is full, new rows are dropped and counted
// (toolaudit_registry_history_changes_dropped_total): the listings path
// does not block. Failed writes are retried with backoff; a write the
// table can never take (appender.IsPermanent) is dropped and counted.
// Nothing is lost for good: every instance reads the whole listings topic
// at start and writes the whole history again, which the table collapses
// (one row per change, the last written). Rows still queued at shutdown
// are written again by the next start.
//
// Each batch of rows is stamped with a RecordedAt later than the one
// before, so that a row recomputed after a late listing replaces the one
// it corrects.
package history
