package otlp

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/toolaudit/toolaudit/jsontape"
	"github.com/toolaudit/toolaudit/schema"
)

// Signal is what a payload carries.
type Signal uint8

// Signals.
const (
	Traces Signal = iota + 1 // an ExportTraceServiceRequest (topic otlp_spans)
	Logs                     // an ExportLogsServiceRequest (topic otlp_logs)
)

// Encoding is how a payload is written: the Collector's Kafka exporter
// encodings otlp_proto and otlp_json.
type Encoding uint8

// Encodings.
const (
	Proto Encoding = iota + 1
	JSON
)

// String is the encoding's name in the Collector's configuration.
func (e Encoding) String() string {
	switch e {
	case Proto:
		return "otlp_proto"
	case JSON:
		return "otlp_json"
	}
	return fmt.Sprintf("Encoding(%d)", uint8(e))
}

// ParseEncoding reads an encoding by its name in the Collector's Kafka
// exporter configuration: otlp_proto or otlp_json.
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "otlp_proto":
		return Proto, nil
	case "otlp_json":
		return JSON, nil
	}
	return 0, fmt.Errorf("otlp: unknown encoding %q: want otlp_proto or otlp_json", s)
}

// Limits bound what one payload may cost. A payload over MaxPayload is
// refused before it is unmarshalled; a span or log record over
// MaxAttributes, or a value over MaxValueBytes or MaxDepth, cannot become
// a call and says so (Call.Malformed).
type Limits struct {
	MaxPayload    int // bytes of the encoded payload
	MaxAttributes int // attributes of one span or log record
	MaxValueBytes int // bytes of one attribute or body, as JSON
	MaxDepth      int // nesting of one attribute or body value
	MaxItems      int // spans plus log records of one payload
}

// DefaultLimits are the limits when a Limits field is zero.
var DefaultLimits = Limits{
	MaxPayload:    16 << 20,
	MaxAttributes: 4096,
	MaxValueBytes: 1 << 20,
	MaxDepth:      32,
	MaxItems:      1 << 20,
}

func (l Limits) orDefault() Limits {
	d := DefaultLimits
	pick := func(v, def int) int {
		if v > 0 {
			return v
		}
		return def
	}
	return Limits{
		MaxPayload:    pick(l.MaxPayload, d.MaxPayload),
		MaxAttributes: pick(l.MaxAttributes, d.MaxAttributes),
		MaxValueBytes: pick(l.MaxValueBytes, d.MaxValueBytes),
		MaxDepth:      pick(l.MaxDepth, d.MaxDepth),
		MaxItems:      pick(l.MaxItems, d.MaxItems),
	}
}

// Payload errors: the whole payload is refused (one record, one error; the
// caller reports it and goes on with the next).
var (
	ErrTooLarge  = errors.New("otlp: payload over the size limit")
	ErrTooDeep   = errors.New("otlp: payload nested deeper than the limit")
	ErrTooMany   = errors.New("otlp: payload has more spans and log records than the limit")
	ErrUnmarshal = errors.New("otlp: payload is not OTLP")
)

// Source says where a call or listing was read.
type Source string

// Sources (the package documentation maps each to its attributes).
const (
	FromOutputMessages   Source = "gen_ai.output.messages"                    // a chat span
	FromInferenceDetails Source = "gen_ai.client.inference.operation.details" // a log record
	FromChoiceEvent      Source = "gen_ai.choice"                             // a log record
	FromOpenInference    Source = "llm.output_messages"                       // an OpenInference LLM span
	FromExecuteTool      Source = "execute_tool"                              // an execute_tool span
	FromMCP              Source = "mcp.tools/call"                            // an MCP client span
	FromToolDefinitions  Source = "gen_ai.tool.definitions"                   // listings
	FromOpenInferenceDef Source = "llm.tools"                                 // listings
	FromMCPList          Source = "mcp.tools/list"                            // listings
)

// Call is one tool call read from a payload, before a caller gives it an
// event id and the context it alone knows (registry, defaults).
type Call struct {
	CallID    string // the provider's tool-call id; "" when none
	Tool      string // "" when none was recorded (the call is then Malformed)
	Server    string // MCP spans only
	EmittedAt time.Time
	SessionID string
	AgentID   string
	Model     string
	Provider  string
	Surface   string // "mcp" for MCP spans, "" otherwise
	// Args are the arguments as recorded: JSON, or the text when it was
	// not JSON (Raw), or neither when they were not recorded
	// (ArgsRecorded false: capture of content is opt-in everywhere).
	Args         schema.CallArgs
	ArgsRecorded bool
	From         []Source // every place the call was seen, first the one it was read from
	TraceID      string   // hex; "" when the item had none
	SpanID       string
	// Definitions is the index in Result.Listings of the tool
	// definitions the model was given for this call, -1 when none were
	// recorded (the call then resolves against a configured registry).
	Definitions int
	// Malformed, when set, is why the call cannot be checked (no tool
	// name, a value over a limit, a span over the attribute limit).
	Malformed string
	// Identity, when set, is the call's ID instead of the one its trace
	// gives: the stream sets a model's call to the ID of its execution,
	// decided from an earlier record, so that the model's decision
	// replaces that one in the store.
	Identity string
}

