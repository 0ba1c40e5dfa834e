// Package offline resolves files: a listings file builds the registry
// history, then a calls file streams through decode, resolve and encode on
// every core, and decisions come out as JSONL in input order. It is the
// engine of `resolverd check`.
//
// Memory is bounded by the chunks in flight, not by the size of the calls
// file: a million calls pass through a few megabytes.
package offline
