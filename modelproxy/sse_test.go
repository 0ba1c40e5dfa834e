package modelproxy

import (
	"bufio"
	"strings"
	"testing"
)

// TestPlainChunk: only a chunk that cannot hold a call, a finish or an
// error takes the fast path.
func TestPlainChunk(t *testing.T) {
	for _, tc := range []struct {
		chunk string
		plain bool
	}{
		{`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`, true},
		{`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason" : null}]}`, true},
		{`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false},
		{`{"choices":[{"index":0,"delta":{},"finish_reason": "tool_calls"}]}`, false},
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]},"finish_reason":null}]}`, false},
		{`{"error":{"message":"x"}}`, false},
		{`{"choices":[{"index":0,"delta":{"content":"say \"tool_calls\""},"finish_reason":null}]}`, true}, // escaped in a string: no member
		{`{"choices":[{"index":0,"delta":{"content":"a \"tool_calls\": b"},"finish_reason":null}]}`, true},
	} {
		if got := plainChunk([]byte(tc.chunk)); got != tc.plain {
			t.Errorf("%s: plain %v, want %v", tc.chunk, got, tc.plain)
		}
	}
}

// TestReadEvent: events split on blank lines, data lines joined, CRLF
// read, a last event without its blank line kept, a line over the
// buffer refused.
func TestReadEvent(t *testing.T) {
	in := "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n\n\n: comment\ndata: x\n\nevent: last\ndata: y"
	br := bufio.NewReaderSize(strings.NewReader(in), 16)
	var got []string
	for {
		ev, err := readEvent(br)
		if err != nil {
			break
		}
		got = append(got, ev.event+"|"+string(ev.data))
	}
	if want := "a|1\n2,|x,last|y"; strings.Join(got, ",") != want {
		t.Errorf("events %q, want %q", strings.Join(got, ","), want)
	}
	br = bufio.NewReaderSize(strings.NewReader("data: "+strings.Repeat("z", 64)+"\n\n"), 16)
	if _, err := readEvent(br); err != errLineTooLong {
		t.Errorf("long line: %v", err)
	}
}
