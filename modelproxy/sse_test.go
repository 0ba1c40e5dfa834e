package modelproxy

import (
	"bufio"
	"slices"
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/jsontape"
)

// TestPlainChunk: only a chunk that holds no call and no finish, its
// names read unescaped, takes the fast path (an error is handled before).
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
		{`{"choices":[{"index":0,"delta":{"content":"say \"tool_calls\""},"finish_reason":null}]}`, true}, // escaped in a string: no member
		{`{"choices":[{"index":0,"delta":{"content":"a \"tool_calls\": b"},"finish_reason":null}]}`, true},
		{`{"choices":[{"index":0,"delta":{"tool\u005fcalls":[{"index":0}]},"finish_reason":null}]}`, false}, // the name escaped: a member all the same
		{`{"choices":[{"index":0,"delta":{},"finish\u005freason":"stop"}]}`, false},
		{`{"choices":[{"index":0,"delta":{"function_call":{"name":"x"}},"finish_reason":null}]}`, false},
	} {
		var tape jsontape.Tape
		if err := tape.Parse([]byte(tc.chunk)); err != nil {
			t.Fatal(err)
		}
		if got := plainChunk(tape.Root()); got != tc.plain {
			t.Errorf("%s: plain %v, want %v", tc.chunk, got, tc.plain)
		}
	}
}

// TestReadEvent: events split on blank lines, data lines joined, CRLF
// read, a last event without its blank line kept, a line longer than
// the buffer gathered, one over the limit (its newline counted)
// refused, and an event of lines over the event limit (comments
// counted) refused.
func TestReadEvent(t *testing.T) {
	long := strings.Repeat("w", 33) // with "data: " and "\n": 40 bytes
	in := "event: a\r\ndata: 1\r\ndata: 2\r\n\r\n\n\n: comment\ndata: " + long + "\n\nevent: last\ndata: y"
	reader := func(in string) *sseReader {
		return &sseReader{br: bufio.NewReaderSize(strings.NewReader(in), 16), max: 40, maxEvent: 100}
	}
	r := reader(in)
	var got []string
	for {
		ev, err := r.next()
		if err != nil {
			break
		}
		got = append(got, ev.event+"|"+string(ev.data))
	}
	if want := "a|1\n2,|" + long + ",last|y"; strings.Join(got, ",") != want {
		t.Errorf("events %q, want %q", strings.Join(got, ","), want)
	}
	for _, in := range []string{"data: " + long + "w\n\n", "data: " + strings.Repeat("z", 64) + "\n\n", "data: " + strings.Repeat("z", 64)} {
		if _, err := reader(in).next(); err != errLineTooLong {
			t.Errorf("%d-byte line: %v, want errLineTooLong", len(in)-1, err)
		}
	}
	for _, in := range []string{strings.Repeat("data: 0123456789\n", 6) + "\n", strings.Repeat(": keep-alive 012345\n", 6)} {
		if _, err := reader(in).next(); err != errEventTooBig {
			t.Errorf("%q: %v, want errEventTooBig", in, err)
		}
	}
	if ev, err := reader(strings.Repeat("data: 0123456789\n", 5) + "\n").next(); err != nil || len(ev.data) != 5*11-1 {
		t.Errorf("an event within the limit: %v", err)
	}
	// Data as the SDKs read it (one space after the colon dropped, lines
	// joined by "\n"), each event's bytes as they came, and every event
	// unchanged by the reads after it (its data a view of its bytes).
	in = "data\n\ndata:x\n\ndata:  two\n\ndata: a\ndata\ndata: b\n\n: c\ndata: " + long + "\nevent: e\n\n" +
		"data: 0123456789\ndata: abcdefghij\ndata: ABCDEFGHIJ\n\ndata: end" // lines longer than the buffer
	r = reader(in)
	var evs []*sseEvent
	for {
		ev, err := r.next()
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	var datas, raws []string
	for _, ev := range evs {
		datas = append(datas, string(ev.data))
		raws = append(raws, string(ev.raw))
	}
	if want := []string{"", "x", " two", "a\n\nb", long, "0123456789\nabcdefghij\nABCDEFGHIJ", "end"}; !slices.Equal(datas, want) {
		t.Errorf("data %q, want %q", datas, want)
	}
	if strings.Join(raws, "") != in {
		t.Errorf("raw %q, want %q", strings.Join(raws, ""), in)
	}
}
