// Package suggest tells the caller of a rejected tool call how to correct
// it (wire contract v1.1, "hints"): for H1 and M1 the valid names of the
// registry version nearest to the emitted one, qualified server__tool
// where a pin is needed; for H2 the declared keys nearest to an
// undeclared one and the required keys missing; for H3 what the schema
// expects at the failing path (type, enum, range, length, pattern); for
// M2 and M3 the qualified names to pin. H5 gets none: its decision's
// reason names the tool the arguments fit, and under contract v1.2 only a
// call carrying a key the named tool does not declare is H5; one that
// only misses a required key or has a wrong value is H2 or H3 and gets
// the missing keys or the expected value, never "fits another tool" (a
// client that forgot write_file's content was told its call fit
// create_directory). The nearest name of an H1 or M1
// call is also stored with its decision (schema.Row.SuggestedTool), which
// tells a near miss from an invention.
//
// It is the one home of suggestions: the HTTP API's hints, the stream's
// suggested_tool and the MCP gateway's errors all come from here.
//
// # Names
//
// Names are compared after normalisation: case folded; the prefixes
// "functions.", "default_api.", "mcp__" and "mcp_" and a connected server's
// "server__" or "server/" dropped; words split at separators (_ - . /
// space) and camelCase, each made singular (a trailing s, es or ies),
// and joined without separators. Two names match within an edit distance
// (insertions, deletions, substitutions and transpositions of adjacent
// characters, on the normalised forms) of a quarter of the name's
// length, at least 1 and at most 2, so "create_issues", "CreateIssue" and
// "functions.create_isue" all find "create_issue", while "wipe_disk"
// finds nothing in a registry of file tools. At most MaxNames names are
// returned, nearest first.
//
// # Cost
//
// Suggestions are computed only for rejected calls, and a storm of them
// must not cost much more than the calls it rejects. Per registry version
// an index of its normalised names is built once (kept in an LRU by
// version id, which is content-addressed); a query scans only the names
// whose length is within the distance, skips those whose character
// counts differ by more than the distance allows (an edit changes them by
// at most one up and one down), and computes the distance in a band of its
// bound, stopping as soon as a row exceeds it. In a version of more than
// 256 names, answers are kept in an LRU by (version id, pin, name), so a
// repeated wrong name costs one lookup; a smaller one is searched faster
// than a cache is kept up.
// What the schema expects at a failing path is the compiled signature's
// answer (signature.Signature.Expect), the one reading of the schema that
// checking uses too, so a hint cannot drift from the check that refused
// the call; its walk follows at most 16 schema nodes at a time and 32
// references, so a recursive or combinatorial schema costs no more. Key
// names are normalised once per tool digest (another LRU). The measured
// costs are in BenchmarkStorm.
//
// A Suggester is safe for concurrent use.
package suggest
