package modelproxy

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/toolaudit/toolaudit/resolve"
)

// Config is the proxy's configuration file (YAML or JSON): its routes and
// bounds. The plumbing it shares with resolverd's other commands (Kafka,
// the audit topic, TLS) comes from flags.
//
//	mode: strict                 # or pin-assisted
//	formats: annotate            # or assert
//	limits:
//	  max_request_bytes: 8388608
//	  max_response_bytes: 8388608
//	  max_tools: 512
//	  max_sse_line_bytes: 1048576
//	  upstream_timeout: 10m
//	routes:
//	  - prefix: /openai          # OpenAI SDK: baseURL http://proxy/openai/v1
//	    api: openai              # openai (Chat Completions) or anthropic (Messages)
//	    upstream: https://api.openai.com
//	    registry: fleet-openai   # the registry of the route's calls
//	    policy: block            # observe or block
//	  - prefix: /anthropic       # Anthropic SDK: baseURL http://proxy/anthropic
//	    api: anthropic
//	    upstream: https://api.anthropic.com
//	    registry: fleet-anthropic
//	    policy: retry            # or observe, block
//	    retries: 2               # repair requests per response, 1 to 10
//	    retry_deadline: 1m
//	    clients:                 # some clients' own registry and agent, by credential
//	      - {token_sha256: 3f1c…e9, registry: team-search, agent: search-bot}
//
// Decoding is strict: an unknown or repeated key is an error.
type Config struct {
	// Mode resolves names several servers provide (resolve.Mode); the
	// declared tools are one server, so it matters only to a registry of
	// one name twice, which a listing refuses: kept for the stamp.
	Mode string `json:"mode"`
	// Formats: "annotate" (default) or "assert", as resolverd check's
	// --formats.
	Formats string  `json:"formats"`
	Limits  Limits  `json:"limits"`
	Routes  []Route `json:"routes"`
}

// Limits bound what a client and an upstream can make the proxy hold.
type Limits struct {
	// MaxRequestBytes bounds a request body (413 beyond, in the API's
	// error shape). Default 8 MiB.
	MaxRequestBytes int64 `json:"max_request_bytes"`
	// MaxResponseBytes bounds a successful upstream response body, which
	// the proxy reads whole to decide its tool calls (502 beyond: its
	// calls cannot be decided), and so one event of a stream (its lines,
	// comments included: an error event beyond) and what a stream holds
	// of a tool call. Error bodies pass through unread. Default 8 MiB.
	MaxResponseBytes int64 `json:"max_response_bytes"`
	// MaxTools bounds the tools one request declares (400 beyond).
	// Default 512.
	MaxTools int `json:"max_tools"`
	// MaxSSELineBytes bounds a line of an upstream's event stream
	// (default 1 MiB): a longer one ends the stream with an error event,
	// the calls not yet sent undecided and unsent.
	MaxSSELineBytes int `json:"max_sse_line_bytes"`
	// UpstreamTimeout bounds one upstream exchange, written as Go writes
	// a duration ("10m"). Default 10m: a model may think for minutes.
	UpstreamTimeout string `json:"upstream_timeout"`

	upstreamTimeout time.Duration
}

// Route is one API in front of one upstream.
type Route struct {
	// Prefix is the path the route's requests start with ("/openai");
	// the rest of the path is the upstream's.
	Prefix string `json:"prefix"`
	// API is what the route speaks: "openai" (Chat Completions, POST
	// .../chat/completions, and Responses, POST .../responses) or
	// "anthropic" (Messages, POST /v1/messages).
	API string `json:"api"`
	// Upstream is the model API's base URL; the rest of the request's
	// path is appended to it.
	Upstream string `json:"upstream"`
	// Registry names the registry of the route's calls: the tools each
	// request declares are a listing of it. It may be empty when Clients
	// name every client's.
	Registry string `json:"registry"`
	// Policy is observe (forward unchanged, record), block (rejected
	// calls never reach the client as calls to execute) or retry (the
	// proxy asks the model again first).
	Policy string `json:"policy"`
	// Agent is the agent_id of the route's calls ("" none).
	Agent string `json:"agent"`
	// Retries bounds the repair requests of one response under retry
	// (1 to 10, default 2); RetryDeadline bounds their time, written as
	// Go writes a duration (default 1m; the upstream timeout bounds
	// everything).
	Retries       int    `json:"retries"`
	RetryDeadline string `json:"retry_deadline"`
	// Clients name the registry and agent of some clients' requests, by
	// the credential they send (RouteClient): the agents of a fleet
	// behind one route keep their own registries. A request whose
	// credential is not listed is the route's (Registry, Agent), and is
	// refused (403) when the route names no registry.
	Clients []RouteClient `json:"clients"`

	clients       map[[sha256.Size]byte]*RouteClient
	upstream      *url.URL
	api           api   // the route's API of this request (ServeHTTP)
	apis          []api // the APIs the route serves, by endpoint
	policy        Policy
	retryDeadline time.Duration
}

