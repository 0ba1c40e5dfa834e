package schema

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/toolaudit/toolaudit/jsontape"
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

	// Source is who decided: SourceStream, SourceAPI, SourceGateway,
	// SourceModelProxy or SourceReanalysis. The store keeps one row per (AnalysisID, CallKey,
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

	// EmittedAt is the call's emitted_at; for a call with no usable time
	// (MALFORMED), its record's timestamp (WindowTime), so that a range
	// query (diff, the dashboards) finds it where re-analysis places it;
	// zero only when neither is known.
	EmittedAt time.Time
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

	// TraceID and SpanID are the OpenTelemetry trace and span the call
	// was recorded in (hex), "" when its source has none.
	TraceID, SpanID string
}

// Source is who decided a call (wire contract v1.1).
type Source string

// Sources of decisions.
const (
	SourceStream  Source = "stream"  // decided from the calls topic
	SourceAPI     Source = "api"     // answered by POST /v1/resolve
	SourceGateway Source = "gateway" // decided in the MCP gateway
	// SourceModelProxy: decided in the model API proxy (resolverd proxy,
	// package modelproxy), a tool call a model returned.
	SourceModelProxy Source = "model-proxy"
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
	r.TraceID, r.SpanID = c.TraceID, c.SpanID
}

// ArgsShape describes v without its values: objects as their sorted keys
// with the shape of each value, arrays as the distinct shapes of their
// items, scalars as their JSON type. {"q":"x","n":[1,2]} gives
// {"n":["number"],"q":"string"}.
func ArgsShape(v jsontape.Value) string {
	var s ArgsSummarizer
	return s.Shape(v)
}

// ArgsHash is the hash of the arguments that an ArgsSummarizer without a
// key gives: "sha256:" and the hex SHA-256 of their compact JSON.
func ArgsHash(v jsontape.Value) string {
	var s ArgsSummarizer
	return s.Hash(v)
}

// ArgsSummarizer computes ArgsShape and the arguments' hash call after
// call with reused buffers, and returns one string per distinct short
// shape (the calls of a tool mostly share theirs) and hashes cut from
// shared blocks, so that summarizing a call's arguments mostly allocates
// nothing. The zero value hashes without a key; NewArgsSummarizer sets
// one. It is not safe for concurrent use.
type ArgsSummarizer struct {
	key    *ArgsKey
	mac    hash.Hash // HMAC-SHA-256 under key, made on first use
	sum    []byte    // mac's sum
	slab   []byte    // the block the next hashes are cut from (hashSlab)
	buf    []byte
	kvs    []shapeKV
	order  []int32  // the positions in kvs of an object's members, by name
	seen   []string // distinct item shapes of the arrays being described
	shapes map[string]string
}

// NewArgsSummarizer returns a summarizer whose hashes are keyed with k;
// nil k hashes without a key.
func NewArgsSummarizer(k *ArgsKey) ArgsSummarizer { return ArgsSummarizer{key: k} }

type shapeKV struct {
	k []byte
	v jsontape.Value
}

// maxShapes bounds the shapes remembered, and maxSharedShape the length of
// one: past them, a shape costs an allocation per call, and a stream of
// huge distinct shapes cannot grow the memory.
const (
	maxShapes      = 1 << 14
	maxSharedShape = 1 << 10
)

// Shape is ArgsShape(v).
func (s *ArgsSummarizer) Shape(v jsontape.Value) string {
	s.buf = s.appendShape(s.buf[:0], v, 0)
	defer s.trim()
	if len(s.buf) > maxSharedShape {
		return string(s.buf)
	}
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

// trim drops scratch buffers that large arguments grew.
func (s *ArgsSummarizer) trim() {
	if cap(s.buf) > 1<<20 {
		s.buf = nil
	}
	if cap(s.kvs) > 1<<14 {
		s.kvs = nil
	}
	if cap(s.order) > 1<<14 {
		s.order = nil
	}
	if cap(s.seen) > 1<<14 {
		s.seen = nil
	}
}

// Hash returns the hash of v's compact JSON (member order, escapes and
// number spelling as emitted; whitespace removed): equal for the same
// emitted arguments, whatever the producer's layout, without storing
// them. Without a key it is "sha256:" and the hex SHA-256; with a key,
// "hmac-sha256:", the key's ID, ":" and the hex HMAC-SHA-256 (see ArgsKey).
func (s *ArgsSummarizer) Hash(v jsontape.Value) string {
	s.buf = v.AppendCompact(s.buf[:0])
	defer s.trim()
	var sum [sha256.Size]byte
	prefix := hashPrefix
	if s.key == nil {
		sum = sha256.Sum256(s.buf)
	} else {
		if s.mac == nil {
			s.mac = hmac.New(sha256.New, s.key.secret)
		}
		s.mac.Reset()
		s.mac.Write(s.buf)
		// Into a buffer of s: sum would escape to the heap through the
		// interface call, an allocation per call keyed or not.
		s.sum = s.mac.Sum(s.sum[:0])
		copy(sum[:], s.sum)
		prefix = s.key.prefix
	}
	n := len(prefix) + hex.EncodedLen(len(sum))
	if len(s.slab)+n > cap(s.slab) {
		size := hashSlab
		if s.slab == nil { // the first hash: a summarizer used once makes only it
			size = n
		}
		s.slab = make([]byte, 0, size)
	}
	out := s.slab[len(s.slab) : len(s.slab)+n]
	s.slab = s.slab[:len(s.slab)+n]
	copy(out, prefix)
	hex.Encode(out[len(prefix):], sum[:])
	return unsafe.String(&out[0], len(out)) // out is never written again
}

// hashSlab is the size of the blocks hashes are cut from after the first:
// one allocation per 57 plain hashes instead of one per call. A hash keeps its block
// alive; the rows of a batch hold theirs for the batch's life, and let
// go of them together.
const hashSlab = 4096

const hashPrefix = "sha256:"

// sortByName sorts order, positions in kvs, by the members' names: by
// insertion for the few members arguments mostly have, moving small
// integers (moving the members themselves, which hold pointers, costs
// write barriers while the collector runs), by the library's sort for
// many.
func sortByName(order []int32, kvs []shapeKV) {
	if len(order) > 12 {
		slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(kvs[a].k, kvs[b].k) })
		return
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && bytes.Compare(kvs[order[j]].k, kvs[order[j-1]].k) < 0; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}

