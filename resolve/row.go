package resolve

import (
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// ToolSuggester names the valid tool nearest to a rejected call's (H1,
// M1): the row's suggested_tool. *suggest.Suggester is one; the interface
// keeps package resolve free of suggest, which imports it.
type ToolSuggester interface {
	Tool(vs Versions, c *schema.Call, d *schema.Decision) string
}

// RowDecider takes a call record to its stored row: the step of every
// front end that stores decisions (the pipeline's workers, the
// re-analysis). It decides the event (Resolver.Decide), then fills in the
// call's identity and context, the arguments' summary, the suggested tool
// and the row's key, so that a call decided live and again later gets
// the same CallKey, summary and suggestion.
//
// It keeps the decoder's buffers from one call to the next: one per
// goroutine, not safe for concurrent use. The zero value decides strictly,
// hashes arguments without a key, suggests nothing and keeps no raw
// arguments.
type RowDecider struct {
	Resolver Resolver
	// KeepRawArgs stores the emitted arguments (compact JSON) in ArgsRaw.
	// Arguments are untrusted and may hold secrets: off, a row keeps only
	// their shape and hash.
	KeepRawArgs bool
	// ArgsKey keys args_hash (schema.NewArgsSummarizer); nil: plain
	// SHA-256. Set before the first call.
	ArgsKey *schema.ArgsKey
	// Suggest fills SuggestedTool of H1 and M1 rows; nil: left empty.
	Suggest ToolSuggester

	dec      schema.CallDecoder
	args     schema.ArgsSummarizer
	argsInit bool
	call     schema.Call
}

// DecideRow decides event against vs into row and reports whether the
// event decoded. It sets the decision, the call's identity and context
// (what was read before the failure, for an event that does not decode),
// the arguments' shape and hash (and ArgsRaw with KeepRawArgs) and the
// suggested tool of a decoded call, DecidedAt, and CallKey
// (Row.SetCallKey): the record's position (Topic, Partition, Offset) must
// be in row before. recordTime is the event's record timestamp: a call
// with no usable emitted_at is stored at it (schema.WindowTime), where
// re-analysis and every range query find it. The stamps (AnalysisID,
// ResolverBuild, PolicyVersion, Source) are the caller's. A nil vs
// decodes only, as Decide says.
func (d *RowDecider) DecideRow(vs Versions, event []byte, recordTime time.Time, row *schema.Row) bool {
	ok := d.Resolver.Decide(vs, &d.dec, event, &d.call, &row.Decision)
	d.fill(row, ok, recordTime)
	if ok && d.Suggest != nil && vs != nil {
		if c := row.Class; c == schema.H1 || c == schema.M1 {
			row.SuggestedTool = d.Suggest.Tool(vs, &d.call, &row.Decision)
		}
	}
	row.DecidedAt = time.Now()
	row.SetCallKey()
	return ok
}

// DescribeCall fills row with call's identity, context and arguments'
// summary without deciding it (a decision taken elsewhere, such as an
// audit record's), and sets CallKey as DecideRow does. It reports whether
// call decoded; if not, row holds what was read before the failure.
func (d *RowDecider) DescribeCall(call []byte, recordTime time.Time, row *schema.Row) bool {
	ok := d.dec.Decode(call, &d.call) == nil
	d.fill(row, ok, recordTime)
	row.SetCallKey()
	return ok
}

func (d *RowDecider) fill(row *schema.Row, decoded bool, recordTime time.Time) {
	row.FillCall(&d.call) // of an undecodable event: what was read before the failure
	row.EmittedAt = schema.WindowTime(row.EmittedAt, recordTime)
	if !decoded {
		return
	}
	if !d.argsInit {
		d.args, d.argsInit = schema.NewArgsSummarizer(d.ArgsKey), true
	}
	if d.call.ArgsUnrecorded {
		return // no arguments: no shape, no hash (not the hash of nothing)
	}
	row.ArgsShape = d.args.Shape(d.call.Arguments)
	row.ArgsHash = d.args.Hash(d.call.Arguments)
	if d.KeepRawArgs {
		row.ArgsRaw = string(d.call.Arguments.AppendCompact(nil))
	}
}
