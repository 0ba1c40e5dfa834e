package ingest

import "time"

// Meta is the context a call or listing needs beyond what a provider's tool
// call says. Empty strings, a zero Time and a nil Trust mean "not given".
type Meta struct {
	Time        time.Time // emitted_at of calls, observed_at of listings
	Registry    string
	AgentID     string
	SessionID   string
	Model       string
	Provider    string
	Surface     string
	Server      string
	Trust       *int              // listings only; 0 when never given
	Visible     []string          // calls only
	SeenDigests map[string]string // tool name → seen_digest, calls only
}

// Context is what an [Adapter] knows about a line besides its bytes.
type Context struct {
	// Source names the input (a file path, "stdin"); it feeds hashed ids.
	Source string
	// Line is the 1-based line number in Source.
	Line int
	// Text is the whole input line, envelope included: it feeds call ids
	// (callID), so that another line at the same place (a file rotated
	// under the same name) gets other ids.
	Text []byte
	// Last is the own time of the source's latest event before this line
	// (zero: none): the time of an event whose own is unusable.
	Last time.Time
	// Envelope holds the fields of the line's envelope, if it had one.
	Envelope Meta
	// Defaults holds the fallbacks given by the caller (command-line flags).
	Defaults Meta
	// Warn, when set, receives problems that do not stop the line.
	Warn func(error)
}

func (c Context) warn(err error) {
	if c.Warn != nil {
		c.Warn(err)
	}
}

// resolve merges, field by field, the envelope, what the provider object
// says (object), the caller's defaults and the format's fallback, first
// given wins.
func (c Context) resolve(object, fallback Meta) Meta {
	layers := [...]*Meta{&c.Envelope, &object, &c.Defaults, &fallback}
	var m Meta
	for _, l := range layers {
		if m.Time.IsZero() {
			m.Time = l.Time
		}
		firstString(&m.Registry, l.Registry)
		firstString(&m.AgentID, l.AgentID)
		firstString(&m.SessionID, l.SessionID)
		firstString(&m.Model, l.Model)
		firstString(&m.Provider, l.Provider)
		firstString(&m.Surface, l.Surface)
		firstString(&m.Server, l.Server)
		if m.Trust == nil {
			m.Trust = l.Trust
		}
		if m.Visible == nil {
			m.Visible = l.Visible
		}
		if m.SeenDigests == nil {
			m.SeenDigests = l.SeenDigests
		}
	}
	return m
}

func firstString(dst *string, v string) {
	if *dst == "" {
		*dst = v
	}
}
