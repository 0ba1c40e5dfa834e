package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"
	"time"

	"github.com/valyala/fastjson"
)

// Row is one decision as the pipeline stores it (the ClickHouse row of
// table decisions): the decision, the call's identity and context, the
// versions that produced it and the Kafka record it came from.
type Row struct {
	Decision

	// CallKey identifies the call within an analysis: its event_id, or
	// "kafka:<topic>/<partition>/<offset>" for a record without a usable
	// one. The store keeps one row per (AnalysisID, CallKey).
	CallKey       string
	AnalysisID    string
	ResolverBuild string
	PolicyVersion string // mode and rules the decision was made under

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
	return string(appendShape(nil, v, 0))
}

func appendShape(b []byte, v *fastjson.Value, depth int) []byte {
	if depth > 32 {
		return append(b, `"…"`...)
	}
	switch v.Type() {
	case fastjson.TypeObject:
		o, _ := v.Object()
		type kv struct {
			k string
			v *fastjson.Value
		}
		var kvs []kv
		o.Visit(func(k []byte, e *fastjson.Value) { kvs = append(kvs, kv{string(k), e}) })
		sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
		b = append(b, '{')
		for i, e := range kvs {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendString(b, e.k)
			b = append(b, ':')
			b = appendShape(b, e.v, depth+1)
		}
		return append(b, '}')
	case fastjson.TypeArray:
		arr, _ := v.Array()
		var seen []string
		for _, e := range arr {
			s := string(appendShape(nil, e, depth+1))
			if !contains(seen, s) {
				seen = append(seen, s)
			}
		}
		sort.Strings(seen)
		b = append(b, '[')
		for i, s := range seen {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, s...)
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

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// ArgsHash is "sha256:" and the hex SHA-256 of the arguments' compact JSON
// (key order as emitted): equal for the same emitted arguments, whatever
// whitespace the producer used, without storing them.
func ArgsHash(v *fastjson.Value) string {
	sum := sha256.Sum256(v.MarshalTo(nil))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// KafkaCallKey is the CallKey of a record without a usable event_id.
func KafkaCallKey(topic string, partition int32, offset int64) string {
	return "kafka:" + topic + "/" + strconv.Itoa(int(partition)) + "/" + strconv.FormatInt(offset, 10)
}
