// Package registryhistory records the registry history as resolverd
// applies listings: a Recorder is told of every applied listing
// (ObserveListings, called by the stream's listings reader), computes what
// each changed (registrydiff.Tracker) and writes the rows to the store
// (table registry_changes) from its own goroutine, so that the listings
// path never waits for ClickHouse.
//
// Delivery. The Tracker sees every listing, so the history it computes is
// right whatever the store does; only the writing of its rows can fall
// behind. Rows wait in a queue of Options.MaxQueued; when it is full, new
// rows are dropped and counted (toolaudit_registry_history_changes_dropped_total):
// the listings path does not block. Failed writes are retried with
// backoff; a write the store can never take (IsPermanent) is dropped and
// counted. Nothing is lost for good: every instance reads the whole
// listings topic at start and writes the whole history again, which the
// table collapses (one row per change, the last written). Rows still
// queued at shutdown are written again by the next start.
//
// Each batch of rows is stamped with a RecordedAt later than the one
// before, so that a row recomputed after a late listing replaces the one
// it corrects.
package registryhistory
