package registry

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/toolaudit/toolaudit/internal/par"
	"github.com/toolaudit/toolaudit/schema"
	"github.com/toolaudit/toolaudit/signature"
)

// A checkpoint is the store's whole state as bytes: the distinct
// definitions (name, inputSchema, description), the distinct server
// contents, and every registry's points (its first instant, then per
// server the listed instants with their content). That is everything the
// store keeps: a store loaded from it applies any later listing, however
// late in event time, exactly as the store that wrote it would (see
// WithLateWindow), and since applying a listing twice changes nothing, a
// checkpoint that already holds some listings replayed after it is
// harmless. Versions, drift and indexes are rebuilt on load; digests are
// recomputed and signatures compiled, so a checkpoint is trusted no more
// than a listing.
//
//	"tarc1\n"
//	uvarint n; n × (string name, bytes schema, string description)
//	uvarint n; n × (varint trust, uvarint k, k × uvarint definition)
//	uvarint n; n × (string registry, varint birth, uvarint servers,
//	               servers × (string name, uvarint points,
//	                          points × (varint at - previous at, uvarint content+1, 0: remove)))
//
// Strings and bytes are a uvarint length and the bytes.
const checkpointMagic = "tarc1\n"

// ErrCheckpoint is returned by LoadCheckpoint for bytes it cannot use.
var ErrCheckpoint = errors.New("bad registry checkpoint")

// AppendCheckpoint appends the store's state to dst.
func (s *Store) AppendCheckpoint(dst []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	dst = append(dst, checkpointMagic...)
	defIndex := make(map[*def]uint64, len(s.defs))
	defs := make([]*def, 0, len(s.defs))
	for _, d := range s.defs {
		defs = append(defs, d)
	}
	slices.SortFunc(defs, func(a, b *def) int { return cmp.Compare(a.digest, b.digest) })
	dst = binary.AppendUvarint(dst, uint64(len(defs)))
	for i, d := range defs {
		defIndex[d] = uint64(i)
		dst = appendString(dst, d.name)
		dst = appendString(dst, string(d.sig.Schema()))
		dst = appendString(dst, d.description)
	}
	contentIndex := make(map[*content]uint64, len(s.contents))
	cs := make([]*content, 0, len(s.contents))
	for _, c := range s.contents {
		cs = append(cs, c)
	}
	slices.SortFunc(cs, func(a, b *content) int { return cmp.Compare(string(a.key[:]), string(b.key[:])) })
	dst = binary.AppendUvarint(dst, uint64(len(cs)))
	for i, c := range cs {
		contentIndex[c] = uint64(i)
		dst = binary.AppendVarint(dst, int64(c.trust))
		dst = binary.AppendUvarint(dst, uint64(len(c.defs)))
		for _, d := range c.defs {
			dst = binary.AppendUvarint(dst, defIndex[d])
		}
	}
	names := slices.Sorted(maps.Keys(s.regs))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, name := range names {
		r := s.regs[name]
		dst = appendString(dst, name)
		dst = binary.AppendVarint(dst, r.birth)
		svs := slices.Sorted(maps.Keys(r.servers))
		dst = binary.AppendUvarint(dst, uint64(len(svs)))
		for _, n := range svs {
			sv := r.servers[n]
			dst = appendString(dst, n)
			dst = binary.AppendUvarint(dst, uint64(len(sv.points)))
			prev := int64(0)
			for _, p := range sv.points {
				dst = binary.AppendVarint(dst, p.at-prev)
				prev = p.at
				if p.c == nil {
					dst = append(dst, 0)
				} else {
					dst = binary.AppendUvarint(dst, contentIndex[p.c]+1)
				}
			}
		}
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// reader decodes a checkpoint; the first error sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at %d bytes from the end", ErrCheckpoint, what, len(r.b))
	}
}

// skip consumes the n bytes a number took; n <= 0 is a bad number.
func (r *reader) skip(n int) {
	if n <= 0 {
		r.fail("bad number")
		r.b = nil
		return
	}
	r.b = r.b[n:]
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	r.skip(n)
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	r.skip(n)
	return v
}

// count reads a number of entries that each take at least one byte, so a
// corrupt count cannot make the reader allocate beyond the input's size.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("count beyond the input")
		r.b = nil
		return 0
	}
	return int(n)
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.fail("length beyond the input")
		r.b = nil
		return nil
	}
	b := r.b[:n:n]
	r.b = r.b[n:]
	return b
}

