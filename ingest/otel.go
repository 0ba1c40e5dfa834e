package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OTLP/JSON trace export shapes (only what execute_tool spans need).
type otlpExport struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpKeyValue `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []otlpSpan `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpSpan struct {
	Name              string         `json:"name"`
	StartTimeUnixNano json.Number    `json:"startTimeUnixNano"`
	Attributes        []otlpKeyValue `json:"attributes"`
}

type otlpKeyValue struct {
	Key   string       `json:"key"`
	Value otlpAnyValue `json:"value"`
}

type otlpAnyValue struct {
	StringValue *string      `json:"stringValue"`
	BoolValue   *bool        `json:"boolValue"`
	IntValue    *json.Number `json:"intValue"`
	DoubleValue *json.Number `json:"doubleValue"`
	BytesValue  *string      `json:"bytesValue"`
	ArrayValue  *struct {
		Values []otlpAnyValue `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []otlpKeyValue `json:"values"`
	} `json:"kvlistValue"`
}

// GenAI semantic-convention attribute names.
const (
	attrOperationName = "gen_ai.operation.name"
	attrToolName      = "gen_ai.tool.name"
	attrToolCallID    = "gen_ai.tool.call.id"
	attrToolCallArgs  = "gen_ai.tool.call.arguments"
	opExecuteTool     = "execute_tool"
)

// Context attributes, first present wins, span before resource.
var (
	otelSession  = []string{"gen_ai.conversation.id", "session.id"}
	otelAgent    = []string{"gen_ai.agent.id", "gen_ai.agent.name"}
	otelModel    = []string{"gen_ai.request.model", "gen_ai.response.model"}
	otelProvider = []string{"gen_ai.provider.name", "gen_ai.system"}
)

var otelFallback = Meta{Surface: "raw_json"}

// convertOTel converts the execute_tool spans of an OTLP/JSON export.
func convertOTel(line []byte, c Context, emit func(Event) error) error {
	o, err := decodeObject(line)
	if err != nil {
		return err
	}
	if o.kindOf("resourceSpans") != '[' {
		return errShape("no resourceSpans")
	}
	var x otlpExport
	if err := json.Unmarshal(line, &x); err != nil {
		return errShape(err.Error())
	}
	var calls []callAt
	for _, rs := range x.ResourceSpans {
		res := attrMap(rs.Resource.Attributes)
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				attrs := attrMap(sp.Attributes)
				op, _ := attrs[attrOperationName].str()
				name, hasName := attrs[attrToolName].str()
				if op != opExecuteTool && !(op == "" && strings.HasPrefix(sp.Name, opExecuteTool+" ")) {
					continue
				}
				if !hasName {
					name = strings.TrimSpace(strings.TrimPrefix(sp.Name, opExecuteTool))
				}
				id, _ := attrs[attrToolCallID].str()
				var args argValue
				if v, ok := attrs[attrToolCallArgs]; ok {
					if s, isStr := v.str(); isStr {
						args = argsFromText(s)
					} else {
						args = argsFromJSON(v.json())
					}
				}
				object := Meta{
					SessionID: lookup(attrs, res, otelSession),
					AgentID:   lookup(attrs, res, otelAgent),
					Model:     lookup(attrs, res, otelModel),
					Provider:  lookup(attrs, res, otelProvider),
				}
				if sp.StartTimeUnixNano != "" {
					ns, err := strconv.ParseInt(sp.StartTimeUnixNano.String(), 10, 64)
					if err != nil {
						return errShape(fmt.Sprintf("span %q: startTimeUnixNano %q", sp.Name, sp.StartTimeUnixNano))
					}
					if ns != 0 {
						object.Time = time.Unix(0, ns).UTC()
					}
				}
				calls = append(calls, callAt{tc: toolCall{id: id, name: name, args: args}, object: object})
			}
		}
	}
	if len(calls) == 0 {
		return nil
	}
	return emitCalls(c, otelFallback, calls, emit)
}

func attrMap(kvs []otlpKeyValue) map[string]otlpAnyValue {
	m := make(map[string]otlpAnyValue, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// lookup returns the first of keys that span or resource attributes hold
// as a non-empty string, span first.
func lookup(span, resource map[string]otlpAnyValue, keys []string) string {
	for _, attrs := range [...]map[string]otlpAnyValue{span, resource} {
		for _, k := range keys {
			if s, ok := attrs[k].str(); ok && s != "" {
				return s
			}
		}
	}
	return ""
}

// str returns a string value.
func (v otlpAnyValue) str() (string, bool) {
	if v.StringValue == nil {
		return "", false
	}
	return *v.StringValue, true
}

// json renders an AnyValue as plain JSON: kvlists become objects, arrays
// arrays, ints and doubles numbers, bytes their base64 text; an empty
// value is null.
func (v otlpAnyValue) json() json.RawMessage {
	var buf bytes.Buffer
	v.appendJSON(&buf)
	return buf.Bytes()
}

func (v otlpAnyValue) appendJSON(buf *bytes.Buffer) {
	switch {
	case v.StringValue != nil:
		b, _ := marshal(*v.StringValue)
		buf.Write(b)
	case v.BoolValue != nil:
		buf.WriteString(strconv.FormatBool(*v.BoolValue))
	case v.IntValue != nil:
		writeNumber(buf, *v.IntValue)
	case v.DoubleValue != nil:
		writeNumber(buf, *v.DoubleValue)
	case v.BytesValue != nil:
		b, _ := marshal(*v.BytesValue)
		buf.Write(b)
	case v.ArrayValue != nil:
		buf.WriteByte('[')
		for i, e := range v.ArrayValue.Values {
			if i > 0 {
				buf.WriteByte(',')
			}
			e.appendJSON(buf)
		}
		buf.WriteByte(']')
	case v.KvlistValue != nil:
		buf.WriteByte('{')
		for i, kv := range v.KvlistValue.Values {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := marshal(kv.Key)
			buf.Write(k)
			buf.WriteByte(':')
			kv.Value.appendJSON(buf)
		}
		buf.WriteByte('}')
	default:
		buf.WriteString("null")
	}
}

// writeNumber writes n as a JSON number; OTLP/JSON may quote 64-bit ints,
// and spells non-finite doubles as strings, which stay strings here.
func writeNumber(buf *bytes.Buffer, n json.Number) {
	if _, err := strconv.ParseFloat(n.String(), 64); err == nil {
		buf.WriteString(n.String())
		return
	}
	b, _ := marshal(n.String())
	buf.Write(b)
}
