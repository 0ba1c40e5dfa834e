// Package registryversions keeps the time-indexed history of every
// registry: listing events are applied in event time, whatever order they
// arrive in, and At(registry, t) returns the immutable Version that was
// current at t (spec v1: for each server, its latest snapshot with
// observed_at <= t, unless a later remove, still <= t, dropped it).
//
// Versions are content-addressed: a Version's ID is a hash of its servers,
// trust tiers and tool digests, so it is stable across processes, restarts
// and arrival orders, and a listing that changes only descriptions keeps
// the version. Tool digests follow the contract: sha256 over the RFC 8785
// canonical JSON of {"inputSchema":…,"name":…}. Compiled signatures are
// shared through an LRU keyed by digest, so a tool seen in a thousand
// versions is compiled once.
//
// Readers never lock: Snapshot returns an immutable view; writers publish a
// new view after each Apply. The package does no I/O.
package registryversions
