package otlp

import (
	"encoding/base64"
	"errors"
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/toolaudit/toolaudit/schema"
)

// errTooDeep and errTooBig are why a structured value could not be
// rendered as JSON within the limits.
var (
	errTooDeep = errors.New("nested deeper than the limit")
	errTooBig  = errors.New("larger than the limit")
)

// appendJSON appends v as plain JSON: a map becomes an object (keys in
// their order), a slice an array, ints and doubles numbers (a non-finite
// double its name as a string), bytes their base64 text, an empty value
// null. It fails beyond depth levels of nesting or max bytes of output, so
// that a hostile value costs at most that.
func appendJSON(b []byte, v pcommon.Value, depth, max int) ([]byte, error) {
	if depth <= 0 {
		return b, errTooDeep
	}
	if len(b) > max {
		return b, errTooBig
	}
	switch v.Type() {
	case pcommon.ValueTypeStr:
		b = schema.AppendString(b, v.Str())
	case pcommon.ValueTypeBool:
		b = strconv.AppendBool(b, v.Bool())
	case pcommon.ValueTypeInt:
		b = strconv.AppendInt(b, v.Int(), 10)
	case pcommon.ValueTypeDouble:
		f := v.Double()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			b = schema.AppendString(b, strconv.FormatFloat(f, 'g', -1, 64))
		} else {
			b = strconv.AppendFloat(b, f, 'g', -1, 64)
		}
	case pcommon.ValueTypeBytes:
		b = schema.AppendString(b, base64.StdEncoding.EncodeToString(v.Bytes().AsRaw()))
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		b = append(b, '[')
		for i := 0; i < s.Len(); i++ {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, s.At(i), depth-1, max); err != nil {
				return b, err
			}
		}
		b = append(b, ']')
	case pcommon.ValueTypeMap:
		b = append(b, '{')
		first := true
		var err error
		v.Map().Range(func(k string, e pcommon.Value) bool {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = schema.AppendString(b, k)
			b = append(b, ':')
			b, err = appendJSON(b, e, depth-1, max)
			return err == nil
		})
		if err != nil {
			return b, err
		}
		b = append(b, '}')
	default:
		b = append(b, "null"...)
	}
	if len(b) > max {
		return b, errTooBig
	}
	return b, nil
}
