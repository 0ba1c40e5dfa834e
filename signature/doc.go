// Package signature compiles a tool's inputSchema into a checker for call
// arguments under the closed-world rules of the wire contract (spec v1,
// "Resolution rules" 3 to 5):
//
//   - the top-level object, and every object node that declares
//     properties, rejects undeclared keys unless additionalProperties is
//     true or a schema; object nodes without properties are free-form;
//   - a number with zero fraction is an integer, integers are numbers, and
//     nothing is coerced ("5" is not an integer: the failure says it is
//     coercible);
//   - null passes only where the schema allows null;
//   - format is an annotation; lengths count code points.
//
// A failure is a key failure (H2: undeclared or missing required key) or a
// value failure (H3). A key failure anywhere wins over a value failure, as
// the contract orders H2 before H3.
//
// Checking walks an already parsed value (package jsontape) and does not
// allocate unless it fails. Keywords the checker does not implement are
// reported by Compile (Signature.Unsupported), never silently ignored.
//
// Schemas and arguments are both hostile input. Compile is linear in the
// schema and detects $ref cycles that consume no data (they match no
// value: cycles.go). A check is bounded by a step budget proportional to
// the arguments' size (walk in check.go), so a schema whose checking would
// cost the product of two sizes, or grow exponentially with the data's
// depth, fails "too costly" (H3) instead of running on; uniqueItems,
// large enums and required lists are checked by hash, not pairwise.
package signature
