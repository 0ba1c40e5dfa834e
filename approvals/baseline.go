package approvals

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/toolaudit/toolaudit/schema"
)

// DescriptionDigest is the digest of a tool's description, the second,
// separately reported digest of a definition (a changed description is
// how tool poisoning works): "sha256:" and the hex SHA-256 of the RFC
// 8785 canonical JSON of {"description":…}. Listings as decoded carry no
// annotations (schema.Tool), so they are not covered.
func DescriptionDigest(description string) (string, error) {
	doc := schema.AppendString([]byte(`{"description":`), description)
	doc = append(doc, '}')
	canon, err := jcs.Transform(doc)
	if err != nil {
		return "", fmt.Errorf("canonicalize description: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// State is a reviewed definition's standing.
type State string

// States of an Entry.
const (
	Approved State = "approved"
	Rejected State = "rejected"
)

// Entry is the last verdict on one definition.
type Entry struct {
	Registry, Server, Tool string
	Digest                 string
	DescriptionDigest      string
	State                  State
	By                     string
	At                     time.Time
	Reason                 string
}

// ToolKey names a tool of a registry.
type ToolKey struct{ Registry, Server, Tool string }

type defKey struct {
	ToolKey
	Digest string
}

// Baseline is the approved baseline at one version: immutable, safe for
// concurrent use. The zero Baseline is empty at version 0; a nil
// *Baseline reads as empty.
type Baseline struct {
	version int64
	label   string // Label, made once
	defs    map[defKey]*Entry
	tools   map[ToolKey][]*Entry // by digest
}

// Version is the number of approval events applied (for the topic: the
// offset after the last one), the same on every instance that applied
// the same events.
func (b *Baseline) Version() int64 {
	if b == nil {
		return 0
	}
	return b.version
}

// Lookup returns the last verdict on the definition, or nil: one map
// lookup.
func (b *Baseline) Lookup(registry, server, tool, digest string) *Entry {
	if b == nil {
		return nil
	}
	return b.defs[defKey{ToolKey{registry, server, tool}, digest}]
}

// Tool returns the reviewed definitions of a tool, by digest.
func (b *Baseline) Tool(registry, server, tool string) []*Entry {
	if b == nil {
		return nil
	}
	return b.tools[ToolKey{registry, server, tool}]
}

// Approved returns the approved digests of a tool, by digest.
func (b *Baseline) Approved(registry, server, tool string) []string {
	var out []string
	for _, e := range b.Tool(registry, server, tool) {
		if e.State == Approved {
			out = append(out, e.Digest)
		}
	}
	return out
}

// Entries returns every entry, sorted by registry, server, tool, digest.
func (b *Baseline) Entries() []*Entry {
	if b == nil {
		return nil
	}
	out := slices.Collect(maps.Values(b.defs))
	slices.SortFunc(out, compareEntries)
	return out
}

// Len is the number of reviewed definitions.
func (b *Baseline) Len() int {
	if b == nil {
		return 0
	}
	return len(b.defs)
}

func compareEntries(a, b *Entry) int {
	return cmp.Or(cmp.Compare(a.Registry, b.Registry), cmp.Compare(a.Server, b.Server),
		cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Digest, b.Digest))
}

// Label is how decisions name the baseline version (baseline_version):
// its decimal number.
func (b *Baseline) Label() string {
	if b == nil || b.label == "" {
		return "0"
	}
	return b.label
}

// Set accumulates approval events into baselines. It is not safe for
// concurrent use; its snapshots are.
type Set struct {
	version int64
	defs    map[defKey]*Entry
}

// Apply applies one event at version (the number of events applied once
// it is, for the topic the record's offset + 1). Versions only grow: an
// event at or below the set's version is a replay and is ignored. An
// event that fails Validate is an error and changes nothing.
func (s *Set) Apply(e *Event, version int64) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if version <= s.version {
		return nil
	}
	s.version = version
	if s.defs == nil {
		s.defs = map[defKey]*Entry{}
	}
	k := defKey{ToolKey{e.Registry, e.Server, e.Tool}, e.Digest}
	if e.Verb == Revoke {
		delete(s.defs, k)
		return nil
	}
	st := Approved
	if e.Verb == Reject {
		st = Rejected
	}
	s.defs[k] = &Entry{e.Registry, e.Server, e.Tool, e.Digest, e.DescriptionDigest, st, e.By, e.At.UTC().Truncate(time.Millisecond), e.Reason}
	return nil
}

// Version is the set's version.
func (s *Set) Version() int64 { return s.version }

// Snapshot returns the baseline as applied so far. Entries are shared
// with the set, which replaces, never modifies, them.
func (s *Set) Snapshot() *Baseline {
	b := &Baseline{version: s.version, label: strconv.FormatInt(s.version, 10), defs: maps.Clone(s.defs), tools: map[ToolKey][]*Entry{}}
	if b.defs == nil {
		b.defs = map[defKey]*Entry{}
	}
	for k, e := range b.defs {
		b.tools[k.ToolKey] = append(b.tools[k.ToolKey], e)
	}
	for _, es := range b.tools {
		slices.SortFunc(es, compareEntries)
	}
	return b
}
