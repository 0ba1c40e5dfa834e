// Package jsontape is the strict, single-pass JSON parser of every event
// toolaudit reads from outside: call and listing events, their arguments
// and the inputSchemas of listed tools. All of them are attacker-controlled,
// so the parser's first job is to answer every input in bounded time and
// memory, and its second to give each event exactly one reading.
//
// Parse accepts exactly RFC 8259 JSON text (one value with optional
// surrounding whitespace; FuzzParse checks it against encoding/json.Valid)
// and in addition rejects:
//
//   - invalid UTF-8 anywhere (the reason names the byte offset): a byte
//     that is silently replaced by U+FFFD makes two different events read
//     the same, and an event id that cannot be matched back to its call;
//   - nesting deeper than MaxDepth levels;
//   - an object that repeats a member name, names compared after
//     unescaping ("a" and "\u0061" are one name), with the JSON pointer of
//     the repeat: parsers disagree on which copy wins, so an event with a
//     repeated member could be checked with one value and executed with
//     the other (wire contract rule 9);
//   - input of MaxSize bytes or more.
//
// A lone UTF-16 surrogate escape ("\ud800") is valid JSON text; its
// unescaped form is U+FFFD, as encoding/json decodes it.
//
// The result is a tape, as in simdjson: one flat slice of 16-byte entries,
// one per value (a member name is an entry too), in document order. A
// container's entry holds the index just past its last descendant, so a
// walk skips a whole subtree in one step. Strings without escapes are
// views of the input; escaped strings are unescaped once, during the
// parse, into one buffer. Numbers are kept as text and converted when
// read. Parsing is iterative (an explicit stack of at most MaxDepth open
// containers), never recursive on the data, and allocates nothing once
// the tape's buffers have grown to the size of the input.
//
// Cost: time linear in the input (repeated names are found with a
// comparison for small objects and a hash table, reused, for large ones,
// unless their names take distinct bits of a set by length and first
// eight bytes); memory at most 16 bytes of tape per value plus the
// unescaped strings. A value takes at least two bytes of input ("1," in
// an array), so the tape is at most 8 times the input and the whole parse
// at most 9 times (typical events: about 2 times).
//
// A Value is a tape and an index: it is valid until the tape's next
// Parse, and reading it never allocates.
package jsontape
