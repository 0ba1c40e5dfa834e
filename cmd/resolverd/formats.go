package main

import (
	"flag"
	"fmt"

	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/signature"
	"github.com/toolaudit/toolaudit/signature/format"
)

// formatsFlag registers --formats, which every command that decides calls
// shares, so that they decide alike.
func formatsFlag(fs *flag.FlagSet) *string {
	return fs.String("formats", "annotate", "`how` format is read: annotate (JSON Schema 2020-12's default: not checked) or assert "+
		"(a string that is not a valid "+fmt.Sprint(format.Names())+" is H3; the policy stamp then ends in +formats)")
}

// parseFormats reads --formats: whether formats are asserted.
func parseFormats(s string) (bool, error) {
	switch s {
	case "annotate":
		return false, nil
	case "assert":
		return true, nil
	}
	return false, fmt.Errorf("--formats %q: want annotate or assert", s)
}

// newStore returns the registry store for resolver r: its signatures
// compiled as r's policy says.
func newStore(r resolve.Resolver, opts ...registry.Option) *registry.Store {
	return registry.New(append(opts, registry.WithSignatureOptions(signature.Options{Formats: r.Formats}))...)
}
