// Package lockedbuf is a bytes.Buffer that a process (a command's log, a
// child's stderr) writes while a test reads it.
package lockedbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent use; the zero value is empty.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String is what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len is how many bytes were written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// From is what was written from offset n on.
func (s *Buffer) From(n int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return string(s.b.Bytes()[min(n, s.b.Len()):])
}
