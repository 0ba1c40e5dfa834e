package audit

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// DefaultTopic is the audit topic's default name.
const DefaultTopic = schema.TopicAudit

// Record is one decision taken in the call path.
type Record struct {
	Source schema.Source // SourceAPI, SourceGateway or SourceModelProxy
	Action schema.Action // what the host reports it did; "" unknown
	// Call is the call event as received (any bytes: a MALFORMED call is
	// audited too).
	Call []byte
	// Key is the Kafka record key: the call's schema.CallKey (session,
	// else agent); empty for a call without either. Not encoded.
	Key string

	Decision      schema.Decision
	SuggestedTool string
	ResolverBuild string
	PolicyVersion string
	DecidedAt     time.Time
}

// decisionColumns are the decision row's columns that a record's decision
// carries, by their names in schema.Columns (TestDecisionColumns).
var decisionColumns = []string{
	"event_id", "verdict", "class", "reason", "path", "coercible",
	"resolved_server", "resolved_tool", "registry_version", "drift",
	"seen_digest", "current_digest", "approval", "baseline_version",
	"suggested_tool", "resolver_build", "policy_version", "decided_at",
}

// columns maps decisionColumns to their schema.Column.
var columns = func() map[string]schema.Column {
	m := map[string]schema.Column{}
	for _, c := range schema.Columns() {
		m[c.Name] = c
	}
	out := map[string]schema.Column{}
	for _, n := range decisionColumns {
		c, ok := m[n]
		if !ok {
			panic("audit: no column " + n)
		}
		out[n] = c
	}
	return out
}()

// AppendDecision appends the record's decision object: the members of
// schema.Decision.AppendJSON, then suggested_tool, resolver_build,
// policy_version and decided_at. The call path answers the same object
// with source, action and hints added (callpath.AppendAnswer).
func (r *Record) AppendDecision(b []byte) []byte {
	b = r.Decision.AppendJSON(b)
	b = b[:len(b)-1] // reopen the object
	b = append(b, `,"suggested_tool":`...)
	b = schema.AppendString(b, r.SuggestedTool)
	b = append(b, `,"resolver_build":`...)
	b = schema.AppendString(b, r.ResolverBuild)
	b = append(b, `,"policy_version":`...)
	b = schema.AppendString(b, r.PolicyVersion)
	b = append(b, `,"decided_at":"`...)
	b = schema.AppendTime(b, r.DecidedAt)
	return append(b, `"}`...)
}

