package schema

import (
	"unicode/utf8"
)

// AppendJSON appends d as one JSON object (no newline): the decision line of
// `resolverd check`. The contract's fields are always present; coercible,
// seen_digest and current_digest only when set, approval and
// baseline_version only under an approvals policy.
func (d *Decision) AppendJSON(b []byte) []byte {
	b = append(b, `{"event_id":`...)
	b = AppendString(b, d.EventID)
	b = append(b, `,"verdict":`...)
	b = AppendString(b, string(d.Verdict))
	b = append(b, `,"class":`...)
	b = AppendString(b, string(d.Class))
	b = append(b, `,"reason":`...)
	b = AppendString(b, d.Reason)
	b = append(b, `,"path":`...)
	b = AppendString(b, d.Path)
	if d.Coercible {
		b = append(b, `,"coercible":true`...)
	}
	b = append(b, `,"resolved_server":`...)
	b = AppendString(b, d.ResolvedServer)
	b = append(b, `,"resolved_tool":`...)
	b = AppendString(b, d.ResolvedTool)
	b = append(b, `,"registry_version":`...)
	b = AppendString(b, d.RegistryVersion)
	if d.Drift {
		b = append(b, `,"drift":true`...)
	} else {
		b = append(b, `,"drift":false`...)
	}
	if d.SeenDigest != "" {
		b = append(b, `,"seen_digest":`...)
		b = AppendString(b, d.SeenDigest)
	}
	if d.CurrentDigest != "" {
		b = append(b, `,"current_digest":`...)
		b = AppendString(b, d.CurrentDigest)
	}
	if d.Approval != "" {
		b = append(b, `,"approval":`...)
		b = AppendString(b, string(d.Approval))
		b = append(b, `,"baseline_version":`...)
		b = AppendString(b, d.BaselineVersion)
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does, so the output is always valid JSON; <, > and & are
// kept as they are (the output is not embedded in HTML).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but break JavaScript consumers.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
