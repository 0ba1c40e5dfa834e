package ingest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
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
// Key the record key and Timestamp the event's own time (zero when the
// event's time could not be parsed; a producer then stamps it itself).
type Event struct {
	Kind      Kind
	Key       []byte
	Timestamp time.Time
	Value     []byte
}

// TimeLayout is how converted events write their times: RFC 3339, UTC,
// milliseconds, as in the contract's examples.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// callEvent is the contract's call event as this package writes it.
// Optional fields are left out when empty; the context fields are always
// written, empty when unknown.
type callEvent struct {
	Type         string          `json:"type"`
	EventID      string          `json:"event_id"`
	EmittedAt    string          `json:"emitted_at"`
	Registry     string          `json:"registry"`
	AgentID      string          `json:"agent_id"`
	SessionID    string          `json:"session_id"`
	Model        string          `json:"model"`
	Provider     string          `json:"provider"`
	Surface      string          `json:"surface"`
	Tool         string          `json:"tool"`
	Server       string          `json:"server"`
	Arguments    json.RawMessage `json:"arguments,omitempty"`
	ArgumentsRaw *string         `json:"arguments_raw,omitempty"`
	SeenDigest   string          `json:"seen_digest,omitempty"`
	Visible      []string        `json:"visible,omitempty"`
}

// listingEvent is the contract's listing event.
type listingEvent struct {
	Type       string            `json:"type"`
	EventID    string            `json:"event_id"`
	ObservedAt string            `json:"observed_at"`
	Registry   string            `json:"registry"`
	Server     string            `json:"server"`
	Trust      int               `json:"trust"`
	Op         string            `json:"op"`
	Tools      []json.RawMessage `json:"tools"`
}

// toolCall is what every adapter extracts from its format before the
// context is applied.
type toolCall struct {
	id   string // provider's tool-call id, "" when none
	name string
	args argValue
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

// hashID is the deterministic id of an event that has no provider id.
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
func newCall(tc toolCall, meta Meta, id string) (Event, error) {
	ev := callEvent{
		Type:       "call",
		EventID:    id,
		EmittedAt:  meta.Time.UTC().Format(TimeLayout),
		Registry:   meta.Registry,
		AgentID:    meta.AgentID,
		SessionID:  meta.SessionID,
		Model:      meta.Model,
		Provider:   meta.Provider,
		Surface:    meta.Surface,
		Tool:       tc.name,
		Server:     meta.Server,
		SeenDigest: meta.SeenDigests[tc.name],
		Visible:    meta.Visible,
	}
	if tc.args.valid {
		ev.Arguments = tc.args.json
	} else {
		ev.ArgumentsRaw = tc.args.raw
	}
	value, err := marshal(ev)
	if err != nil {
		return Event{}, err
	}
	return Event{Kind: KindCall, Key: callKey(meta.SessionID, meta.AgentID), Timestamp: meta.Time, Value: value}, nil
}

// newListing builds a snapshot listing event.
func newListing(meta Meta, id string, tools []json.RawMessage) (Event, error) {
	if tools == nil {
		tools = []json.RawMessage{}
	}
	trust := 0
	if meta.Trust != nil {
		trust = *meta.Trust
	}
	value, err := marshal(listingEvent{
		Type:       "listing",
		EventID:    id,
		ObservedAt: meta.Time.UTC().Format(TimeLayout),
		Registry:   meta.Registry,
		Server:     meta.Server,
		Trust:      trust,
		Op:         "snapshot",
		Tools:      tools,
	})
	if err != nil {
		return Event{}, err
	}
	return Event{Kind: KindListing, Key: listingKey(meta.Registry, meta.Server), Timestamp: meta.Time, Value: value}, nil
}

// callKey is a call's record key: the session, else the agent, else none.
func callKey(session, agent string) []byte {
	switch {
	case session != "":
		return []byte(session)
	case agent != "":
		return []byte(agent)
	default:
		return nil
	}
}

// listingKey is a listing's record key.
func listingKey(registry, server string) []byte {
	return []byte(registry + "/" + server)
}

// marshal encodes v without HTML escaping, so tool text stays as written.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return b[:len(b)-1], nil // Encode adds a newline
}
