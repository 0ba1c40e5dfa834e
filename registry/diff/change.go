package diff

import (
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/registry"
)

// Kind is what happened to a tool of a server at a listing.
type Kind string

// The kinds of change.
const (
	// Added: the tool appeared (the server connected, or listed it anew).
	Added Kind = "added"
	// Removed: the tool is gone (a snapshot without it, or the server left).
	Removed Kind = "removed"
	// Changed: the tool's digest (name and inputSchema) changed.
	Changed Kind = "changed"
	// Trust: only the server's trust tier changed, which decides shadowing.
	Trust Kind = "trust"
)

// Change is one row of table registry_changes: a change the registry
// store reported (registry.Change: its key, event, trust,
// digests and Deleted) with what it is, for people.
type Change struct {
	registry.Change
	Kind Kind
	// Diff is the structured diff of the inputSchema (for Added, against
	// the empty schema: its properties; for Removed, to it).
	Diff SchemaDiff
	// Summary is one line for tables: the kind and the diff's summary.
	Summary string
	// RecordedAt orders the writes of one key: the last one stands.
	// Set by the writer.
	RecordedAt time.Time
}

// Describe returns the row of c: its kind, the diff of the tool's
// inputSchema before and after, and a summary. Its cost is the diff's,
// linear in the two schemas.
func Describe(c registry.Change) Change {
	out := Change{Change: c}
	pt, ct := c.TrustBefore, c.TrustAfter
	switch {
	case c.DigestBefore == "":
		out.Kind = Added
		out.Diff, _ = DiffSchemas(emptyObject, c.SchemaAfter)
		out.Summary = join("added", out.Diff.Summary())
	case c.DigestAfter == "":
		out.Kind, out.Summary = Removed, "removed"
	case c.DigestBefore == c.DigestAfter:
		out.Kind, out.Summary = Trust, "trust "+strconv.Itoa(pt)+" -> "+strconv.Itoa(ct)
	default:
		out.Kind = Changed
		diff, err := DiffSchemas(c.SchemaBefore, c.SchemaAfter)
		if err != nil {
			out.Summary = "changed (" + err.Error() + ")"
		} else {
			out.Diff, out.Summary = diff, join("changed", diff.Summary())
		}
		if pt != ct {
			out.Summary += ", trust " + strconv.Itoa(pt) + " -> " + strconv.Itoa(ct)
		}
	}
	return out
}

// emptyObject is what an added tool's schema is compared with: its
// properties show as added, its object type as no change.
var emptyObject = []byte(`{"type":"object"}`)

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + ": " + b
}
