// Package lines reads the JSONL inputs (agent logs, listings, calls) a line
// at a time with a bound on the line, for ingest and resolverd check: one
// reader, so that every command drops an overlong line the same way and
// in bounded memory.
package lines

import (
	"bufio"
	"bytes"
	"errors"
	"slices"
)

// Append reads one line from br, through its '\n' or to the end of the
// input, and appends it to buf. A line longer than limit bytes is read to
// its end and dropped: buf comes back as it was, with tooLong. err is
// br's (io.EOF at the end of the input; a last line without '\n' comes
// with it).
//
// A long line arrives a buffer at a time; buf's capacity doubles rather
// than grow by append's 1.25 for large slices, which would leave four
// times the line behind as garbage.
func Append(br *bufio.Reader, buf []byte, limit int) (out []byte, tooLong bool, err error) {
	start := len(buf)
	for {
		var frag []byte
		frag, err = br.ReadSlice('\n')
		if !tooLong {
			if len(buf)-start+len(frag) > limit {
				tooLong, buf = true, buf[:start]
			} else {
				if len(buf)+len(frag) > cap(buf) {
					buf = slices.Grow(buf, max(len(frag), cap(buf)))
				}
				buf = append(buf, frag...)
			}
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return buf, tooLong, err
		}
	}
}

// Blank reports whether line holds only JSON whitespace (a line to skip).
func Blank(line []byte) bool {
	for _, c := range line {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

var bom = []byte("\xef\xbb\xbf")

// SkipBOM skips a UTF-8 byte order mark at the start of an input: editors
// on some systems write one. Anywhere else it is not JSON.
func SkipBOM(br *bufio.Reader) {
	if b, _ := br.Peek(len(bom)); bytes.Equal(b, bom) {
		_, _ = br.Discard(len(bom))
	}
}
