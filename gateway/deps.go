package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/toolaudit/toolaudit/resolve"
	"github.com/toolaudit/toolaudit/schema"
)

// Publisher produces listing l, encoded as event, to the listings topic
// (key l.Key(), timestamp l.ObservedAt) and returns nil once the broker
// acknowledged it.
type Publisher interface {
	Publish(ctx context.Context, l *schema.Listing, event []byte) error
}

// PublisherFunc adapts a function to a Publisher.
type PublisherFunc func(ctx context.Context, l *schema.Listing, event []byte) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, l *schema.Listing, event []byte) error {
	return f(ctx, l, event)
}

// Record is one decision the gateway took, as the audit trail records it.
type Record struct {
	Source schema.Source
	Action schema.Action
	// Call is the call event as decided.
	Call []byte
	// Key is the Kafka key: the call's session.
	Key string

	Decision      schema.Decision
	SuggestedTool string
	ResolverBuild string
	PolicyVersion string
	DecidedAt     time.Time
}

// Auditor produces decisions to the audit trail; Produce returns nil
// only once the broker acknowledged every record.
type Auditor interface {
	Produce(ctx context.Context, recs ...*Record) error
}

// Hints tell a client how to correct a rejected call.
type Hints struct {
	Tools    []string
	Keys     []string
	Missing  []string
	Expected json.RawMessage
}

// Hinter computes the hints of a rejected call.
type Hinter interface {
	Hints(vs resolve.Versions, c *schema.Call, d *schema.Decision) Hints
}

// Authorizer authenticates a client's HTTP request and names it (the
// name becomes the agent_id of its calls).
type Authorizer interface {
	Authorize(r *http.Request) (string, error)
}

var _ Publisher = PublisherFunc(nil)
