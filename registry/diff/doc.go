// Package diff says what a change of a tool's definition is: the
// structured diff of two inputSchemas, and the row of table
// registry_changes for a change the registry store reports. It keeps no
// state and does no I/O; the history itself is registry' (see
// registry.WithChanges), and package registry/history writes it.
//
// DiffSchemas compares two inputSchemas (raw JSON, as listings carry
// them) and names, as JSON pointers into the arguments, the properties
// added, removed and retyped, the required set's changes, the enum values
// added and removed, the parts that become unenforceable (or enforceable
// again), and any other keyword that changed. It walks each document once
// (linear cost), compares numbers by value and objects regardless of key
// order, as the tool digest does, and stops descending at a fixed depth,
// below which a difference is one entry.
//
// Describe turns a registry.Change (a tool's digest and trust
// before and after a listing) into a Change row: its Kind (added,
// removed, changed, or only its server's trust), the diff and a
// one-line summary.
package diff
