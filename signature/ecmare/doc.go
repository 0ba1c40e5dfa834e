// Package ecmare translates an ECMA-262 regular expression, the dialect of
// JSON Schema's pattern and patternProperties (2020-12 core §6.4), into a
// Go regexp (RE2) pattern that matches the same strings, or says which
// construct it cannot translate. The edition is ES2020 (11th), the one
// current when 2020-12 was published: named groups, lookbehind and \p
// (ES2018) are in, the later modifiers (?i:..) and the v flag are not.
//
// # Dialect accepted
//
// The syntax is ECMA-262's in unicode mode (the u flag), which is what
// JSON Schema's test suite expects (\p{Letter} is a property, the
// pattern "🐲*" repeats one code point), with a few leniencies of
// ECMA-262 Annex B whose meaning is unambiguous and which real schemas
// use:
//
//   - "{" and "}" that do not form a quantifier, and a lone "]", are
//     literals ("a{", "{x}", "x]");
//   - a backslash before any character that is not an ASCII letter or
//     digit is that character ("\-", "\@", "\é");
//   - a class escape at either end of a range in a class makes the "-"
//     a literal ("[\w-.]" is \w, "-" and ".").
//
// No flags apply (JSON Schema gives none): matching is case-sensitive,
// "^" and "$" match only at the start and end of the input, "." matches
// any code point but the line terminators \n, \r, U+2028 and U+2029.
// Matching is by code point: a surrogate pair written \uD83D\uDE00 is
// one code point, \u{1F600} too; a lone surrogate matches nothing (a Go
// string of valid UTF-8 holds none).
//
// The classes are ECMA-262's: \d, \w and \b are ASCII ([0-9],
// [A-Za-z0-9_]), as RE2's are; \s is ECMA's WhiteSpace and
// LineTerminator, where RE2's is ASCII only: TAB, LF, VT, FF, CR, SPACE,
// U+00A0, U+1680, U+2000 to U+200A, U+2028, U+2029, U+202F, U+205F,
// U+3000 and U+FEFF; \S, \D, \W are their complements, inside classes
// too.
//
// \p{..} and \P{..} accept ECMA-262's names exactly (case-sensitive):
// a General_Category value or alias, lone or as General_Category=/gc=
// (Letter, L, Lu, digit, punct ...), Script=/sc= with a script's full
// name as Go's unicode package spells it (Greek, Latin), and the binary
// properties Any, ASCII and Assigned. The tables are Go's (Unicode
// 15.0.0 for Go 1.26).
//
// # Errors
//
// Translate fails with an *Error whose Kind says why:
//
//   - Unsupported: valid ECMA-262 that RE2 cannot express: lookahead
//     (?= (?!, lookbehind (?<= (?<!, backreferences \1 \k<name>,
//     repetition counts above 1000 (RE2's limit), Script_Extensions,
//     script names Go's tables lack (short aliases such as sc=Grek,
//     scripts newer than Unicode 15.0; without Unicode's alias table a
//     misspelt script is refused so too), binary properties other than the
//     three above (Alphabetic, Emoji ...), scripts Go's regexp cannot
//     name (those with "_" in their name, such as Old_Italic: Go 1.26
//     canonicalizes the name and misses the table), escapes in group
//     names, groups nested deeper than 1000.
//   - Syntax: not a pattern of the dialect above. Deliberately so for the
//     constructs of other dialects that ECMA-262 lacks, or reads
//     differently only under Annex B, which would otherwise be run with
//     another meaning than their author's: \A \Z \z \G \Q \E \a \e \h
//     \R and every other escape of an ASCII letter or digit ECMA-262 does
//     not define, inline flags (?i) (?i:..), (?P<n>..), atomic groups
//     (?>..), comments (?#..), possessive quantifiers a*+, legacy octal
//     escapes (\01, [\1]).
//
// POSIX classes do not exist in ECMA-262: "[[:alpha:]]" is the class of
// "[", ":", "a", "l", "p", "h" followed by a literal "]", and translates
// so.
//
// The caller then fails closed: a pattern it cannot enforce is refused,
// never run with another meaning. An Unsupported error means the pattern
// is valid ECMA-262, which is what JSON Schema's "regex" format asks.
//
// # Cost
//
// Translate is one pass over the pattern: time and memory linear in its
// length (BenchmarkTranslateLong compares 1 KiB with 64 KiB), the
// output at most 96 bytes per input byte plus 32 ("\S" inside a class
// is the longest expansion). It never panics (FuzzTranslate). Its output
// is well-formed RE2; whether RE2 compiles it within its own limits on
// size, depth and nested repetition ("(a{1000}){1000}") is the
// compiler's call: Compile reports those refusals as Unsupported.
//
// # Tests
//
// testdata/cases.json holds cases written from ECMA-262 and JSON Schema
// 2020-12 (a pattern and the strings it matches and does not match, or
// its error). TestTranslate holds the translation to them;
// TestCasesAgainstNode holds the cases themselves to node's RegExp, a
// real ECMA-262 engine; TestRandomAgainstNode compares the two engines on
// random patterns and strings of the constructs that differ;
// TestRandomSyntaxAgainstNode holds the Syntax and Unsupported verdicts
// and the Annex B leniencies to node on random strings of syntax.
package ecmare
