package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// Kind is what an event is, and so which topic it goes to.
type Kind uint8

const (
	// KindCall is a call event (topic tool-calls).
	KindCall Kind = iota + 1
	// KindListing is a listing event (topic tool-listings).
	KindListing
)

// String returns the contract's "type" value of the kind.
func (k Kind) String() string {
	switch k {
	case KindCall:
		return "call"
	case KindListing:
		return "listing"
	default:
		return "kind(" + strconv.Itoa(int(k)) + ")"
	}
}

// Event is one contract event ready for a topic: Value is the JSON object,
// ID its event_id, Key the record key and Timestamp the record's: the
// event's own time when the resolver can use it (schema.ParseTime, within
// schema's range), else that of the event before it in its source (see
// convertEvent). A [Producer] stamps a zero Timestamp with its clock.
type Event struct {
	Kind      Kind
	ID        string
	Key       []byte
	Timestamp time.Time
	Value     []byte

	borrowed bool // Timestamp is not the event's own
}

// TimeLayout is how converted events write their times (schema.TimeLayout).
const TimeLayout = schema.TimeLayout

// toolCall is what every adapter extracts from its format before the
// context is applied.
type toolCall struct {
	id   string // provider's tool-call id, "" when none
	name string
	args argValue
	// unrecorded: the source did not record the arguments (OTel's
	// capture off); the event says so ("arguments_recorded": false).
	unrecorded bool
	// trace and span: the OpenTelemetry trace and span the call was
	// recorded in (hex), "" when none.
	trace, span string
}

// argValue is a call's arguments: JSON (compacted), raw text that was not
// JSON, or nothing.
type argValue struct {
	json  json.RawMessage
	raw   *string
	valid bool // json holds the arguments
}

// argsFromJSON takes arguments that already are JSON (Anthropic input,
// Bedrock input, MCP params.arguments).
func argsFromJSON(raw json.RawMessage) argValue {
	if len(raw) == 0 {
		return argValue{}
	}
	return argValue{json: compact(raw), valid: true}
}

// argsFromText takes arguments that a model wrote as text (OpenAI
// function.arguments): valid JSON becomes arguments, anything else
// arguments_raw.
func argsFromText(text string) argValue {
	if json.Valid([]byte(text)) {
		return argValue{json: compact([]byte(text)), valid: true}
	}
	return argValue{raw: &text}
}

// compact returns raw without insignificant whitespace, keeping key order
// and number text. raw must be valid JSON.
func compact(raw []byte) json.RawMessage {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return json.RawMessage(append([]byte(nil), raw...))
	}
	return buf.Bytes()
}

// maxProviderID is the longest provider tool-call id kept in a call's
// event_id; a longer one is left out (the hash alone identifies the call).
const maxProviderID = 64

// callID is the event_id of the index-th call of the line c: a hash of the
// source's name, the line's number, the call's index in the line and the
// line's text, so that two calls never share one (a provider's tool-call
// id is unique at best within one response: tau-bench's gpt-4o
// trajectories give 134 distinct ids to 1,164 calls) while re-ingesting
// the same file under the same name gives the same ids. The provider's id,
// when there is one of printable ASCII up to maxProviderID bytes, leads,
// so that the call can be found in the log: "call_abc~" and 16 hex digits;
// else "c-" and 20 hex digits.
func callID(c Context, index int, providerID string) string {
	h := sha256.New()
	h.Write([]byte(c.Source))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(c.Line), 10))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(index), 10))
	h.Write([]byte{0})
	h.Write(c.Text)
	return withProviderID(providerID, hex.EncodeToString(h.Sum(nil)))
}

// withProviderID is the event id of a call whose identity hashes to sum
// (hex): the provider's id, when it is short and printable, and 16 digits
// of sum, so that a reader sees the id the provider gave; else "c-" and
// 20 digits.
func withProviderID(providerID, sum string) string {
	if providerID != "" && len(providerID) <= maxProviderID && printableASCII(providerID) {
		return providerID + "~" + sum[:16]
	}
	return "c-" + sum[:20]
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// hashID is the deterministic id of a listing: a hash of the source's name,
// the line's number and the index of the listing in it.
func hashID(prefix, source string, line, index int) string {
	h := sha256.New()
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(line), 10))
	h.Write([]byte{0})
	h.Write(strconv.AppendInt(nil, int64(index), 10))
	return prefix + hex.EncodeToString(h.Sum(nil))[:20]
}

// newCall builds the call event of tc under meta.
func newCall(tc toolCall, meta Meta, id string) Event {
	c := schema.Call{
		EventID:    id,
		EmittedAt:  meta.Time,
		Registry:   meta.Registry,
		AgentID:    meta.AgentID,
		SessionID:  meta.SessionID,
		Model:      meta.Model,
		Provider:   meta.Provider,
		Surface:    meta.Surface,
		Tool:       tc.name,
		Server:     meta.Server,
		SeenDigest: meta.SeenDigests[tc.name],
		Visible:    meta.Visible, // an empty list is left out, as it always was
		TraceID:    tc.trace,
		SpanID:     tc.span,
	}
	args := schema.CallArgs{Unrecorded: tc.unrecorded}
	if tc.args.valid {
		args.JSON = tc.args.json
	} else {
		args.Raw = tc.args.raw
	}
	return Event{Kind: KindCall, ID: id, Key: callKey(meta.SessionID, meta.AgentID), Timestamp: meta.Time,
		Value: schema.AppendCall(nil, &c, args)}
}

// newListing builds a snapshot listing event.
func newListing(meta Meta, id string, tools []json.RawMessage) Event {
	l := schema.Listing{
		EventID:    id,
		ObservedAt: meta.Time,
		Registry:   meta.Registry,
		Server:     meta.Server,
		Op:         schema.OpSnapshot,
	}
	if meta.Trust != nil {
		l.Trust = *meta.Trust
	}
	raw := make([][]byte, len(tools))
	for i, t := range tools {
		raw[i] = t
	}
	return Event{Kind: KindListing, ID: id, Key: []byte(l.Key()), Timestamp: meta.Time,
		Value: schema.AppendListing(nil, &l, raw)}
}

// callKey is a call's record key (schema.CallKey), nil for none.
func callKey(session, agent string) []byte {
	if k := schema.CallKey(session, agent); k != "" {
		return []byte(k)
	}
	return nil
}
