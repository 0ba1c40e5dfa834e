package ingest

import (
	"encoding/json"
	"fmt"
	"time"
)

// envelope is the optional wrapper of a provider object; see the package
// documentation.
type envelope struct {
	EmittedAt   string            `json:"emitted_at"`
	ObservedAt  string            `json:"observed_at"`
	Registry    string            `json:"registry"`
	AgentID     string            `json:"agent_id"`
	SessionID   string            `json:"session_id"`
	Model       string            `json:"model"`
	Provider    string            `json:"provider"`
	Surface     string            `json:"surface"`
	Server      string            `json:"server"`
	Trust       *int              `json:"trust"`
	Visible     []string          `json:"visible"`
	SeenDigests map[string]string `json:"seen_digests"`
}

// openEnvelope reports whether o is an envelope and, if so, returns its
// fields, the provider object it carries and that object's format.
func openEnvelope(line []byte, o object) (meta Meta, inner json.RawMessage, f Format, ok bool, err error) {
	f, n := envelopeFormat(o)
	switch {
	case n == 0:
		return Meta{}, nil, FormatUnknown, false, nil
	case n > 1:
		return Meta{}, nil, FormatUnknown, true, fmt.Errorf("%w: more than one format key", ErrBadEnvelope)
	}
	var e envelope
	if err := unmarshal(line, &e); err != nil {
		return Meta{}, nil, f, true, fmt.Errorf("%w: %w", ErrBadEnvelope, err)
	}
	meta = Meta{
		Registry:    e.Registry,
		AgentID:     e.AgentID,
		SessionID:   e.SessionID,
		Model:       e.Model,
		Provider:    e.Provider,
		Surface:     e.Surface,
		Server:      e.Server,
		Trust:       e.Trust,
		Visible:     e.Visible,
		SeenDigests: e.SeenDigests,
	}
	ts := e.EmittedAt
	if ts == "" {
		ts = e.ObservedAt
	}
	if ts != "" {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return Meta{}, nil, f, true, fmt.Errorf("%w: emitted_at: %w", ErrBadEnvelope, err)
		}
		meta.Time = t
	}
	return meta, o[string(f)], f, true, nil
}