// AppendJSON appends the record as one JSON object (no newline).
func (r *Record) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":"audit","source":`...)
	b = schema.AppendString(b, string(r.Source))
	b = append(b, `,"action":`...)
	b = schema.AppendString(b, string(r.Action))
	if embeddable(r.Call) {
		b = append(b, `,"call":`...)
		b = append(b, r.Call...)
	} else {
		b = append(b, `,"call_base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, r.Call)
		b = append(b, '"')
	}
	b = append(b, `,"decision":`...)
	b = r.AppendDecision(b)
	return append(b, '}')
}

// embeddable reports whether call can be written as the record's "call"
// member and read back byte for byte by Decode: JSON that the strict
// parser takes (valid UTF-8, no repeated member name, nesting within
// jsontape.MaxDepth), without surrounding whitespace (the member's value
// starts and ends with the call).
func embeddable(call []byte) bool {
	if len(call) == 0 || len(bytes.TrimSpace(call)) != len(call) {
		return false
	}
	t := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(t)
	return t.Parse(call) == nil
}

// tapes are the parsers of records and calls, reused.
var tapes = sync.Pool{New: func() any { return new(jsontape.Tape) }}

// Fill sets the decision and the stamps of row from the record: the
// decision, suggested_tool, resolver_build, policy_version, decided_at,
// source and action. The call's identity and context are the caller's to
// fill, from Call.
func (r *Record) Fill(row *schema.Row) {
	row.Decision = r.Decision
	row.SuggestedTool = r.SuggestedTool
	row.ResolverBuild, row.PolicyVersion = r.ResolverBuild, r.PolicyVersion
	row.DecidedAt = r.DecidedAt
	row.Source, row.Action = r.Source, r.Action
}

// ErrRecord is wrapped by every error of Decode: the record is unusable.
var ErrRecord = errors.New("bad audit record")

// ParseAction reads an action as hosts report it: "enforced",
// "observed", or "" (unknown).
func ParseAction(s string) (schema.Action, error) {
	switch a := schema.Action(s); a {
	case "", schema.ActionEnforced, schema.ActionObserved:
		return a, nil
	}
	return "", fmt.Errorf("unknown action %q (want enforced, observed or none)", s)
}

// Decode reads one record strictly (see the package documentation) into
// r, replacing what r held. r.Call is a copy; r.Key is left empty (it is
// the Kafka record's).
func Decode(b []byte, r *Record) error {
	*r = Record{}
	if err := decode(b, r); err != nil {
		return fmt.Errorf("%w: %w", ErrRecord, err)
	}
	return nil
}

func decode(b []byte, r *Record) error {
	t := tapes.Get().(*jsontape.Tape)
	defer tapes.Put(t)
	if err := t.Parse(b); err != nil {
		return err
	}
	root := t.Root()
	if root.Kind() != jsontape.Object {
		return errors.New("not a JSON object")
	}
	var hasType, hasCall, hasBase64, hasDecision bool
	for m := root.Members(); m.Next(); {
		v := m.Value()
		switch key := string(m.Name()); key {
		case "type":
			if !v.StrIs("audit") {
				return fmt.Errorf(`type %s, want "audit"`, v.Raw())
			}
			hasType = true
		case "source":
			s, err := stringValue(v, key)
			if err != nil {
				return err
			}
			switch src := schema.Source(s); src {
			case schema.SourceAPI, schema.SourceGateway, schema.SourceModelProxy:
				r.Source = src
			default:
				return fmt.Errorf(`source %q, want "api", "gateway" or "model-proxy"`, s)
			}
		case "action":
			s, err := stringValue(v, key)
			if err != nil {
				return err
			}
			if r.Action, err = ParseAction(s); err != nil {
				return err
			}
		case "call":
			r.Call, hasCall = bytes.Clone(v.Raw()), true
		case "call_base64":
			s, err := stringValue(v, key)
			if err != nil {
				return err
			}
			if r.Call, err = base64.StdEncoding.DecodeString(s); err != nil {
				return fmt.Errorf("call_base64: %w", err)
			}
			hasBase64 = true
		case "decision":
			if err := decodeDecision(v, r); err != nil {
				return err
			}
			hasDecision = true
		}
	}
	switch {
	case !hasType:
		return errors.New("type missing")
	case r.Source == "":
		return errors.New("source missing")
	case hasCall && hasBase64:
		return errors.New("both call and call_base64")
	case !hasCall && !hasBase64:
		return errors.New("call missing")
	case !hasDecision:
		return errors.New("decision missing")
	}
	return nil
}

// decodeDecision reads the decision object into r, member by member
// through the row's columns.
func decodeDecision(d jsontape.Value, r *Record) error {
	if d.Kind() != jsontape.Object {
		return errors.New("decision is not an object")
	}
	var row schema.Row
	var decided bool
	for m := d.Members(); m.Next(); {
		key := string(m.Name())
		col, ok := columns[key]
		if !ok {
			continue
		}
		v := m.Value()
		switch {
		case col.Str != nil:
			s, err := stringValue(v, "decision."+key)
			if err != nil {
				return err
			}
			*col.Str(&row) = s
		case col.Bool != nil:
			switch v.Kind() {
			case jsontape.True, jsontape.False:
				*col.Bool(&row) = v.Kind() == jsontape.True
			default:
				return fmt.Errorf("decision.%s is not a boolean", key)
			}
		case col.Time != nil:
			s, err := stringValue(v, "decision."+key)
			if err != nil {
				return err
			}
			if *col.Time(&row), err = schema.ParseTime(s); err != nil {
				return fmt.Errorf("decision.%s is not an RFC 3339 UTC time", key)
			}
			decided = decided || key == "decided_at"
		}
	}
	if row.Class.Index() < 0 {
		return fmt.Errorf("decision.class %q is not a class", row.Class)
	}
	if row.Verdict != schema.VerdictOf(row.Class) {
		return fmt.Errorf("decision.verdict %q disagrees with class %s", row.Verdict, row.Class)
	}
	if !decided {
		return errors.New("decision.decided_at missing")
	}
	r.Decision = row.Decision
	r.SuggestedTool, r.ResolverBuild, r.PolicyVersion, r.DecidedAt = row.SuggestedTool, row.ResolverBuild, row.PolicyVersion, row.DecidedAt
	return nil
}

func stringValue(v jsontape.Value, name string) (string, error) {
	if v.Kind() != jsontape.String {
		return "", fmt.Errorf("%s is not a string", name)
	}
	return string(v.Str()), nil
}
