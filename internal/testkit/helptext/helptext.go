// Package helptext holds the one rule that keeps the --help of resolverd,
// htb and ingest alike and unambiguous. All three print their flags with
// ffcli's layout, which shows in one column either a flag's default value
// or, when the default is empty, the placeholder named in backquotes in
// its usage text. A lower-case placeholder there reads as a default
// ("-clickhouse-password password"), so placeholders of flags without a
// default are upper case (FILE, DIR, PASSWORD), as in the USAGE lines.
package helptext

import (
	"flag"
	"fmt"
	"strings"
)

// Ambiguous lists the flags of fs whose --help column would not say
// clearly whether it is a value or a placeholder: a flag with no default
// value (booleans aside) must name an upper-case placeholder.
func Ambiguous(fs *flag.FlagSet) []string {
	var bad []string
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); (ok && b.IsBoolFlag()) || f.DefValue != "" {
			return
		}
		name, _ := flag.UnquoteUsage(f)
		if !strings.Contains(f.Usage, "`") || name != strings.ToUpper(name) {
			bad = append(bad, fmt.Sprintf("-%s: no default, so its placeholder must be named in backquotes, upper case (has %q)", f.Name, name))
		}
	})
	return bad
}
