package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"

	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

// DefaultTopic is the audit topic's default name.
const DefaultTopic = "tool-audit"

// Record is one decision taken in the call path.
type Record struct {
	Source schema.Source // SourceAPI or SourceGateway
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
	"seen_digest", "current_digest",
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
// policy_version and decided_at. The HTTP API answers the same object
// with source, action and hints added.
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

// AppendAnswer appends the decision as the call path answers it (POST
// /v1/resolve's answer, the MCP gateway's rejection data): the object of
// AppendDecision, then "source", "action" and "hints" (h; {} when empty).
func (r *Record) AppendAnswer(b []byte, h *suggest.Hints) []byte {
	b = r.AppendDecision(b)
	b = b[:len(b)-1] // reopen the object
	b = append(b, `,"source":`...)
	b = schema.AppendString(b, string(r.Source))
	b = append(b, `,"action":`...)
	b = schema.AppendString(b, string(r.Action))
	b = append(b, `,"hints":`...)
	b = h.AppendJSON(b)
	return append(b, '}')
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
// member and read back byte for byte: valid JSON in valid UTF-8, without
// surrounding whitespace (a JSON reader drops it).
func embeddable(call []byte) bool {
	return len(call) > 0 && len(bytes.TrimSpace(call)) == len(call) && utf8.Valid(call) && json.Valid(call)
}

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
	if !utf8.Valid(b) {
		return errors.New("not valid UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := expectDelim(d, '{'); err != nil {
		return err
	}
	seen := map[string]bool{}
	var hasCall, hasDecision bool
	for d.More() {
		key, err := memberName(d, seen, "")
		if err != nil {
			return err
		}
		switch key {
		case "type":
			s, err := stringValue(d, key)
			if err != nil {
				return err
			}
			if s != "audit" {
				return fmt.Errorf(`type %q, want "audit"`, s)
			}
		case "source":
			s, err := stringValue(d, key)
			if err != nil {
				return err
			}
			switch src := schema.Source(s); src {
			case schema.SourceAPI, schema.SourceGateway:
				r.Source = src
			default:
				return fmt.Errorf(`source %q, want "api" or "gateway"`, s)
			}
		case "action":
			s, err := stringValue(d, key)
			if err != nil {
				return err
			}
			if r.Action, err = ParseAction(s); err != nil {
				return err
			}
		case "call":
			var raw json.RawMessage
			if err := d.Decode(&raw); err != nil {
				return fmt.Errorf("call: %w", err)
			}
			r.Call, hasCall = bytes.Clone(raw), true
		case "call_base64":
			s, err := stringValue(d, key)
			if err != nil {
				return err
			}
			if r.Call, err = base64.StdEncoding.DecodeString(s); err != nil {
				return fmt.Errorf("call_base64: %w", err)
			}
			hasCall = true
		case "decision":
			if err := decodeDecision(d, r); err != nil {
				return err
			}
			hasDecision = true
		default:
			if err := skip(d); err != nil {
				return err
			}
		}
	}
	if err := expectDelim(d, '}'); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the record")
	}
	switch {
	case !seen["type"]:
		return errors.New("type missing")
	case r.Source == "":
		return errors.New("source missing")
	case !hasCall:
		return errors.New("call missing")
	case seen["call"] && seen["call_base64"]:
		return errors.New("both call and call_base64")
	case !hasDecision:
		return errors.New("decision missing")
	}
	return nil
}

// decodeDecision reads the decision object into r, member by member
// through the row's columns.
func decodeDecision(d *json.Decoder, r *Record) error {
	if err := expectDelim(d, '{'); err != nil {
		return fmt.Errorf("decision: %w", err)
	}
	var row schema.Row
	seen := map[string]bool{}
	for d.More() {
		key, err := memberName(d, seen, "decision.")
		if err != nil {
			return err
		}
		col, ok := columns[key]
		if !ok {
			if err := skip(d); err != nil {
				return err
			}
			continue
		}
		switch {
		case col.Str != nil:
			if *col.Str(&row), err = stringValue(d, "decision."+key); err != nil {
				return err
			}
		case col.Bool != nil:
			tok, err := d.Token()
			v, ok := tok.(bool)
			if err != nil || !ok {
				return fmt.Errorf("decision.%s is not a boolean", key)
			}
			*col.Bool(&row) = v
		case col.Time != nil:
			s, err := stringValue(d, "decision."+key)
			if err != nil {
				return err
			}
			if *col.Time(&row), err = schema.ParseTime(s); err != nil {
				return fmt.Errorf("decision.%s is not an RFC 3339 UTC time", key)
			}
		}
	}
	if err := expectDelim(d, '}'); err != nil {
		return fmt.Errorf("decision: %w", err)
	}
	if row.Class.Index() < 0 {
		return fmt.Errorf("decision.class %q is not a class", row.Class)
	}
	if row.Verdict != schema.VerdictOf(row.Class) {
		return fmt.Errorf("decision.verdict %q disagrees with class %s", row.Verdict, row.Class)
	}
	if !seen["decided_at"] {
		return errors.New("decision.decided_at missing")
	}
	r.Decision = row.Decision
	r.SuggestedTool, r.ResolverBuild, r.PolicyVersion, r.DecidedAt = row.SuggestedTool, row.ResolverBuild, row.PolicyVersion, row.DecidedAt
	return nil
}

func expectDelim(d *json.Decoder, want json.Delim) error {
	tok, err := d.Token()
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if tok != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
}

// memberName reads an object member's name and refuses a repeated one.
func memberName(d *json.Decoder, seen map[string]bool, prefix string) (string, error) {
	tok, err := d.Token()
	if err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	key := tok.(string) // json.Decoder: inside an object, names are strings
	if seen[key] {
		return "", fmt.Errorf("member %s%s repeated", prefix, key)
	}
	seen[key] = true
	return key, nil
}

func stringValue(d *json.Decoder, name string) (string, error) {
	tok, err := d.Token()
	if err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	s, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%s is not a string", name)
	}
	return s, nil
}

// skip reads past one value of a member the decoder does not know.
func skip(d *json.Decoder) error {
	var raw json.RawMessage
	if err := d.Decode(&raw); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return nil
}
