package approvals

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// lockHeader is the first line of a lockfile: the format and its version.
const lockHeader = `{"toolaudit":"approvals-lock/v1"}`

// WriteLock writes the baseline b as a lockfile: the header line, then
// one JSON object per reviewed definition, sorted by registry, server,
// tool and digest, members in a fixed order. The same baseline always
// gives the same bytes, and a change to it is a change of the lines of
// the definitions it touches: a lockfile is reviewed as a diff.
func WriteLock(w io.Writer, b *Baseline) error {
	bw := bufio.NewWriter(w)
	bw.WriteString(lockHeader + "\n")
	var line []byte
	for _, e := range b.Entries() {
		line = appendEntry(line[:0], e)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendEntry(b []byte, e *Entry) []byte {
	b = append(b, '{')
	b = appendDef(b, e.Registry, e.Server, e.Tool, e.Digest, e.DescriptionDigest, "state", string(e.State), e.By, e.At, e.Reason)
	return append(b, '}')
}

// maxLockLine bounds a lockfile's line.
const maxLockLine = maxEvent

// ReadLock reads a lockfile as the approval events that rebuild its
// baseline: an approve or reject event per line, in the file's order.
// The header must be the first line; a definition named twice, a line
// that is not an entry, or a line longer than 64 KiB is an error naming
// its line.
func ReadLock(r io.Reader) ([]*Event, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxLockLine)
	var out []*Event
	seen := map[defKey]int{}
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if n == 1 {
			if string(line) != lockHeader {
				return nil, fmt.Errorf("lockfile line 1: not %s", lockHeader)
			}
			continue
		}
		if len(line) == 0 {
			continue
		}
		e, err := decodeEntry(line)
		if err != nil {
			return nil, fmt.Errorf("lockfile line %d: %w", n, err)
		}
		k := defKey{ToolKey{e.Registry, e.Server, e.Tool}, e.Digest}
		if first, dup := seen[k]; dup {
			return nil, fmt.Errorf("lockfile line %d: definition of line %d again", n, first)
		}
		seen[k] = n
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("lockfile line %d: longer than %d bytes", n+1, maxLockLine)
		}
		return nil, fmt.Errorf("lockfile: %w", err)
	}
	if n == 0 {
		return nil, errors.New("lockfile is empty (no header)")
	}
	return out, nil
}

// decodeEntry reads one lockfile entry as an approve or reject event.
// Unknown members are refused: a misspelt one must not drop a field.
func decodeEntry(line []byte) (*Event, error) {
	e := &Event{}
	var state, at string
	fields := map[string]*string{
		"registry": &e.Registry, "server": &e.Server, "tool": &e.Tool, "digest": &e.Digest,
		"description_digest": &e.DescriptionDigest, "state": &state, "by": &e.By, "at": &at, "reason": &e.Reason,
	}
	if err := readStrings(line, fields, true); err != nil {
		return nil, err
	}
	switch State(state) {
	case Approved:
		e.Verb = Approve
	case Rejected:
		e.Verb = Reject
	default:
		return nil, fmt.Errorf("state %q: want approved or rejected", state)
	}
	var err error
	if e.At, err = schema.ParseTime(at); err != nil {
		return nil, fmt.Errorf("at %q is not an RFC 3339 UTC time", at)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return e, nil
}

// LockBaseline is the baseline of a lockfile's events (ReadLock), for
// deciding against a lockfile: its version is the number of entries, and
// its label (baseline_version) "lock:" and the first 16 hex digits of
// the SHA-256 of the lockfile as WriteLock writes it, so that a decision
// names the lockfile's content, not a number a topic's baseline could
// also have.
func LockBaseline(es []*Event) (*Baseline, error) {
	var s Set
	for i, e := range es {
		if err := s.Apply(e, int64(i+1)); err != nil {
			return nil, err
		}
	}
	b := s.Snapshot()
	h := sha256.New()
	if err := WriteLock(h, b); err != nil {
		return nil, err
	}
	b.label = "lock:" + hex.EncodeToString(h.Sum(nil))[:16]
	return b, nil
}

// Sync returns the events that make baseline cur's entries want's (a
// lockfile's, ReadLock): want's verdicts where cur lacks or differs from
// them, as the lockfile has them, then a revocation by by at at of every
// definition cur has and want does not name; sorted by key. Applying them
// to cur's events gives a baseline whose lockfile is want's.
func Sync(cur *Baseline, want []*Event, by string, at time.Time) []*Event {
	var out []*Event
	named := map[defKey]bool{}
	for _, w := range want {
		named[defKey{ToolKey{w.Registry, w.Server, w.Tool}, w.Digest}] = true
		st := Approved
		if w.Verb == Reject {
			st = Rejected
		}
		e := cur.Lookup(w.Registry, w.Server, w.Tool, w.Digest)
		if e != nil && e.State == st && e.DescriptionDigest == w.DescriptionDigest && e.By == w.By &&
			e.At.Equal(w.At.Truncate(time.Millisecond)) && e.Reason == w.Reason {
			continue
		}
		c := *w
		if c.EventID == "" {
			c.EventID = "lock-" + strconv.FormatInt(at.UnixNano(), 36) + "-" + strconv.Itoa(len(out))
		}
		out = append(out, &c)
	}
	for _, e := range cur.Entries() {
		if named[defKey{ToolKey{e.Registry, e.Server, e.Tool}, e.Digest}] {
			continue
		}
		out = append(out, &Event{EventID: "lock-" + strconv.FormatInt(at.UnixNano(), 36) + "-" + strconv.Itoa(len(out)),
			Registry: e.Registry, Server: e.Server, Tool: e.Tool, Digest: e.Digest, Verb: Revoke, By: by, At: at,
			Reason: "not in the imported lockfile"})
	}
	slices.SortStableFunc(out, func(a, b *Event) int {
		return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Server, b.Server),
			cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Digest, b.Digest))
	})
	return out
}
