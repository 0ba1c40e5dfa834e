package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sort"
	"strconv"
	"time"
	"unsafe"

	"github.com/valyala/fastjson"
)

// Row is one decision as the pipeline stores it (the ClickHouse row of
// table decisions): the decision, the call's identity and context, the
// versions that produced it and the Kafka record it came from. Columns
// lists its fields with their columns; a new field goes there too.
type Row struct {
	Decision

	// CallKey identifies the call within an analysis: its event_id, or
	// "kafka:<topic>/<partition>/<offset>" for a record without a usable
	// one. The store keeps one row per (AnalysisID, CallKey).
	CallKey       string
	AnalysisID    string
	ResolverBuild string
	PolicyVersion string // mode and rules the decision was made under

	// Source is who decided: SourceStream, SourceAPI, SourceGateway or
	// SourceReanalysis. The store keeps one row per (AnalysisID, CallKey,
	// Source): a call decided in the call path and again from the stream
	// has both rows.
	Source Source
	// Action is what the enforcement point reports it did with the
	// verdict: ActionEnforced, ActionObserved, or "" (unknown).
	Action Action
	// SuggestedTool is, for H1 and M1, the valid name of the registry
	// version nearest to the emitted one; "" otherwise.
	SuggestedTool string

	Registry  string
	AgentID   string
	SessionID string
	Model     string
	Provider  string
	Surface   string
	Tool      string // the requested name, as emitted
	Server    string // the requested pin

	EmittedAt time.Time // zero when the call had no usable time
	DecidedAt time.Time

	// Arguments are untrusted and may hold secrets: by default only their
	// shape (keys and JSON types) and a hash are kept; ArgsRaw only when
	// configured.
	ArgsShape string
	ArgsHash  string
	ArgsRaw   string

	Topic     string
	Partition int32
	Offset    int64
}

// Source is who decided a call (wire contract v1.1).
type Source string

// Sources of decisions.
const (
	SourceStream     Source = "stream"     // decided from the calls topic
	SourceAPI        Source = "api"        // answered by POST /v1/resolve
	SourceGateway    Source = "gateway"    // decided in the MCP gateway
	SourceReanalysis Source = "reanalysis" // resolverd reanalyze
)

// Action is what an enforcement point reports it did with a verdict (wire
// contract v1.1); the verdict is the resolver's, the action the host's.
type Action string

// Actions; the zero value is unknown.
const (
	ActionEnforced Action = "enforced"
	ActionObserved Action = "observed"
)

// FillCall copies the call's identity and context into r.
func (r *Row) FillCall(c *Call) {
	r.Registry, r.AgentID, r.SessionID = c.Registry, c.AgentID, c.SessionID
	r.Model, r.Provider, r.Surface = c.Model, c.Provider, c.Surface
	r.Tool, r.Server, r.EmittedAt = c.Tool, c.Server, c.EmittedAt
}

// ArgsShape describes v without its values: objects as their sorted keys
// with the shape of each value, arrays as the distinct shapes of their
// items, scalars as their JSON type. {"q":"x","n":[1,2]} gives
// {"n":["number"],"q":"string"}.
func ArgsShape(v *fastjson.Value) string {
	var s ArgsSummarizer
	return s.Shape(v)
}

// ArgsHash is "sha256:" and the hex SHA-256 of the arguments' compact JSON
// (key order as emitted): equal for the same emitted arguments, whatever
// whitespace the producer used, without storing them.
func ArgsHash(v *fastjson.Value) string {
	var s ArgsSummarizer
	return s.Hash(v)
}

// ArgsSummarizer computes ArgsShape and ArgsHash call after call with
// reused buffers, and returns one string per distinct shape (the calls of
// a tool mostly share theirs), so that summarizing a call's arguments
// allocates only the hash. The zero value is ready to use; it is not safe
// for concurrent use.
type ArgsSummarizer struct {
	buf    []byte
	kvs    []shapeKV
	shapes map[string]string
}

type shapeKV struct {
	k []byte
	v *fastjson.Value
}

// maxShapes bounds the shapes remembered; past it they are forgotten.
const maxShapes = 1 << 14

// Shape is ArgsShape(v).
func (s *ArgsSummarizer) Shape(v *fastjson.Value) string {
	s.buf = s.appendShape(s.buf[:0], v, 0)
	if sh, ok := s.shapes[string(s.buf)]; ok {
		return sh
	}
	if s.shapes == nil {
		s.shapes = map[string]string{}
	} else if len(s.shapes) >= maxShapes {
		clear(s.shapes)
	}
	sh := string(s.buf)
	s.shapes[sh] = sh
	return sh
}

const hashPrefix = "sha256:"

// Hash is ArgsHash(v).
func (s *ArgsSummarizer) Hash(v *fastjson.Value) string {
	s.buf = v.MarshalTo(s.buf[:0])
	sum := sha256.Sum256(s.buf)
	out := make([]byte, len(hashPrefix)+hex.EncodedLen(len(sum)))
	copy(out, hashPrefix)
	hex.Encode(out[len(hashPrefix):], sum[:])
	return unsafe.String(&out[0], len(out)) // out is never written again
}

func (s *ArgsSummarizer) appendShape(b []byte, v *fastjson.Value, depth int) []byte {
	if depth > 32 {
		return append(b, `"…"`...)
	}
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		// This object's keys go on top of s.kvs and come off at the end,
		// so nested objects share the slice.
		start := len(s.kvs)
		o.Visit(func(k []byte, e *fastjson.Value) { s.kvs = append(s.kvs, shapeKV{k, e}) })
		mine := s.kvs[start:]
		slices.SortFunc(mine, func(a, b shapeKV) int { return bytes.Compare(a.k, b.k) })
		b = append(b, '{')
		for i, e := range mine {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, unsafe.String(unsafe.SliceData(e.k), len(e.k)))
			b = append(b, ':')
			b = s.appendShape(b, e.v, depth+1)
		}
		clear(s.kvs[start:])
		s.kvs = s.kvs[:start]
		return append(b, '}')
	case fastjson.TypeArray:
		arr, _ := v.Array()
		var seen []string
		for _, e := range arr {
			sh := string(s.appendShape(nil, e, depth+1))
			if !slices.Contains(seen, sh) {
				seen = append(seen, sh)
			}
		}
		sort.Strings(seen)
		b = append(b, '[')
		for i, sh := range seen {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, sh...)
		}
		return append(b, ']')
	case fastjson.TypeString:
		return append(b, `"string"`...)
	case fastjson.TypeNumber:
		return append(b, `"number"`...)
	case fastjson.TypeTrue, fastjson.TypeFalse:
		return append(b, `"boolean"`...)
	}
	return append(b, `"null"`...)
}

// SetCallKey sets r.CallKey from r.EventID, or, for a record without a
// usable event_id, from the record's position (KafkaCallKey of r.Topic,
// r.Partition, r.Offset): the one rule, so that every decision of a call
// has the same key.
func (r *Row) SetCallKey() {
	if r.EventID != "" {
		r.CallKey = r.EventID
	} else {
		r.CallKey = KafkaCallKey(r.Topic, r.Partition, r.Offset)
	}
}

// KafkaCallKey is the CallKey of a record without a usable event_id.
func KafkaCallKey(topic string, partition int32, offset int64) string {
	return "kafka:" + topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}
