package gateway

import (
	"context"
	"net/http"

	"github.com/toolaudit/toolaudit/internal/bearer"
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

// Authorizer authenticates a client's HTTP request and names it (the
// name becomes the agent_id of its calls): *bearer.Tokens. Its errors are
// answered 401, bearer.ErrNoTokens 403.
type Authorizer interface {
	Authorize(r *http.Request) (string, error)
}

var (
	_ Authorizer = (*bearer.Tokens)(nil)
)

var _ Publisher = PublisherFunc(nil)
