package upstream

import (
	"bytes"
	"log/slog"
	"sync"
)

// maxLine bounds one stderr line kept or logged; the rest is dropped.
const maxLine = 1024

// tail is a command's stderr: every line is logged at debug level and
// the last n are kept, to be logged when the command ends unexpectedly
// (what a crashing server printed last is usually why). Memory is
// bounded by n lines of maxLine bytes, whatever the command writes.
type tail struct {
	log *slog.Logger
	n   int

	mu    sync.Mutex
	part  []byte   // the line being written
	lines []string // ring of the last n lines
	next  int
	full  bool
}

func newTail(log *slog.Logger, n int) *tail { return &tail{log: log, n: n, lines: make([]string, n)} }

// Write takes what the command wrote to stderr; it never fails.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := maxLine - len(t.part); room > 0 {
			t.part = append(t.part, chunk[:min(room, len(chunk))]...)
		}
		if i < 0 {
			break
		}
		t.line()
		p = p[i+1:]
	}
	return n, nil
}

// line ends the current line.
func (t *tail) line() {
	s := string(bytes.TrimRight(t.part, "\r"))
	t.part = t.part[:0]
	t.log.Debug("upstream stderr", "line", s)
	t.lines[t.next] = s
	t.next = (t.next + 1) % t.n
	if t.next == 0 {
		t.full = true
	}
}

// last returns the kept lines, oldest first, and forgets them.
func (t *tail) last() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.part) > 0 {
		t.line()
	}
	var out []string
	if t.full {
		out = append(out, t.lines[t.next:]...)
	}
	out = append(out, t.lines[:t.next]...)
	clear(t.lines)
	t.next, t.full = 0, false
	return out
}

// flush logs the kept lines with msg and attrs, at warning level.
func (t *tail) flush(msg string, attrs ...any) {
	t.log.Warn(msg, append(attrs, "stderr", t.last())...)
}
