// Package format asserts the JSON Schema 2020-12 formats (validation
// §7.3) MCP servers use: date-time, date, time, email, hostname, ipv4,
// ipv6, uri, uri-reference, uuid and regex. 2020-12 makes format an
// annotation by default; this package is the assertion, for a caller
// that has chosen it.
//
// Lookup returns a Checker by format name, once per schema, so that a
// check is a plain call. Each checker reads ASCII strictly by the RFC's
// grammar (the doc comment of each says which rule and which choices),
// in one pass, linear in the string and without allocating on any path
// (regex aside: it translates the pattern with package ecmare);
// TestNoAllocs holds the valid path to that.
//
// Deliberately not implemented:
//
//   - the other 2020-12 formats (idn-email, idn-hostname, iri,
//     iri-reference, uri-template, json-pointer, relative-json-pointer,
//     duration): Lookup reports them unknown, and the caller decides;
//   - the rest of IDNA2008 for an "xn--" label (its exact code point
//     table, the contextual and bidi rules): only its Punycode and the
//     checks named at Hostname;
//   - which days had leap seconds: second 60 is valid at 23:59 UTC on any
//     day, as JSON Schema's test suite expects;
//   - RFC 5322's obsolete and commented address forms, general address
//     literals, and any non-ASCII address (that is idn-email);
//   - scheme-specific rules of a URI (an "http" URI with an empty host is
//     valid RFC 3986), and RFC 6874 zones in IPv6 literals.
//
// The choices where the RFCs leave one: a hostname may end with one dot
// (the root); an IPv4 decimal has no leading zero; an email's Domain
// follows the hostname rules (labels up to 63 octets, "xn--" labels
// Punycode) without the trailing dot; "regex" is any pattern that is
// valid ECMA-262 as package ecmare reads it, including those RE2 cannot
// run (lookaround, backreferences).
package format
