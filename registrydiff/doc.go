// Package registrydiff computes the registry history: what each listing
// changed about each tool of its server, with a structured diff of the
// tool's definition. It does no I/O.
//
// DiffSchemas compares two inputSchemas (raw JSON, as listings carry
// them) and names, as JSON pointers into the arguments, the properties
// added, removed and retyped, the required set's changes, the enum values
// added and removed, and any other keyword that changed. It walks each
// document once (linear cost), compares numbers by value and objects
// regardless of key order, as the tool digest does, and stops descending
// at a fixed depth, below which a difference is one entry.
//
// Tracker applies listing events in event time, whatever order they
// arrive in, and returns Change rows: a tool added, removed, changed (its
// digest) or only its server's trust changed, at the listing's
// observed_at. When a late listing lands before a later one, the later
// one's rows are returned again, recomputed, and rows that no longer hold
// are returned with Deleted set: a store that keeps the last write per
// (registry, server, tool, observed_at) and drops deleted rows holds the
// same history for every arrival order (TestTrackerAnyOrder). Table
// registry_changes (schema/ddl/0007_analytics.sql) is that store;
// package registryhistory feeds it from resolverd.
package registrydiff