// RouteClient is one client of a route, known by its credential's
// SHA-256 only (the proxy passes credentials on and never keeps them):
// the Authorization header's bearer token, or the x-api-key (Anthropic)
// or api-key (Azure OpenAI) header. A request carrying more than one of
// them is refused on a route with clients: which one the upstream reads
// is the upstream's to say, so the proxy cannot tell whose it is.
type RouteClient struct {
	// TokenSHA256 is the credential's SHA-256, hex (as `printf %s
	// "$TOKEN" | sha256sum` prints it).
	TokenSHA256 string `json:"token_sha256"`
	// Registry and Agent are the client's; empty: the route's.
	Registry string `json:"registry"`
	Agent    string `json:"agent"`
}

// errCredentials refuses a request of two credentials on a route with
// clients.
var errCredentials = errors.New("the request carries more than one credential (Authorization, x-api-key, api-key); this route tells its clients by theirs, so it takes one")

// client is the route's client whose credential h carries, or nil.
func (r *Route) client(h http.Header) (*RouteClient, error) {
	if len(r.clients) == 0 {
		return nil, nil
	}
	var tok string
	n := 0
	if a := h.Values("Authorization"); len(a) > 0 {
		n += len(a)
		if len(a[0]) > len("Bearer ") && strings.EqualFold(a[0][:len("Bearer ")], "Bearer ") {
			tok = strings.TrimSpace(a[0][len("Bearer "):])
		}
	}
	for _, k := range []string{"X-Api-Key", "Api-Key"} {
		if v := h.Values(k); len(v) > 0 {
			n += len(v)
			tok = v[0]
		}
	}
	if n > 1 {
		return nil, errCredentials
	}
	if tok == "" {
		return nil, nil
	}
	return r.clients[sha256.Sum256([]byte(tok))], nil
}

// validClients checks the route's clients and its registry: its own,
// or each client's.
func (r *Route) validClients(at string) error {
	if len(r.Clients) == 0 {
		if r.Registry == "" {
			return fmt.Errorf("%s: no registry", at)
		}
		return nil
	}
	r.clients = make(map[[sha256.Size]byte]*RouteClient, len(r.Clients))
	for j := range r.Clients {
		c := &r.Clients[j]
		var sum [sha256.Size]byte
		if n, err := hex.Decode(sum[:], []byte(c.TokenSHA256)); err != nil || n != len(sum) || len(c.TokenSHA256) != 2*len(sum) {
			return fmt.Errorf("%s: clients[%d]: token_sha256 %q: want the credential's SHA-256, 64 hex digits", at, j, c.TokenSHA256)
		}
		if r.clients[sum] != nil {
			return fmt.Errorf("%s: clients[%d]: token_sha256 %s twice", at, j, c.TokenSHA256)
		}
		c.Registry, c.Agent = cmp.Or(c.Registry, r.Registry), cmp.Or(c.Agent, r.Agent)
		if c.Registry == "" {
			return fmt.Errorf("%s: clients[%d]: no registry, and the route names none", at, j)
		}
		r.clients[sum] = c
	}
	return nil
}

// Policy is what a route does with a rejected call.
type Policy string

// Policies.
const (
	Observe Policy = "observe" // forward unchanged; record (action observed)
	Block   Policy = "block"   // withhold rejected calls (action enforced)
	// Retry answers the model the rejected calls' fix texts as tool
	// errors and asks again, up to Route.Retries times (action
	// enforced); what is still rejected then is withheld as under Block.
	Retry Policy = "retry"
)

