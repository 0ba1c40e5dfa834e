// Package bearer checks HTTP bearer tokens against a tokens file that can
// change while the server runs.
//
// # The file
//
// One token per line, with an optional name and a colon before it
// ("ci-runner:3f9c..."; spaces around either are dropped); blank lines and lines starting with '#' are
// skipped; surrounding spaces are trimmed. A name is letters, digits, '.',
// '_' and '-'; a token containing ':' must therefore be given a name. A
// token is at least MinTokenLen bytes without spaces; a token or a name
// given twice is an error. Unnamed tokens are named "line-N". A name
// identifies its client (the gateway's agent_id); a token is never shown.
//
// # Checking
//
// A presented token is hashed (SHA-256) and compared with the hash of
// every configured token with crypto/subtle, all of them every time: the
// time taken does not depend on which token matched, how much of one
// matched, or the token's length.
//
// # Reloading
//
// Reload reads the file again; Watch reloads whenever the file's size,
// modification time or inode changes (a Kubernetes Secret update replaces
// a symlink: the inode changes), and the daemon calls Reload on SIGHUP. A
// file that cannot be read or parsed keeps the tokens in force and is
// reported: a typo must not open or close the API. An empty file (no
// tokens) is valid and refuses every request (ErrNoTokens: 403).
package bearer

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MinTokenLen is the shortest token accepted in the file: shorter ones
// are guessable.
const MinTokenLen = 16

// maxFile bounds the tokens file read.
const maxFile = 1 << 20

// Errors of Authorize.
var (
	// ErrMissing: no "Authorization: Bearer" header (401).
	ErrMissing = errors.New("missing bearer token")
	// ErrInvalid: the token is not one of the file's (401).
	ErrInvalid = errors.New("invalid bearer token")
	// ErrNoTokens: the file lists no token, so every request is refused
	// whatever it presents (403).
	ErrNoTokens = errors.New("no tokens are configured: every request is refused")
)

type token struct {
	name string
	hash [sha256.Size]byte
}

// Tokens is the set of valid tokens, read from a file. It is safe for
// concurrent use.
type Tokens struct {
	path string
	log  *slog.Logger
	set  atomic.Pointer[[]token]

	mu   sync.Mutex // serialises reloads
	stat fileStat
}

type fileStat struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// Load reads the tokens file at path. A nil log logs nothing.
func Load(path string, log *slog.Logger) (*Tokens, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t := &Tokens{path: path, log: log}
	if err := t.Reload(); err != nil {
		return nil, err
	}
	return t, nil
}

// Len returns how many tokens are in force.
func (t *Tokens) Len() int { return len(*t.set.Load()) }

// Reload reads the file again. On error the tokens in force stay.
func (t *Tokens) Reload() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err := statOf(t.path)
	if err != nil {
		return fmt.Errorf("bearer: %w", err)
	}
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("bearer: %w", err)
	}
	defer f.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(io.LimitReader(f, maxFile+1)); err != nil {
		return fmt.Errorf("bearer: read %s: %w", t.path, err)
	}
	if buf.Len() > maxFile {
		return fmt.Errorf("bearer: %s is larger than %d bytes", t.path, maxFile)
	}
	set, err := parse(buf.Bytes())
	if err != nil {
		return fmt.Errorf("bearer: %s: %w", t.path, err)
	}
	old := t.set.Swap(&set)
	t.stat = st
	if old != nil {
		t.log.Info("bearer tokens reloaded", "file", t.path, "tokens", len(set))
	}
	if len(set) == 0 {
		t.log.Warn("the tokens file lists no token: every request that needs one is refused (403)", "file", t.path)
	}
	return nil
}

func parse(b []byte) ([]token, error) {
	set := []token{}
	names := map[string]bool{}
	hashes := map[[sha256.Size]byte]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, maxFile)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, tok := fmt.Sprintf("line-%d", n), line
		if i := strings.IndexByte(line, ':'); i >= 0 {
			name, tok = strings.TrimSpace(line[:i]), strings.TrimSpace(line[i+1:])
			if !validName(name) {
				return nil, fmt.Errorf("line %d: %q before ':' is not a name (letters, digits, . _ -)", n, name)
			}
		}
		if len(tok) < MinTokenLen {
			return nil, fmt.Errorf("line %d: token shorter than %d bytes", n, MinTokenLen)
		}
		if strings.ContainsAny(tok, " \t") {
			return nil, fmt.Errorf("line %d: token contains a space", n)
		}
		h := sha256.Sum256([]byte(tok))
		if hashes[h] {
			return nil, fmt.Errorf("line %d: token given twice", n)
		}
		if names[name] {
			return nil, fmt.Errorf("line %d: name %q given twice", n, name)
		}
		hashes[h], names[name] = true, true
		set = append(set, token{name: name, hash: h})
	}
	return set, sc.Err()
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Refusal is how a server answers Authorize's error err: 403 for
// ErrNoTokens, else 401 with the WWW-Authenticate challenge of realm
// (RFC 6750; error="invalid_token" for ErrInvalid).
func Refusal(err error, realm string) (status int, challenge string) {
	switch {
	case errors.Is(err, ErrNoTokens):
		return http.StatusForbidden, ""
	case errors.Is(err, ErrInvalid):
		return http.StatusUnauthorized, `Bearer realm="` + realm + `", error="invalid_token"`
	}
	return http.StatusUnauthorized, `Bearer realm="` + realm + `"`
}

// Authorize checks the request's "Authorization: Bearer TOKEN" header and
// returns the token's name, or ErrMissing, ErrInvalid or ErrNoTokens.
func (t *Tokens) Authorize(r *http.Request) (string, error) {
	set := *t.set.Load()
	if len(set) == 0 {
		return "", ErrNoTokens
	}
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMissing
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return "", ErrMissing
	}
	sum := sha256.Sum256([]byte(tok))
	match := -1
	for i := range set {
		if subtle.ConstantTimeCompare(sum[:], set[i].hash[:]) == 1 {
			match = i // no early exit: every token is compared
		}
	}
	if match < 0 {
		return "", ErrInvalid
	}
	return set[match].name, nil
}

// Watch reloads the file whenever it changes, checking every interval,
// until ctx is done. Failed reloads are logged; the tokens in force stay.
func (t *Tokens) Watch(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st, err := statOf(t.path)
		t.mu.Lock()
		changed := err == nil && st != t.stat
		t.mu.Unlock()
		if err != nil {
			t.log.Warn("bearer tokens file cannot be read; the tokens in force stay", "file", t.path, "err", err)
			continue
		}
		if changed {
			if err := t.Reload(); err != nil {
				t.log.Error("bearer tokens not reloaded; the tokens in force stay", "err", err)
				t.mu.Lock()
				t.stat = st // retried at the file's next change, not every tick
				t.mu.Unlock()
			}
		}
	}
}

func statOf(path string) (fileStat, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStat{}, err
	}
	st := fileStat{size: fi.Size(), mtime: fi.ModTime()}
	if s, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = s.Ino
	}
	return st, nil
}
