package schema

import (
	"time"

	"github.com/toolaudit/toolaudit/jsontape"
)

// Class is the first failing check of a decision (spec v1, "Decision").
type Class string

// The classes of spec v1, in no particular order; resolve documents the
// order in which they are checked.
const (
	OK        Class = "OK"
	H1        Class = "H1" // no tool of that name (single registry)
	H2        Class = "H2" // undeclared key, or a required key missing
	H3        Class = "H3" // a value violates type, enum, range, pattern, length
	H4        Class = "H4" // real tool, not on the agent's visible frontier
	H5        Class = "H5" // arguments fit another tool, not this one
	M1        Class = "M1" // no connected server provides the name
	M2        Class = "M2" // several top-trust servers provide it, no pin
	M3        Class = "M3" // a lower-trust server shadows a higher-trust name
	M4        Class = "M4" // seen_digest differs from the current definition
	M5        Class = "M5" // arguments fit the same name on another server
	Malformed Class = "MALFORMED"
)

// NumClasses is the number of classes.
const NumClasses = 12

// Classes lists every class in the order summaries print them; Index is
// the position of a class in it.
var Classes = [NumClasses]Class{OK, H1, H2, H3, H4, H5, M1, M2, M3, M4, M5, Malformed}

// Index returns the position of c in Classes, or -1 for an unknown class.
func (c Class) Index() int {
	for i, x := range Classes {
		if x == c {
			return i
		}
	}
	return -1
}

// Verdict is what an enforcement point does with the call.
type Verdict string

// Only OK is allowed.
const (
	Allow  Verdict = "allow"
	Reject Verdict = "reject"
)

// VerdictOf returns the verdict of a class: only OK is allowed.
func VerdictOf(c Class) Verdict {
	if c == OK {
		return Allow
	}
	return Reject
}

// Op is what a listing event does to its server's tool set.
type Op string

// Listing operations.
const (
	OpSnapshot Op = "snapshot" // replaces the server's whole tool set
	OpRemove   Op = "remove"   // the server left the deployment
)

// Listing is a listing event: what one provider exposed at ObservedAt.
type Listing struct {
	EventID    string
	ObservedAt time.Time
	Registry   string
	Server     string // "" is the single-registry case
	Trust      int    // higher is more trusted
	Op         Op
	Tools      []Tool // empty for OpRemove
}

// Key is the Kafka key of a listing event (ListingKey).
func (l *Listing) Key() string { return ListingKey(l.Registry, l.Server) }

// Tool is one MCP Tool object of a listing. Only the fields the resolver
// reads are decoded; title, annotations, outputSchema and the rest are
// ignored here (digests cover name and inputSchema only).
type Tool struct {
	Name        string
	Description string
	InputSchema []byte // raw JSON object, as the server sent it
}

// Call is a call event. A Call filled by CallDecoder.Decode borrows
// Arguments from the decoder: it is valid until the decoder's next Decode.
type Call struct {
	EventID   string
	EmittedAt time.Time
	Registry  string
	AgentID   string
	SessionID string
	Model     string
	Provider  string
	Surface   string
	Tool      string // the name exactly as emitted
	Server    string // optional pin; "" when absent
	// Arguments is the emitted argument object (an Object on a decoded
	// call), a view of the decoder's tape.
	Arguments  jsontape.Value
	SeenDigest string   // optional
	Visible    []string // optional frontier; nil when absent
	HasVisible bool     // visible was present (an empty list is a frontier too)
	// ArgsUnrecorded: the producer did not record the arguments
	// ("arguments_recorded": false, and neither arguments nor
	// arguments_raw; OpenTelemetry records them only when asked). The
	// call is resolved by name and never allowed (resolve says so).
	ArgsUnrecorded bool
	// TraceID and SpanID (optional, lowercase hex: 32 and 16 digits) are
	// the OpenTelemetry trace and span the call was recorded in (an
	// addition of toolaudit's to the contract: the decision row keeps
	// them, so that an incident leads from a decision to its trace).
	TraceID, SpanID string
}

// Key is the Kafka key of a call event (CallKey).
func (c *Call) Key() string { return CallKey(c.SessionID, c.AgentID) }

// Decision is the outcome of resolving one call (spec v1, "Decision").
type Decision struct {
	EventID         string
	Verdict         Verdict
	Class           Class
	Reason          string
	Path            string // JSON pointer into the arguments, for H2/H3/H5/M5
	Coercible       bool   // H3 only: the value would pass after a lossless conversion
	ResolvedServer  string
	ResolvedTool    string
	RegistryVersion string
	Drift           bool
	SeenDigest      string
	CurrentDigest   string // digest of the resolved tool at emission
	// Approval is how the resolved tool's current definition stands in
	// the approved baseline (package approvals), "" when no approvals
	// policy applies to it; BaselineVersion is the version of the
	// baseline that decided it ("" likewise).
	Approval        Approval
	BaselineVersion string
}

// Approval is how a definition stands in the approved baseline.
type Approval string

// Approvals; the zero value is "not checked" (policy off).
const (
	ApprovalApproved   Approval = "approved"   // the current definition is approved
	ApprovalUnapproved Approval = "unapproved" // another definition of the tool is approved, not this one
	ApprovalRejected   Approval = "rejected"   // the current definition was reviewed and rejected
	ApprovalNew        Approval = "new"        // no definition of the tool was ever approved
)

// Reset clears d for reuse without freeing anything.
func (d *Decision) Reset() { *d = Decision{} }

// Set records the class, its verdict and the reason.
func (d *Decision) Set(c Class, reason string) {
	d.Class, d.Verdict, d.Reason = c, VerdictOf(c), reason
}
