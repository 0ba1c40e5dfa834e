// Package approvals holds the approved baseline of tool definitions (the
// contract verifier): per registry, server and tool, the definitions
// (contract digests: name and inputSchema, rule 8) that someone reviewed
// and approved or rejected, who did and when, and the policy that says
// what a call to a tool whose current definition is not approved gets.
//
// The baseline is built from approval events (Event), applied in order;
// every instance of a fleet reads the same events from one compacted,
// single-partition topic (docs/design.md, "Approved definitions"), so
// every instance holding the events up to offset N has baseline version
// N and answers the same. A Baseline is an immutable snapshot: whether a
// digest is approved is one map lookup (Baseline.Lookup, Gate.Check).
//
// A lockfile (WriteLock, ReadLock) is the baseline as a deterministic
// text file, one JSON object per line sorted by key, that can live in a
// repository and be reviewed in a pull request; it round-trips.
//
// The package does no I/O beyond the readers and writers it is given.
package approvals