// Defaults.
const (
	DefaultMaxRequestBytes  = 8 << 20
	DefaultMaxResponseBytes = 8 << 20
	DefaultMaxTools         = 512
	DefaultUpstreamTimeout  = 10 * time.Minute
	DefaultRetries          = 2
	DefaultRetryDeadline    = time.Minute
	// DefaultIdleConns is the idle connections kept to the upstreams.
	DefaultIdleConns = 256
)

// maxConfig bounds a configuration file.
const maxConfig = 1 << 20

// LoadConfig reads a configuration file and validates it.
func LoadConfig(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("proxy config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfig+1)) // bounded before it is read whole
	if err == nil {
		var c Config
		if c, err = ParseConfig(b); err == nil {
			return c, nil
		}
	}
	return Config{}, fmt.Errorf("proxy config %s: %w", path, err)
}

// ParseConfig decodes a configuration strictly, applies the defaults and
// validates it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if len(b) > maxConfig {
		return c, fmt.Errorf("more than %d bytes", maxConfig)
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, err
	}
	return c, c.Validate()
}

// Validate applies the defaults and checks the configuration.
func (c *Config) Validate() error {
	if c.Mode == "" {
		c.Mode = "strict"
	}
	if _, err := resolve.ParseMode(c.Mode); err != nil {
		return err
	}
	switch c.Formats {
	case "":
		c.Formats = "annotate"
	case "annotate", "assert":
	default:
		return fmt.Errorf("formats %q: want annotate or assert", c.Formats)
	}
	l := &c.Limits
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if l.MaxResponseBytes == 0 {
		l.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if l.MaxTools == 0 {
		l.MaxTools = DefaultMaxTools
	}
	if l.MaxSSELineBytes == 0 {
		l.MaxSSELineBytes = DefaultMaxSSELine
	}
	if l.MaxRequestBytes < 0 || l.MaxResponseBytes < 0 || l.MaxTools < 0 || l.MaxSSELineBytes < 0 {
		return errors.New("limits must be positive")
	}
	l.upstreamTimeout = DefaultUpstreamTimeout
	if l.UpstreamTimeout != "" {
		d, err := time.ParseDuration(l.UpstreamTimeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("limits.upstream_timeout %q: want a positive duration such as 10m", l.UpstreamTimeout)
		}
		l.upstreamTimeout = d
	}
	if len(c.Routes) == 0 {
		return errors.New("no routes")
	}
	seen := map[string]bool{}
	for i := range c.Routes {
		r := &c.Routes[i]
		at := fmt.Sprintf("routes[%d]", i)
		r.Prefix = strings.TrimSuffix(r.Prefix, "/")
		if !strings.HasPrefix(r.Prefix, "/") || strings.ContainsAny(r.Prefix, "?#") {
			return fmt.Errorf("%s: prefix %q: want a path such as /openai", at, r.Prefix)
		}
		if seen[r.Prefix] {
			return fmt.Errorf("%s: prefix %q twice", at, r.Prefix)
		}
		seen[r.Prefix] = true
		switch r.API {
		case "openai":
			r.apis = []api{openAIChat{}, openAIResponses{}}
		case "anthropic":
			r.apis = []api{anthropicMessages{}}
		default:
			return fmt.Errorf("%s: api %q: want openai or anthropic", at, r.API)
		}
		u, err := url.Parse(r.Upstream)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("%s: upstream %q: want an http or https base URL", at, r.Upstream)
		}
		u.Path = strings.TrimSuffix(u.Path, "/")
		r.upstream = u
		if err := r.validClients(at); err != nil {
			return err
		}
		switch Policy(r.Policy) {
		case Observe, Block, Retry:
			r.policy = Policy(r.Policy)
		case "":
			return fmt.Errorf("%s: no policy (observe, block or retry)", at)
		default:
			return fmt.Errorf("%s: policy %q: want observe, block or retry", at, r.Policy)
		}
		if r.Retries == 0 {
			r.Retries = DefaultRetries
		}
		if r.Retries < 1 || r.Retries > 10 {
			return fmt.Errorf("%s: retries %d: want 1 to 10", at, r.Retries)
		}
		r.retryDeadline = DefaultRetryDeadline
		if r.RetryDeadline != "" {
			d, err := time.ParseDuration(r.RetryDeadline)
			if err != nil || d <= 0 {
				return fmt.Errorf("%s: retry_deadline %q: want a positive duration such as 30s", at, r.RetryDeadline)
			}
			r.retryDeadline = d
		}
	}
	return nil
}
