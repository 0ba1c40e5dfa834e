package signature

import "github.com/toolaudit/toolaudit/signature/format"

// formatChecker returns the assertion of a format name (Options.Formats).
func formatChecker(name string) (func(string) bool, bool) {
	f, ok := format.Lookup(name)
	return f, ok
}
