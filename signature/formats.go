package signature

// formatChecker returns the assertion of a format name.
var formatChecker = func(name string) (func(string) bool, bool) { return nil, false }