// LoadCheckpoint loads a checkpoint into an empty store. On error the
// store is left empty. A store made WithChanges refuses
// (ErrReportsChanges): the changes before the checkpoint are not in it.
func (s *Store) LoadCheckpoint(data []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changes != nil {
		return ErrReportsChanges
	}
	if len(s.regs) > 0 || len(s.defs) > 0 {
		return fmt.Errorf("%w: the store is not empty", ErrCheckpoint)
	}
	if len(data) < len(checkpointMagic) || string(data[:len(checkpointMagic)]) != checkpointMagic {
		return fmt.Errorf("%w: not a checkpoint", ErrCheckpoint)
	}
	rd := &reader{b: data[len(checkpointMagic):]}
	type defIn struct {
		name, description string
		schema            []byte
		digest            string
		sig               *signature.Signature
		err               error
	}
	defs := make([]defIn, rd.count())
	for i := range defs {
		defs[i] = defIn{name: string(rd.bytes()), schema: rd.bytes(), description: string(rd.bytes())} // Compile keeps its own copy
	}
	if rd.err != nil {
		return rd.err
	}
	par.For(len(defs), minPerWorker, func(i int) {
		d := &defs[i]
		if d.digest, d.err = schema.Digest(d.name, d.schema); d.err == nil {
			d.sig, d.err = signature.CompileWith(d.schema, s.sigOpts)
		}
	})
	type regIn struct {
		name   string
		birth  int64
		server []string
		points [][]point
	}
	var contentDefs [][]int
	var trusts []int
	for range rd.count() {
		trusts = append(trusts, int(rd.varint()))
		ds := make([]int, rd.count())
		for k := range ds {
			if ds[k] = int(rd.uvarint()); ds[k] >= len(defs) {
				rd.fail("definition out of range")
			}
		}
		contentDefs = append(contentDefs, ds)
	}
	var regs []regIn
	var contentIdx []uint64 // per point, in order: content index + 1, 0 for a remove
	for range rd.count() {
		ri := regIn{name: string(rd.bytes()), birth: rd.varint()}
		for range rd.count() {
			ri.server = append(ri.server, string(rd.bytes()))
			ps := make([]point, rd.count())
			at := int64(0)
			for k := range ps {
				d := rd.varint()
				if k > 0 && d <= 0 {
					rd.fail("points out of order")
				}
				at += d
				ps[k].at = at
				ci := rd.uvarint()
				if ci > uint64(len(contentDefs)) {
					rd.fail("content out of range")
				}
				contentIdx = append(contentIdx, ci)
			}
			ri.points = append(ri.points, ps)
		}
		regs = append(regs, ri)
	}
	if rd.err == nil && len(rd.b) != 0 {
		rd.fail("trailing bytes")
	}
	if rd.err != nil {
		return rd.err
	}
	for i := range defs {
		if defs[i].err != nil {
			return fmt.Errorf("%w: definition %q: %w", ErrCheckpoint, defs[i].name, defs[i].err)
		}
	}
	// Install.
	ds := make([]*def, len(defs))
	for i, d := range defs {
		if old := s.defs[d.digest]; old != nil {
			ds[i] = old
			continue
		}
		ds[i] = &def{name: d.name, digest: d.digest, description: d.description, sig: d.sig}
		s.addDef(ds[i])
	}
	cs := make([]*content, len(contentDefs))
	for i, idx := range contentDefs {
		list := make([]*def, len(idx))
		for k, j := range idx {
			list[k] = ds[j]
		}
		cs[i] = s.intern(trusts[i], list)
	}
	k := 0
	newRegs := map[string]*registry{}
	for _, ri := range regs {
		r := newRegistry(ri.name)
		r.born, r.birth = true, ri.birth
		for j, name := range ri.server {
			ps := ri.points[j]
			for p := range ps {
				if ci := contentIdx[k]; ci > 0 {
					ps[p].c = cs[ci-1]
				}
				k++
			}
			r.servers[name] = &server{name: name, points: ps, compacted: len(ps)}
			r.n.points += int64(len(ps))
		}
		r.rebuild()
		s.regs[ri.name] = r
		newRegs[ri.name] = r
		s.n.add(r.n, counts{})
		s.stats.Registries++
	}
	s.view.Store(&Snapshot{dir: s.view.Load().dir.with(newRegs)})
	s.publishStats()
	return nil
}
