// Package callpath is the step every front end in the call path takes
// for a call (POST /v1/resolve, the MCP gateway): decide it, record the
// decision in the audit trail, and only then answer it. The front ends
// keep what is theirs (reading the request, the protocol's answer, what
// happens to an accepted call); the decision, its audit record, the hints
// of a rejection and the answer object are made here, once, so that a
// call gets the same record and the same answer object whichever front
// end it came through.
//
//   - Decide decodes the call event and decides it (resolve.Resolver.Decide)
//     into an audit.Record stamped with the step's source, action,
//     resolver build and policy, and decided_at in UTC.
//   - Hint gives a rejection its hints (the Hinter's: the nearest names,
//     keys, expectations) and the record its suggested_tool. It reads the
//     decoded call, so it comes before the next Decide with that decoder.
//   - Record produces the records to the audit trail and returns nil only
//     once it acknowledged them: a front end answers no decision that is
//     not recorded (fail closed, ErrUnrecorded).
//   - AppendAnswer renders the answer object: the record's decision
//     (audit.Record.AppendDecision) with source, action and hints.
package callpath

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
	"go.opentelemetry.io/otel/trace"
)

// Hinter computes the hints of a rejected call (*suggest.Suggester; the
// gateway's, which names tools as its clients call them).
type Hinter interface {
	Hints(vs resolve.Versions, c *schema.Call, d *schema.Decision) suggest.Hints
}

var _ Hinter = (*suggest.Suggester)(nil)

// ErrUnrecorded wraps the error of Record: the audit trail did not take
// the decisions, which must then not be answered or acted on.
var ErrUnrecorded = errors.New("the audit trail did not take the decisions")

// Step is the call path's step for the calls of one front end. Its
// fields are read, never written, by its methods: a front end may copy it
// to decide one request under another mode or action.
type Step struct {
	// Resolver decides the calls.
	Resolver resolve.Resolver
	// Hints computes the hints of rejections; nil: none.
	Hints Hinter
	// Audit records every decision before it is answered (*audit.Kafka);
	// nil: decisions are not recorded (no Kafka).
	Audit audit.Producer
	// Source and Action stamp every record (the front end, and what it
	// reports it does with the verdict).
	Source schema.Source
	Action schema.Action
	// ResolverBuild and PolicyVersion stamp every decision.
	ResolverBuild, PolicyVersion string
	// Tracer, when set, emits a span per recorded decision, in the trace
	// of the ctx given to Record (trace.go); nil: none.
	Tracer trace.Tracer
}

// Decide decodes event with dec into c and decides it against vs into
// rec, replacing what rec held: the event as received, its key (the
// decoded call's schema.CallKey), the decision, the step's stamps and
// decided_at (now, UTC). rec.Call is event: rec borrows it. c borrows from
// dec as resolve.Resolver.Decide says.
func (s *Step) Decide(vs resolve.Versions, dec *schema.CallDecoder, event []byte, c *schema.Call, rec *audit.Record) {
	*rec = audit.Record{
		Source: s.Source, Action: s.Action, Call: event,
		ResolverBuild: s.ResolverBuild, PolicyVersion: s.PolicyVersion,
	}
	s.Resolver.Decide(vs, dec, event, c, &rec.Decision)
	rec.Key = c.Key()
	rec.DecidedAt = time.Now().UTC()
}

// Hint returns the hints of rec's decision when it is a rejection, and
// sets the record's suggested_tool from them; an acceptance has none. c
// is the call as Decide decoded it.
func (s *Step) Hint(vs resolve.Versions, c *schema.Call, rec *audit.Record) suggest.Hints {
	d := &rec.Decision
	if d.Verdict != schema.Reject || s.Hints == nil {
		return suggest.Hints{}
	}
	h := s.Hints.Hints(vs, c, d)
	rec.SuggestedTool = h.SuggestedTool(d.Class)
	return h
}

// Record produces recs to the audit trail and returns nil once it has
// acknowledged every one (nil too without an Audit). Its error wraps
// ErrUnrecorded and the producer's: the front end answers that the
// decisions could not be recorded, and does not act on them.
func (s *Step) Record(ctx context.Context, recs ...*audit.Record) error {
	var err error
	if s.Audit != nil {
		if perr := s.Audit.Produce(ctx, recs...); perr != nil {
			err = fmt.Errorf("%w: %w", ErrUnrecorded, perr)
		}
	}
	if s.Tracer != nil {
		s.spans(ctx, recs, err)
	}
	return err
}

// AppendAnswer appends the decision as the call path answers it (POST
// /v1/resolve's answer; the MCP gateway's rejection: a JSON-RPC error's
// data, or the _meta of a result with isError): the object of
// audit.Record.AppendDecision, then "source", "action" and "hints" (h;
// {} when empty). Hints are answered, never recorded.
func AppendAnswer(b []byte, rec *audit.Record, h *suggest.Hints) []byte {
	b = rec.AppendDecision(b)
	b = b[:len(b)-1] // reopen the object
	b = append(b, `,"source":`...)
	b = schema.AppendString(b, string(rec.Source))
	b = append(b, `,"action":`...)
	b = schema.AppendString(b, string(rec.Action))
	b = append(b, `,"hints":`...)
	b = h.AppendJSON(b)
	return append(b, '}')
}
