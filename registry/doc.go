// Package registry keeps the registry history: the one
// event-time history of every registry. Listing events are applied in
// event time, whatever order they arrive in; At(registry, t) returns the
// Version that was current at t (spec v1: for each server, its latest
// snapshot with observed_at <= t, unless a later remove, still <= t,
// dropped it), and a store made WithChanges reports what each listing
// changed about each tool (Change), which is the history as table
// registry_changes holds it (package registry/diff describes a change,
// package registry/history writes them).
//
// Versions are content-addressed: a Version's ID is a hash of its servers,
// trust tiers and tool digests, so it is stable across processes, restarts
// and arrival orders, and a listing that changes only descriptions keeps
// the version. Tool digests are the contract's (schema.Digest).
//
// # A fleet relists: the history is points and spans, not events
//
// Every host session lists its servers' tools, so almost every listing
// repeats what the registry has. The store keeps no event: per server, a
// point per listed instant (observed_at and the listed content, interned:
// 16 bytes), and spans, the runs of equal content, each with its own
// ServerState; definitions are interned by digest (compiled once) and
// server contents by a hash of trust, names and digests. A listing is
// identified by (registry, server, observed_at, content): a redelivered or
// repeated one is a no-op without remembering event ids, and an unchanged
// relisting at a new instant adds a point and nothing else (no version is
// built or published: cost linear in the listing's size, independent of
// the history's). A change rebuilds only the versions of the interval it
// affects, up to the server's next listing: one version when it is the
// newest listing, O(size + log history). Drift is per span (a tool drifts
// when a later span of its server drops it or changes its digest) and set
// in place as later listings arrive.
//
// Two listings of one server at the same instant with different contents
// (the contract is silent) resolve by content, not by event id, so the
// outcome does not depend on arrival order or ids: a remove wins, else the
// greater content hash.
//
// Points of unchanged relistings matter only to a listing that arrives
// late and lands just before them, so they are kept only within a late
// window (WithLateWindow, default 24h) behind their server's newest
// listing: memory is proportional to distinct definitions and versions
// plus the relistings of the last window. A listing later than that is
// still applied, but a change it brings holds until the server's next
// retained point instead of its next relisting.
//
// # Changes
//
// A store made WithChanges reports, after each Apply, per tool of each
// server, the digest and trust before and at every listing the call
// added, and at the next listing of the server, whose predecessor it
// changed: recomputed, and deleted where nothing changes there any more.
// A table keeping the last report per (registry, server, tool,
// observed_at) holds the same history for every arrival order. The
// changes are those of the points the store keeps (the late window
// applies to them as to versions), named by the greatest event_id of the
// content that stands at the instant; the store then keeps an event_id
// per point, and loads no checkpoint (it holds no listing before it). A
// tool the store skips (its inputSchema not JSON or not compilable,
// reported as an Issue) is in no change either: the history is that of
// the registry the resolver decides on.
//
// # Checkpoints
//
// AppendCheckpoint writes everything the store keeps (definitions with
// their raw inputSchema, contents, every registry's points) and
// LoadCheckpoint rebuilds a store from it (digests recomputed, signatures
// compiled, versions and drift rebuilt): a loaded store applies any later
// listing, however late in event time, as the writer would. Because
// applying a listing twice changes nothing, a checkpoint plus every
// listing from the offsets it covers (some of them possibly already in
// it) is the whole history; package stream keeps checkpoints in Kafka so
// that an instance does not replay the listings topic at start-up.
//
// Readers never lock: each registry's versions are published atomically,
// per registry (applying a listing does not copy other registries), and a
// Snapshot is a view of the registry directory, which only grows. The
// package does no I/O.
package registry
