// Package resolve decides one tool call against the registry version that
// was current when the call was emitted: closed-world name resolution, MCP
// provider resolution, digest checks and argument checks, classified by
// the taxonomy of the wire contract (spec v1, v1.2).
//
// Checks run in the contract's order and the first failure is the class:
//
//	MALFORMED (decoding, see schema)
//	name: H1 (single registry) or M1, M2, M3 (named servers)
//	M4    seen_digest differs from the current definition, or (under an
//	      approvals policy of block) the current definition is not
//	      approved
//	M5    arguments fail the resolved tool but fit the same name elsewhere
//	H5    arguments fail the resolved tool, carry a key it does not
//	      declare, and fit another tool
//	H2    undeclared or missing required key
//	H3    a value violates type, enum, range, pattern or length
//	H4    the tool is not on the agent's visible frontier
//	OK
//
// H5 needs the evidence of a borrowed shape (contract v1.2, rule 6): a key
// the resolved tool does not declare where rule 3 closes an object. A call
// that only misses a required key or has a wrong value is H2 or H3 even
// when another tool of the version accepts its arguments: in registries of
// hundreds of tools some unrelated tool accepts nearly any small object.
// M5 (the same name on another server accepts) needs no such evidence.
//
// Resolution is pure (no I/O, no locks) and does not allocate on the OK
// path; a Resolver is safe for concurrent use.
package resolve
