package helptext

import (
	"flag"
	"strings"
	"testing"
)

func TestAmbiguous(t *testing.T) {
	tests := []struct {
		name  string
		setup func(fs *flag.FlagSet)
		bad   string // a flag named in the result, "" for none
	}{
		{"upper-case placeholder", func(fs *flag.FlagSet) { fs.String("out", "", "write to `FILE`") }, ""},
		{"default shown instead", func(fs *flag.FlagSet) { fs.String("mode", "strict", "resolution `mode`") }, ""},
		{"boolean", func(fs *flag.FlagSet) { fs.Bool("quiet", false, "no summary") }, ""},
		{"lower-case placeholder", func(fs *flag.FlagSet) { fs.String("password", "", "the `password`") }, "-password"},
		{"no placeholder", func(fs *flag.FlagSet) { fs.String("agent", "", "default agent_id") }, "-agent"},
		{"guessed placeholder", func(fs *flag.FlagSet) { fs.Duration("wait", 0, "how long") }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			tt.setup(fs)
			got := strings.Join(Ambiguous(fs), "\n")
			if (tt.bad == "") != (got == "") || !strings.Contains(got, tt.bad) {
				t.Fatalf("Ambiguous = %q, want a complaint about %q", got, tt.bad)
			}
		})
	}
}
