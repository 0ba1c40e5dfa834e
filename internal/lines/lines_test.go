package lines

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestAppend: a line within the limit is appended whole to what buf held
// (also one longer than the reader's buffer), an overlong one is consumed
// and dropped, and the last line without '\n' comes with io.EOF.
func TestAppend(t *testing.T) {
	long := strings.Repeat("x", 100)
	br := bufio.NewReaderSize(strings.NewReader("a\n"+long+"\n"+long+"y\nlast"), 16) // 16: smaller than the lines
	for i, step := range []struct {
		limit   int
		want    string // after "kept:"
		tooLong bool
		eof     bool
	}{
		{10, "a\n", false, false},
		{101, long + "\n", false, false},
		{101, "", true, false},
		{10, "last", false, true},
	} {
		got, tooLong, err := Append(br, []byte("kept:"), step.limit)
		if string(got) != "kept:"+step.want || tooLong != step.tooLong || errors.Is(err, io.EOF) != step.eof || (err != nil && !errors.Is(err, io.EOF)) {
			t.Fatalf("line %d: %q, tooLong %v, err %v; want %q, %v, eof %v", i, got, tooLong, err, "kept:"+step.want, step.tooLong, step.eof)
		}
	}
}

// TestSkipBOM: a byte order mark at the start is skipped, nothing else.
func TestSkipBOM(t *testing.T) {
	for in, want := range map[string]string{"\xef\xbb\xbf{}": "{}", "{}": "{}", "\xef\xbb{}": "\xef\xbb{}"} {
		br := bufio.NewReader(strings.NewReader(in))
		SkipBOM(br)
		if rest, _ := io.ReadAll(br); string(rest) != want {
			t.Errorf("%q: %q, want %q", in, rest, want)
		}
	}
}
