package gateway

import (
	"sync"
	"sync/atomic"
	"time"
)

// session is one client session's state: the catalogue it was last
// shown, whose digests its calls carry as seen_digest, and what of its
// client is connected. (Its client is the one that opened it: the SDK
// refuses another token its id.)
type session struct {
	id    string
	shown atomic.Pointer[catalogue]
	// close ends the SDK's session (and so removes it from the table).
	close func()

	mu       sync.Mutex
	streams  int  // GET event streams open
	posts    int  // POSTs in progress
	streamed bool // the client opened an event stream once
	timer    *time.Timer
}

// active notes a request of the client starting (a GET event stream or
// a POST): the session is in use.
func (s *session) active(stream bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stream {
		s.streams++
		s.streamed = true
	} else {
		s.posts++
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// inactive notes that request ending. A client that keeps an event
// stream open while it lives (both SDKs do) and now has none, nor a
// request in progress, has closed its transport, or is reconnecting:
// the session is closed unless it comes back within grace. A client
// that never opened a stream is left to the idle timeout.
func (s *session) inactive(stream bool, grace time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if stream {
		s.streams--
	} else {
		s.posts--
	}
	if s.streamed && s.streams == 0 && s.posts == 0 && s.timer == nil && s.close != nil {
		s.timer = time.AfterFunc(grace, s.close)
	}
}

// stop stops the grace timer of a session closed.
func (s *session) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
}

// sessions is the table of open client sessions, bounded.
type sessions struct {
	max int

	mu sync.Mutex
	m  map[string]*session
}

func newSessions(max int) *sessions { return &sessions{max: max, m: map[string]*session{}} }

// add registers a session; false when the table is full.
func (t *sessions) add(s *session) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= t.max {
		return false
	}
	t.m[s.id] = s
	return true
}

func (t *sessions) remove(id string) {
	t.mu.Lock()
	s := t.m[id]
	delete(t.m, id)
	t.mu.Unlock()
	if s != nil {
		s.stop()
	}
}

// get returns the session, or nil.
func (t *sessions) get(id string) *session {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// full reports whether a new session would be refused.
func (t *sessions) full() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m) >= t.max
}

func (t *sessions) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
