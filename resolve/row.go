package resolve

import (
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// RowDecider takes a call record to its stored row: the step of every
// front end that stores decisions (the pipeline's workers, the
// re-analysis). It decides the event (Resolver.Decide), then fills in the
// call's identity and context, the arguments' summary and the row's key,
// so that a call decided live and again later gets the same CallKey and
// the same summary.
//
// It keeps the decoder's buffers from one call to the next: one per
// goroutine, not safe for concurrent use. The zero value decides strictly
// and keeps no raw arguments.
type RowDecider struct {
	Resolver Resolver
	// KeepRawArgs stores the emitted arguments (compact JSON) in ArgsRaw.
	// Arguments are untrusted and may hold secrets: off, a row keeps only
	// their shape and hash.
	KeepRawArgs bool

	dec  schema.CallDecoder
	args schema.ArgsSummarizer
	call schema.Call
}

// DecideRow decides event against vs into row and reports whether the
// event decoded. It sets the decision, the call's identity and context
// (what was read before the failure, for an event that does not decode),
// the arguments' shape and hash (and ArgsRaw with KeepRawArgs) of a
// decoded call, DecidedAt, and CallKey (Row.SetCallKey): the record's
// position (Topic, Partition, Offset) must be in row before. The stamps
// (AnalysisID, ResolverBuild, PolicyVersion, Source) are the caller's. A
// nil vs decodes only, as Decide says.
func (d *RowDecider) DecideRow(vs Versions, event []byte, row *schema.Row) bool {
	ok := d.Resolver.Decide(vs, &d.dec, event, &d.call, &row.Decision)
	row.FillCall(&d.call) // of an undecodable event: what was read before the failure
	if ok {
		row.ArgsShape = d.args.Shape(d.call.Arguments)
		row.ArgsHash = d.args.Hash(d.call.Arguments)
		if d.KeepRawArgs {
			row.ArgsRaw = string(d.call.Arguments.MarshalTo(nil))
		}
	}
	row.DecidedAt = time.Now()
	row.SetCallKey()
	return ok
}
