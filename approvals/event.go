package approvals

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// Verb is what an approval event does to one definition.
type Verb string

// Verbs of approval events.
const (
	Approve Verb = "approve" // the definition is approved
	Reject  Verb = "reject"  // the definition was reviewed and refused
	Revoke  Verb = "revoke"  // the definition is no longer reviewed either way
)

// Event is one approval event: a reviewer's verdict on one definition
// (registry, server, tool, digest). It is the value of a record of the
// approvals topic, whose key is Key().
type Event struct {
	EventID  string
	Registry string
	Server   string // "" is the single-registry case
	Tool     string
	// Digest is the contract digest of the definition (name and
	// inputSchema, schema.Digest).
	Digest string
	// DescriptionDigest optionally pins the description too
	// (DescriptionDigest); "" when not reviewed. It is reported, not
	// enforced: resolution compares Digest only.
	DescriptionDigest string
	Verb              Verb
	By                string    // who decided (a user or token subject)
	At                time.Time // when
	Reason            string
}

// Key is the record key of e: the JSON array [registry, server, tool,
// digest]. One record per definition, so that compaction keeps the last
// verdict on each definition and never one definition's in place of
// another's (a key joined with "/" would let "a/b"+"c" and "a"+"b/c"
// collide).
func (e *Event) Key() string {
	return string(appendKey(nil, e.Registry, e.Server, e.Tool, e.Digest))
}

func appendKey(b []byte, registry, server, tool, digest string) []byte {
	b = append(b, '[')
	b = schema.AppendString(b, registry)
	b = append(b, ',')
	b = schema.AppendString(b, server)
	b = append(b, ',')
	b = schema.AppendString(b, tool)
	b = append(b, ',')
	b = schema.AppendString(b, digest)
	return append(b, ']')
}

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Validate reports what makes e unusable: a missing tool, a digest that
// is not a contract digest, an unknown verb, a missing reviewer or time.
func (e *Event) Validate() error {
	switch {
	case e.Registry == "":
		return errors.New("registry missing")
	case e.Tool == "":
		return errors.New("tool missing")
	case !digestRE.MatchString(e.Digest):
		return fmt.Errorf("digest %q is not sha256:<64 hex digits>", e.Digest)
	case e.DescriptionDigest != "" && !digestRE.MatchString(e.DescriptionDigest):
		return fmt.Errorf("description_digest %q is not sha256:<64 hex digits>", e.DescriptionDigest)
	case e.Verb != Approve && e.Verb != Reject && e.Verb != Revoke:
		return fmt.Errorf("verb %q is not approve, reject or revoke", e.Verb)
	case e.By == "":
		return errors.New("by missing")
	case e.At.IsZero():
		return errors.New("at missing")
	}
	return nil
}

// AppendJSON appends e as one JSON object, members in a fixed order.
func (e *Event) AppendJSON(b []byte) []byte {
	b = append(b, `{"type":"approval","event_id":`...)
	b = schema.AppendString(b, e.EventID)
	b = appendDef(b, e.Registry, e.Server, e.Tool, e.Digest, e.DescriptionDigest, "verb", string(e.Verb), e.By, e.At, e.Reason)
	return append(b, '}')
}

// appendDef appends the members an event and a lockfile entry share, in
// their order; kind is "verb" (an event) or "state" (an entry).
func appendDef(b []byte, registry, server, tool, digest, descDigest, kind, value, by string, at time.Time, reason string) []byte {
	b = member(b, "registry", registry)
	b = member(b, "server", server)
	b = member(b, "tool", tool)
	b = member(b, "digest", digest)
	if descDigest != "" {
		b = member(b, "description_digest", descDigest)
	}
	b = member(b, kind, value)
	b = member(b, "by", by)
	b = member(b, "at", at.UTC().Format(schema.TimeLayout))
	return member(b, "reason", reason)
}

// member appends "name":v, after a comma unless it opens the object.
func member(b []byte, name, v string) []byte {
	if len(b) > 0 && b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return schema.AppendString(b, v)
}

// maxEvent bounds an event's size: an approval is a few hundred bytes.
const maxEvent = 64 << 10

// Decode reads an approval event. Members it does not know are ignored
// (additive fields); a repeated member, a member of the wrong type or an
// event that fails Validate is an error.
func Decode(b []byte) (*Event, error) {
	if len(b) > maxEvent {
		return nil, fmt.Errorf("approval event of %d bytes exceeds %d", len(b), maxEvent)
	}
	e := &Event{}
	var typ, at string
	fields := map[string]*string{
		"type": &typ, "event_id": &e.EventID, "registry": &e.Registry, "server": &e.Server,
		"tool": &e.Tool, "digest": &e.Digest, "description_digest": &e.DescriptionDigest,
		"verb": (*string)(&e.Verb), "by": &e.By, "at": &at, "reason": &e.Reason,
	}
	if err := readStrings(b, fields, false); err != nil {
		return nil, fmt.Errorf("approval event: %w", err)
	}
	if typ != "approval" {
		return nil, fmt.Errorf("approval event: type %q, want \"approval\"", typ)
	}
	if at != "" {
		var err error
		if e.At, err = schema.ParseTime(at); err != nil {
			return nil, fmt.Errorf("approval event: at %q is not an RFC 3339 UTC time", at)
		}
	}
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("approval event: %w", err)
	}
	return e, nil
}

// DecodeRequest reads a reviewer's request (POST /v1/approvals):
// registry, server, tool, digest, verb and reason, description_digest
// optionally, all strings. Who and when are not the request's to say:
// the caller sets By, At and EventID, then validates. Any other member,
// and a missing reason, is an error.
func DecodeRequest(b []byte) (*Event, error) {
	if len(b) > maxEvent {
		return nil, fmt.Errorf("request of %d bytes exceeds %d", len(b), maxEvent)
	}
	e := &Event{}
	fields := map[string]*string{
		"registry": &e.Registry, "server": &e.Server, "tool": &e.Tool, "digest": &e.Digest,
		"description_digest": &e.DescriptionDigest, "verb": (*string)(&e.Verb), "reason": &e.Reason,
	}
	if err := readStrings(b, fields, true); err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	if e.Reason == "" {
		return nil, errors.New("reason missing: every verdict says why")
	}
	return e, nil
}

// readStrings reads b, one JSON object, into fields: each member named
// there must be a string. Another member is an error when strict, else
// ignored; a repeated member is always one (jsontape).
func readStrings(b []byte, fields map[string]*string, strict bool) error {
	var t jsontape.Tape
	if err := t.Parse(b); err != nil {
		return err
	}
	root := t.Root()
	if root.Kind() != jsontape.Object {
		return errors.New("not a JSON object")
	}
	for m := root.Members(); m.Next(); {
		p, ok := fields[string(m.Name())]
		if !ok {
			if strict {
				return fmt.Errorf("unknown member %q", m.Name())
			}
			continue
		}
		if m.Value().Kind() != jsontape.String {
			return fmt.Errorf("%s is not a string", m.Name())
		}
		*p = string(m.Value().Str())
	}
	return nil
}
