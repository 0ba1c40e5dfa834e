package sink

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/toolaudit/toolaudit/schema"
)

// JSONL writes decision rows to an io.Writer as JSON Lines: one object per
// row, its keys the column names of table decisions (a superset of the
// decision line of spec v1, so a JSONL sink file also reads as decisions).
// Times are RFC 3339 UTC with nanoseconds, or null for the zero time.
//
// It is safe for concurrent use: each Write encodes its batch and writes it
// with a single call to the underlying writer under a lock, then flushes it
// (Flush() error, as on *bufio.Writer) and, WithSync, syncs it (Sync()
// error, as on *os.File), so batches never interleave and a nil return means
// the writer has taken the whole batch.
type JSONL struct {
	log  *slog.Logger
	m    *metrics
	sync bool

	mu    sync.Mutex
	w     io.Writer
	buf   []byte
	dirty bool // a write failed midway: the next one starts a new line
}

var _ interface {
	Write(context.Context, []schema.Row) error
} = (*JSONL)(nil)

// NewJSONL returns a JSONL writer to w. Options: WithLogger, WithRegisterer,
// WithSync.
func NewJSONL(w io.Writer, opts ...Option) *JSONL {
	o := buildOptions(opts)
	return &JSONL{w: w, log: o.log, m: newMetrics(o.reg, "jsonl"), sync: o.sync}
}

// Write appends rows, one line each. A failed write is retryable (disk
// full, broken pipe); since a file has no deduplication, a retry after a
// partial write repeats the rows already written, and readers keep the row
// with the latest decided_at per (analysis_id, call_key), as the
// ClickHouse table does.
func (j *JSONL) Write(ctx context.Context, rows []schema.Row) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sink: jsonl write: %w", err)
	}
	if len(rows) == 0 {
		return nil
	}
	start := time.Now()
	j.mu.Lock()
	err := j.write(rows)
	j.mu.Unlock()
	if err != nil {
		err = fmt.Errorf("sink: jsonl write of %d rows: %w", len(rows), err)
		j.log.Warn("sink: write failed", "rows", len(rows), "err", err)
	}
	j.m.observe(len(rows), start, err)
	return err
}

func (j *JSONL) write(rows []schema.Row) error {
	b := j.buf[:0]
	if j.dirty {
		b = append(b, '\n')
	}
	for i := range rows {
		b = AppendJSON(b, &rows[i])
		b = append(b, '\n')
	}
	j.buf = b
	if _, err := j.w.Write(b); err != nil {
		j.dirty = true
		return err
	}
	if f, ok := j.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			j.dirty = true
			return err
		}
	}
	if s, ok := j.w.(interface{ Sync() error }); ok && j.sync {
		if err := s.Sync(); err != nil {
			return err
		}
	}
	j.dirty = false
	return nil
}

