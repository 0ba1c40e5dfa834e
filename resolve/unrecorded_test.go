package resolve

import (
	"testing"

	"github.com/toolaudit/toolaudit/schema"
)

// TestArgsUnrecorded: a call whose arguments were not recorded is resolved
// by name, in both modes: a name that fails is that failure, one that
// resolves is H3 "not enforced:" with the tool it resolved to, one outside
// the visible frontier H4; a pin-assisted tie-break, which tries the
// arguments against each provider, has none to try and takes the first.
func TestArgsUnrecorded(t *testing.T) {
	s := fixture(t)
	tests := []struct {
		name    string
		mode    Mode
		c       schema.Call
		class   schema.Class
		server  string
		tool    string
		reasons string
	}{
		{"resolved", Strict, schema.Call{Registry: "single", Tool: "create_issue"}, schema.H3, "", "create_issue", ArgsNotRecorded},
		{"unknown name", Strict, schema.Call{Registry: "single", Tool: "create_isue"}, schema.H1, "", "", ""},
		{"not visible", Strict, schema.Call{Registry: "single", Tool: "search", HasVisible: true, Visible: []string{"create_issue"}}, schema.H4, "", "search", ""},
		{"pinned", Strict, schema.Call{Registry: "fleet", Tool: "create_issue", Server: "github"}, schema.H3, "github", "create_issue", ArgsNotRecorded},
		{"collision strict", Strict, schema.Call{Registry: "fleet", Tool: "list_tables"}, schema.M2, "", "", ""},
		{"collision pin-assisted", PinAssisted, schema.Call{Registry: "fleet", Tool: "list_tables"}, schema.H3, "database-server", "list_tables", ArgsNotRecorded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.EventID, c.EmittedAt, c.ArgsUnrecorded = "c", at(1), true
			var d schema.Decision
			r := Resolver{Mode: tt.mode}
			r.Resolve(s.Snapshot(), &c, &d)
			if d.Class != tt.class || d.Verdict != schema.Reject || d.ResolvedServer != tt.server || d.ResolvedTool != tt.tool {
				t.Fatalf("decision %+v, want %s on %q/%q", d, tt.class, tt.server, tt.tool)
			}
			if tt.reasons != "" && d.Reason != tt.reasons {
				t.Errorf("reason %q, want %q", d.Reason, tt.reasons)
			}
		})
	}
}
