// Package check is `resolverd check`'s engine: it resolves files. A
// listings file builds the registry history, then a calls file streams
// through decode, resolve and encode on every core, and decisions come
// out as JSONL in input order.
//
// Memory is bounded by the chunks in flight, not by the size of the calls
// file: a million calls pass through a few megabytes. Hostile lines are
// bounded too: a line longer than MaxLine is one MALFORMED decision, at
// most MaxInFlight bytes of lines are in flight, lines longer than
// LongLine are decoded one at a time by a shared decoder (a line's tape
// costs up to 8 bytes per byte), and Workers is at most MaxWorkers: a
// 15 MB line is decided in under 200 MiB of RSS, four of them in under
// 300 MiB, whatever the number of workers.
package check
