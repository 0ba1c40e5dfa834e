package registrydiff

import (
	"cmp"
	"slices"
	"time"
)

// Kind is what happened to a tool of a server at a listing.
type Kind string

// The kinds of change.
const (
	// Added: the tool appeared (the server connected, or listed it anew).
	Added Kind = "added"
	// Removed: the tool is gone (a snapshot without it, or the server left).
	Removed Kind = "removed"
	// Changed: the tool's digest (name and inputSchema) changed.
	Changed Kind = "changed"
	// Trust: only the server's trust tier changed, which decides shadowing.
	Trust Kind = "trust"
)

// Change is one row of the registry history: what a listing observed at
// ObservedAt changed about one tool of one server (table
// registry_changes).
type Change struct {
	Registry, Server, Tool string
	ObservedAt             time.Time
	// EventID is the listing that made the change.
	EventID string
	Kind    Kind
	// TrustBefore and TrustAfter are the server's trust before and after
	// (0 where it was not connected).
	TrustBefore, TrustAfter int
	// DigestBefore and DigestAfter are the tool's digests ("" where it
	// did not exist).
	DigestBefore, DigestAfter string
	// Diff is the structured diff of the inputSchema (for Added, against
	// the empty schema: its properties; for Removed, to it).
	Diff SchemaDiff
	// Summary is one line for tables: the kind and the diff's summary.
	Summary string
	// Deleted: no change happens at this key any more (a late listing
	// moved it); the store drops the row.
	Deleted bool
	// RecordedAt orders the writes of one key: the last one stands.
	// Set by the writer.
	RecordedAt time.Time
}

// Key is what identifies a row: the store keeps the last write of each.
type Key struct {
	Registry, Server, Tool string
	ObservedAt             time.Time
}

// Key returns c's key.
func (c *Change) Key() Key {
	return Key{Registry: c.Registry, Server: c.Server, Tool: c.Tool, ObservedAt: c.ObservedAt}
}

// SortChanges orders changes by registry, server, time and tool.
func SortChanges(cs []Change) {
	slices.SortFunc(cs, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Server, b.Server),
			a.ObservedAt.Compare(b.ObservedAt), cmp.Compare(a.Tool, b.Tool))
	})
}