// ID is the call's identity in its trace, 32 hex digits of a hash of the
// trace id, the span id of the item it was read from and the
// provider's call id; "" when one of them was not recorded. The same call
// read again (a record delivered twice, a batch the Collector's exporter
// retried, a file and a topic of the same traces) has the same ID, so the
// store keeps one decision of it. The execution of a call (execute_tool,
// MCP) read in another payload than the model's record of it is another
// item, with another ID: it never replaces the model's decision (an SDK
// may have stripped what the model invented before it executed).
func (c *Call) ID() string {
	if c.Identity != "" {
		return c.Identity
	}
	if c.TraceID == "" || c.SpanID == "" || c.CallID == "" && !c.fromExecution() {
		return ""
	}
	h := sha256.New()
	for _, s := range [...]string{c.TraceID, c.SpanID, c.CallID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))[:32]
}

// fromExecution reports whether the call was read from its execution's
// span (execute_tool, MCP tools/call), which records one call.
func (c *Call) fromExecution() bool {
	return len(c.From) > 0 && (c.From[0] == FromExecuteTool || c.From[0] == FromMCP)
}

// FromModel reports whether the call was read from the model's own record
// of it (a tool call the model returned), not from its execution
// (execute_tool, MCP tools/call).
func (c *Call) FromModel() bool { return len(c.From) > 0 && isModel(c.From[0]) }

// Listing is a tool set read from a payload: the definitions a model was
// given, or an MCP tools/list result.
type Listing struct {
	ObservedAt time.Time
	Server     string   // MCP tools/list only
	Tools      [][]byte // MCP Tool objects, compact JSON: name, description, inputSchema
	Digest     string   // hex SHA-256 of the tool set (Tools as a JSON array)
	From       Source
	TraceID    string
	SpanID     string
	// Dropped counts definitions that could not become a tool (no name,
	// not an object): a call to one resolves as an unknown name.
	Dropped int
	// Problem says why Dropped is not zero.
	Problem string
}

// DefinitionsRegistry names the registry of one set of tool definitions
// (Listing.Digest) under the configured registry base ("" for none):
// base + ":tools-" + 16 hex digits of the digest. The listing of the
// definitions and the calls the model answered with them go to it, so
// that those calls resolve against the tools the model had, whatever
// other sessions had at the same time; ingest and the stream name it so.
func DefinitionsRegistry(base, digest string) string {
	name := "tools-" + digest[:min(16, len(digest))]
	if base == "" {
		return name
	}
	return base + ":" + name
}

// Result is what one payload holds.
type Result struct {
	Calls    []Call
	Listings []Listing
	// Skipped counts the spans and log records that are no tool call and
	// no listing at all (a chat span without tool calls, an HTTP span).
	Skipped int
}

// Decode decodes one OTLP payload of signal sig written in enc. It never
// panics on hostile input: a payload over the limits, or not OTLP, is an
// error (wrapping ErrTooLarge, ErrTooDeep, ErrTooMany or ErrUnmarshal);
// within a payload, an item that cannot become a call is a Call with
// Malformed set, and one that is no tool call at all is counted in
// Result.Skipped.
func Decode(payload []byte, sig Signal, enc Encoding, lim Limits) (*Result, error) {
	lim = lim.orDefault()
	if len(payload) > lim.MaxPayload {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrTooLarge, len(payload), lim.MaxPayload)
	}
	if enc == JSON {
		// pdata's JSON reader nests as deep as the input does; the
		// documents of OTLP/JSON need about 10 levels plus 4 per level of
		// an attribute value.
		if d := jsonDepth(payload); d > 32+4*lim.MaxDepth {
			return nil, fmt.Errorf("%w: %d levels", ErrTooDeep, d)
		}
	}
	d := &decoder{lim: lim, res: &Result{}}
	switch sig {
	case Traces:
		var td ptrace.Traces
		var err error
		if enc == JSON {
			td, err = (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(payload)
		} else {
			td, err = (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(payload)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: traces: %w", ErrUnmarshal, err)
		}
		if n := td.SpanCount(); n > lim.MaxItems {
			return nil, fmt.Errorf("%w: %d spans, limit %d", ErrTooMany, n, lim.MaxItems)
		}
		d.traces(td)
	case Logs:
		var ld plog.Logs
		var err error
		if enc == JSON {
			ld, err = (&plog.JSONUnmarshaler{}).UnmarshalLogs(payload)
		} else {
			ld, err = (&plog.ProtoUnmarshaler{}).UnmarshalLogs(payload)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: logs: %w", ErrUnmarshal, err)
		}
		if n := ld.LogRecordCount(); n > lim.MaxItems {
			return nil, fmt.Errorf("%w: %d log records, limit %d", ErrTooMany, n, lim.MaxItems)
		}
		d.logs(ld)
	default:
		return nil, fmt.Errorf("otlp: unknown signal %d", sig)
	}
	d.merge()
	return d.res, nil
}

// jsonDepth returns the deepest nesting of brackets in b outside strings,
// in one pass.
func jsonDepth(b []byte) int {
	depth, max := 0, 0
	inStr := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			if depth++; depth > max {
				max = depth
			}
		case '}', ']':
			depth--
		}
	}
	return max
}

