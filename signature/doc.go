// Package signature compiles a tool's inputSchema into a checker for call
// arguments under the closed-world rules of the wire contract (spec v1.2,
// "Resolution rules" 3 to 5), reading the schema as JSON Schema 2020-12,
// MCP's default dialect (draft 7's spellings are read too: an items array,
// additionalItems, dependencies, a fragment $id):
//
//   - a number with zero fraction is an integer, integers are numbers, and
//     nothing is coerced ("5" is not an integer: the failure says it is
//     coercible);
//   - null passes only where the schema allows null;
//   - format is an annotation unless Options.Formats asserts it; lengths
//     count code points; patterns are ECMA-262's.
//
// Every keyword of the applicator, validation and unevaluated vocabularies
// is enforced, with $anchor, embedded $id resources, $dynamicRef along the
// dynamic scope, and references whose JSON pointer fragment is
// percent-encoded (RFC 6901 §6), all within the one schema document.
//
// # The closed world, composed
//
// The top level, and every schema that declares keys by name, rejects
// undeclared keys (H2), as if it had "additionalProperties": false, unless
// it says otherwise (rule 3):
//
//   - a schema declares keys by name by properties (even empty), and
//     through its if, then, else and dependentSchemas branches, whose
//     properties (and their own branches') are declared by the schema they
//     belong to: they constrain that object's keys;
//   - patternProperties alone closes nothing: below the top level a schema
//     without properties is open, as JSON Schema reads it, and a key no
//     pattern matches is free there (its own patterns, and its branches',
//     still check the keys they match); where a schema is closed, a key a
//     pattern matches is declared;
//   - propertyNames neither declares, opens nor closes: a key it refuses
//     fails (H2) wherever the schema is;
//   - such a branch is itself never closed by default, nor is the
//     condition of if: closing them would refuse the object's other keys,
//     or change which branch applies;
//   - a schema with additionalProperties follows it; a schema with
//     unevaluatedProperties follows it instead of the default, and so do
//     its allOf, anyOf and oneOf branches (unevaluatedProperties closes
//     the whole composition, JSON Schema's own idiom);
//   - nothing under an odd number of nots is closed by default: closing
//     there would make not pass more;
//   - allOf, anyOf and oneOf branches elsewhere are schemas like any other:
//     one that declares properties is closed (a value passes anyOf or oneOf
//     when a branch passes under these same rules).
//
// A failure is a key failure (H2: undeclared or missing required key,
// dependentRequired, a key propertyNames refuses) or a value failure (H3).
// A key failure anywhere wins over a value failure, as the contract orders
// H2 before H3.
//
// # Fail closed
//
// What the checker cannot enforce as written is reported by Compile
// (Signature.Unsupported, with Unchecked set) and is never an open door: a
// reference that leads outside the document or nowhere, a pattern RE2
// cannot run (lookaround, backreferences) or that would cost too much per
// byte, a keyword of another draft ($recursiveRef), a keyword whose value
// is not valid JSON Schema. A value that reaches such a part fails with
// kind Unchecked (H3, the reason beginning "not enforced:", NotEnforced),
// unless something else fails definitely; combinators are three-valued
// (an anyOf passes if a branch passes, a not of an unchecked branch is
// unchecked, if both then and else pass a value whose condition cannot be
// decided, it passes). A value that does not reach it is decided exactly.
// Parts that can only refuse more (an unknown type name, a $ref cycle, the
// OpenAPI keyword nullable) are reported without Unchecked.
//
// Checking walks an already parsed value (package jsontape) and does not
// allocate unless it fails, or the node has unevaluatedProperties or
// unevaluatedItems (one slice of the object's size).
//
// Schemas and arguments are both hostile input. Compile is linear in the
// schema and detects $ref cycles that consume no data (they match no
// value: cycles.go). A check is bounded by a step budget proportional to
// the arguments' size (walk in check.go), so a schema whose checking would
// cost the product of two sizes, or grow exponentially with the data's
// depth, fails "too costly" (H3) instead of running on; uniqueItems,
// large enums and required lists are checked by hash, not pairwise.
package signature