// AppendJSON appends r as one JSON object (no newline), the JSONL sink's line.
func AppendJSON(b []byte, r *schema.Row) []byte {
	str := func(b []byte, key, v string) []byte {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		return schema.AppendString(b, v)
	}
	boolean := func(b []byte, key string, v bool) []byte {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		return strconv.AppendBool(b, v)
	}
	tm := func(b []byte, key string, t time.Time) []byte {
		b = append(b, ',', '"')
		b = append(b, key...)
		b = append(b, '"', ':')
		if t.IsZero() {
			return append(b, "null"...)
		}
		b = append(b, '"')
		b = t.UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	b = append(b, `{"event_id":`...)
	b = schema.AppendString(b, r.EventID)
	b = str(b, "verdict", string(r.Verdict))
	b = str(b, "class", string(r.Class))
	b = str(b, "reason", r.Reason)
	b = str(b, "path", r.Path)
	b = boolean(b, "coercible", r.Coercible)
	b = str(b, "resolved_server", r.ResolvedServer)
	b = str(b, "resolved_tool", r.ResolvedTool)
	b = str(b, "registry_version", r.RegistryVersion)
	b = boolean(b, "drift", r.Drift)
	b = str(b, "seen_digest", r.SeenDigest)
	b = str(b, "current_digest", r.CurrentDigest)
	b = str(b, "call_key", r.CallKey)
	b = str(b, "analysis_id", r.AnalysisID)
	b = str(b, "resolver_build", r.ResolverBuild)
	b = str(b, "policy_version", r.PolicyVersion)
	b = str(b, "registry", r.Registry)
	b = str(b, "agent_id", r.AgentID)
	b = str(b, "session_id", r.SessionID)
	b = str(b, "model", r.Model)
	b = str(b, "provider", r.Provider)
	b = str(b, "surface", r.Surface)
	b = str(b, "tool", r.Tool)
	b = str(b, "server", r.Server)
	b = tm(b, "emitted_at", r.EmittedAt)
	b = tm(b, "decided_at", r.DecidedAt)
	b = str(b, "args_shape", r.ArgsShape)
	b = str(b, "args_hash", r.ArgsHash)
	b = str(b, "args_raw", r.ArgsRaw)
	b = str(b, "topic", r.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(r.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, r.Offset, 10)
	return append(b, '}')
}

// jsonRow is the decoding side of AppendJSON.
type jsonRow struct {
	EventID         string     `json:"event_id"`
	Verdict         string     `json:"verdict"`
	Class           string     `json:"class"`
	Reason          string     `json:"reason"`
	Path            string     `json:"path"`
	Coercible       bool       `json:"coercible"`
	ResolvedServer  string     `json:"resolved_server"`
	ResolvedTool    string     `json:"resolved_tool"`
	RegistryVersion string     `json:"registry_version"`
	Drift           bool       `json:"drift"`
	SeenDigest      string     `json:"seen_digest"`
	CurrentDigest   string     `json:"current_digest"`
	CallKey         string     `json:"call_key"`
	AnalysisID      string     `json:"analysis_id"`
	ResolverBuild   string     `json:"resolver_build"`
	PolicyVersion   string     `json:"policy_version"`
	Registry        string     `json:"registry"`
	AgentID         string     `json:"agent_id"`
	SessionID       string     `json:"session_id"`
	Model           string     `json:"model"`
	Provider        string     `json:"provider"`
	Surface         string     `json:"surface"`
	Tool            string     `json:"tool"`
	Server          string     `json:"server"`
	EmittedAt       *time.Time `json:"emitted_at"`
	DecidedAt       *time.Time `json:"decided_at"`
	ArgsShape       string     `json:"args_shape"`
	ArgsHash        string     `json:"args_hash"`
	ArgsRaw         string     `json:"args_raw"`
	Topic           string     `json:"topic"`
	Partition       int32      `json:"partition"`
	Offset          int64      `json:"offset"`
}

// ReadJSONL reads the rows a JSONL writer wrote, in file order, without
// deduplicating. Blank lines are skipped; unknown keys are ignored.
func ReadJSONL(r io.Reader) ([]schema.Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var out []schema.Row
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(line) == 0 {
			continue
		}
		var j jsonRow
		if err := json.Unmarshal(line, &j); err != nil {
			return out, fmt.Errorf("sink: jsonl line %d: %w", n, err)
		}
		row := schema.Row{
			Decision: schema.Decision{
				EventID: j.EventID, Verdict: schema.Verdict(j.Verdict), Class: schema.Class(j.Class),
				Reason: j.Reason, Path: j.Path, Coercible: j.Coercible,
				ResolvedServer: j.ResolvedServer, ResolvedTool: j.ResolvedTool,
				RegistryVersion: j.RegistryVersion, Drift: j.Drift,
				SeenDigest: j.SeenDigest, CurrentDigest: j.CurrentDigest,
			},
			CallKey: j.CallKey, AnalysisID: j.AnalysisID, ResolverBuild: j.ResolverBuild, PolicyVersion: j.PolicyVersion,
			Registry: j.Registry, AgentID: j.AgentID, SessionID: j.SessionID,
			Model: j.Model, Provider: j.Provider, Surface: j.Surface, Tool: j.Tool, Server: j.Server,
			ArgsShape: j.ArgsShape, ArgsHash: j.ArgsHash, ArgsRaw: j.ArgsRaw,
			Topic: j.Topic, Partition: j.Partition, Offset: j.Offset,
		}
		if j.EmittedAt != nil {
			row.EmittedAt = j.EmittedAt.UTC()
		}
		if j.DecidedAt != nil {
			row.DecidedAt = j.DecidedAt.UTC()
		}
		out = append(out, row)
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("sink: jsonl: %w", err)
	}
	return out, nil
}
