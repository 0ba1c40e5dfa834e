package httpapi

import (
	"errors"
	"fmt"
)

// errEmptyBatch says why a body that starts with '[' is not an array of
// call events; errTooMany that it has too many.
var (
	errEmptyBatch = errors.New("the array holds no call event")
	errTooMany    = errors.New("too many call events")
)

// splitArray appends to dst each element of the JSON array b (without the
// whitespace around it), in order. It checks the array's own structure
// only: brackets and braces balance, strings end, elements are separated
// by single commas, nothing follows the array. Whether an element is a
// valid call event is the call decoder's to say (a bad element is a
// MALFORMED decision, not a bad request). More than max elements is
// errTooMany. One pass, no recursion: linear in len(b).
func splitArray(b []byte, max int, dst [][]byte) ([][]byte, error) {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '[' {
		return dst, errors.New("not a JSON array")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		if skipSpace(b, i+1) != len(b) {
			return dst, errors.New("data after the array")
		}
		return dst, errEmptyBatch
	}
	for {
		start := i
		depth := 0
	element:
		for ; i < len(b); i++ {
			switch c := b[i]; c {
			case '"':
				j, ok := endOfString(b, i+1)
				if !ok {
					return dst, fmt.Errorf("element %d: unterminated string", len(dst)+1)
				}
				i = j
			case '{', '[':
				depth++
			case '}', ']':
				if depth == 0 {
					if c == '}' {
						return dst, fmt.Errorf("element %d: unbalanced '}'", len(dst)+1)
					}
					break element // the array's ']'
				}
				depth--
			case ',':
				if depth == 0 {
					break element
				}
			}
		}
		if i == len(b) {
			return dst, errors.New("the array does not end")
		}
		end := i
		for end > start && isSpace(b[end-1]) {
			end--
		}
		if end == start {
			return dst, fmt.Errorf("element %d is empty", len(dst)+1)
		}
		if len(dst) == max {
			return dst, errTooMany
		}
		dst = append(dst, b[start:end])
		if b[i] == ']' {
			if skipSpace(b, i+1) != len(b) {
				return dst, errors.New("data after the array")
			}
			return dst, nil
		}
		i = skipSpace(b, i+1) // past ','
	}
}

// endOfString returns the index of the quote that ends the string whose
// content starts at i.
func endOfString(b []byte, i int) (int, bool) {
	for ; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i, true
		}
	}
	return 0, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