type decoder struct {
	lim Limits
	res *Result
	// listings by digest, so that one tool set given to many chat spans of
	// a payload is one listing (its earliest).
	byDigest   map[string]int
	defsByText map[string]int // tool definitions by their text
	// outer holds an attribute's JSON, inner the JSON text within it.
	outer, inner jsontape.Tape
}

func timeOf(ts ...pcommon.Timestamp) time.Time {
	for _, t := range ts {
		if t != 0 {
			return t.AsTime().UTC()
		}
	}
	return time.Time{}
}

func traceHex(id pcommon.TraceID) string {
	if id.IsEmpty() {
		return ""
	}
	return id.String()
}

func spanHex(id pcommon.SpanID) string {
	if id.IsEmpty() {
		return ""
	}
	return id.String()
}

// addListing adds a listing of tools (or, for a tool set already given in
// this payload, returns that one's index, moved to the earlier time).
func (d *decoder) addListing(l Listing) int {
	if d.byDigest == nil {
		d.byDigest = make(map[string]int)
	}
	key := l.Server + "\x00" + l.Digest
	if i, ok := d.byDigest[key]; ok {
		d.earlier(i, l.ObservedAt)
		return i
	}
	d.res.Listings = append(d.res.Listings, l)
	d.byDigest[key] = len(d.res.Listings) - 1
	return len(d.res.Listings) - 1
}

// earlier moves listing i to t when t is earlier.
func (d *decoder) earlier(i int, t time.Time) {
	if old := &d.res.Listings[i]; !t.IsZero() && (old.ObservedAt.IsZero() || t.Before(old.ObservedAt)) {
		old.ObservedAt = t
	}
}

// merge makes one call of a call seen twice in a trace under one call id:
// the model's tool call and its execute_tool (or MCP) span, or the same
// model call recorded two ways. The first seen of the model's records
// stays (it has the arguments as the model wrote them, before an SDK's
// validation strips any); the others fill what it lacks.
func (d *decoder) merge() {
	calls := d.res.Calls
	first := make(map[string]int)
	out := calls[:0]
	// Model records first, so that an execute_tool span exported before
	// its chat span still merges into the model's call.
	order := make([]int, 0, len(calls))
	for i := range calls {
		if isModel(calls[i].From[0]) {
			order = append(order, i)
		}
	}
	for i := range calls {
		if !isModel(calls[i].From[0]) {
			order = append(order, i)
		}
	}
	drop := make([]bool, len(calls))
	for _, i := range order {
		c := &calls[i]
		if c.CallID == "" || c.Malformed != "" {
			continue
		}
		key := c.TraceID + "\x00" + c.CallID
		j, ok := first[key]
		if !ok {
			first[key] = i
			continue
		}
		fill(&calls[j], c)
		drop[i] = true
	}
	for i := range calls {
		if drop[i] {
			continue
		}
		if calls[i].Malformed != "" {
			// A call that cannot be checked carries no arguments, so that
			// its event is MALFORMED wherever it is resolved.
			calls[i].Args, calls[i].ArgsRecorded = schema.CallArgs{}, false
		}
		out = append(out, calls[i])
	}
	d.res.Calls = out
}

func isModel(s Source) bool {
	switch s {
	case FromOutputMessages, FromInferenceDetails, FromChoiceEvent, FromOpenInference:
		return true
	}
	return false
}

// fill completes dst with what src knows and dst does not.
func fill(dst, src *Call) {
	set := func(d *string, s string) {
		if *d == "" {
			*d = s
		}
	}
	set(&dst.Tool, src.Tool)
	set(&dst.Server, src.Server)
	set(&dst.SessionID, src.SessionID)
	set(&dst.AgentID, src.AgentID)
	set(&dst.Model, src.Model)
	set(&dst.Provider, src.Provider)
	set(&dst.Surface, src.Surface)
	if dst.EmittedAt.IsZero() {
		dst.EmittedAt = src.EmittedAt
	}
	if !dst.ArgsRecorded && src.ArgsRecorded {
		dst.Args, dst.ArgsRecorded = src.Args, true
	}
	if dst.Definitions < 0 {
		dst.Definitions = src.Definitions
	}
	dst.From = append(dst.From, src.From...)
}