// smallObject is the most members of an object whose shape is written
// from an array on the stack: most arguments' objects. Storing and
// sorting members (which hold pointers) there costs no write barrier
// while the collector runs, and nothing needs clearing after.
const smallObject = 8

// appendSmallObject is appendShape of an object of at most smallObject
// members. kvs is indexed directly, never sliced: stores through a slice
// would pay the barriers.
func (s *ArgsSummarizer) appendSmallObject(b []byte, v jsontape.Value, depth int) []byte {
	var kvs [smallObject]shapeKV
	n := 0
	for m := v.Members(); m.Next() && n < smallObject; n++ {
		kvs[n] = shapeKV{m.Name(), m.Value()}
		// Sorted by name as they come, by insertion.
		for j := n; j > 0 && bytes.Compare(kvs[j].k, kvs[j-1].k) < 0; j-- {
			kvs[j], kvs[j-1] = kvs[j-1], kvs[j]
		}
	}
	b = append(b, '{')
	for i := 0; i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendName(b, kvs[i].k)
		b = append(b, ':')
		b = s.appendShape(b, kvs[i].v, depth+1)
	}
	return append(b, '}')
}

// appendName is AppendString of a member's name: a name of printable
// ASCII without a quote or a backslash, the common one, is written as it
// is, which is what AppendString writes for it.
func appendName(b []byte, k []byte) []byte {
	if !jsontape.Plain(k) {
		return AppendString(b, unsafe.String(unsafe.SliceData(k), len(k)))
	}
	b = append(b, '"')
	b = append(b, k...)
	return append(b, '"')
}

func (s *ArgsSummarizer) appendShape(b []byte, v jsontape.Value, depth int) []byte {
	if depth > 32 {
		return append(b, `"…"`...)
	}
	switch v.Kind() {
	case jsontape.Object:
		if v.Len() <= smallObject {
			return s.appendSmallObject(b, v, depth)
		}
		// This object's keys go on top of s.kvs and come off at the end,
		// so nested objects share the slice.
		start := len(s.kvs)
		for m := v.Members(); m.Next(); {
			s.kvs = append(s.kvs, shapeKV{m.Name(), m.Value()})
		}
		mine := s.kvs[start:]
		// Their order, sorted by name, goes on top of s.order likewise.
		ostart := len(s.order)
		for i := range mine {
			s.order = append(s.order, int32(i))
		}
		order := s.order[ostart:]
		sortByName(order, mine)
		b = append(b, '{')
		for i, j := range order {
			if i > 0 {
				b = append(b, ',')
			}
			e := &mine[j]
			b = appendName(b, e.k)
			b = append(b, ':')
			b = s.appendShape(b, e.v, depth+1)
		}
		s.order = s.order[:ostart]
		clear(s.kvs[start:])
		s.kvs = s.kvs[:start]
		return append(b, '}')
	case jsontape.Array:
		// Each item's shape is written after b, kept in s.seen when it is
		// new, and cut off again; then the distinct shapes, sorted.
		start := len(s.seen)
		var index map[string]bool // for arrays of many distinct shapes
		for it := v.Items(); it.Next(); {
			mark := len(b)
			b = s.appendShape(b, it.Value(), depth+1)
			sh := b[mark:]
			b = b[:mark]
			if index != nil {
				if index[string(sh)] {
					continue
				}
			} else if slices.Contains(s.seen[start:], string(sh)) {
				continue
			}
			str := string(sh)
			s.seen = append(s.seen, str)
			if index == nil && len(s.seen)-start > 8 {
				index = make(map[string]bool, 16)
				for _, x := range s.seen[start:] {
					index[x] = true
				}
			} else if index != nil {
				index[str] = true
			}
		}
		mine := s.seen[start:]
		slices.Sort(mine)
		b = append(b, '[')
		for i, sh := range mine {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, sh...)
		}
		clear(s.seen[start:])
		s.seen = s.seen[:start]
		return append(b, ']')
	case jsontape.String:
		return append(b, `"string"`...)
	case jsontape.Number:
		return append(b, `"number"`...)
	case jsontape.True, jsontape.False:
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
