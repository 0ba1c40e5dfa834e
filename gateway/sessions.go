package gateway

import (
	"sync"
	"sync/atomic"
)

// session is one client session's state: the catalogue it was last
// shown, whose digests its calls carry as seen_digest. (Its client is
// the one that opened it: the SDK refuses another token its id.)
type session struct {
	id    string
	shown atomic.Pointer[catalogue]
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
	delete(t.m, id)
	t.mu.Unlock()
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
