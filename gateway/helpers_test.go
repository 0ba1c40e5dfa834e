package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/gateway/upstream"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/resolve/suggest"
	"github.com/toolaudit/toolaudit/schema"
)

func TestMain(m *testing.M) {
	gatewaytest.ServeFixtureIfChild()
	leakcheck.Main(m, leakcheck.IgnoreIdleHTTP()) // the SDK's HTTP client keeps idle keep-alive connections
}

// fixtureUpstream is an upstream that runs this test binary as the
// fixture server over stdio.
func fixtureUpstream(t testing.TB, name string, trust int) Upstream {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Upstream{Name: name, Trust: trust, Command: []string{exe}, Env: map[string]string{gatewaytest.FixtureEnv: name}}
}

// httpFixture serves a fixture over Streamable HTTP and returns it and
// its URL.
func httpFixture(t testing.TB, name string) (*gatewaytest.Fixture, string) {
	f := gatewaytest.NewFixture(name)
	return f, serveFixture(t, f)
}

// serveFixture serves f over Streamable HTTP and returns its URL.
func serveFixture(t testing.TB, f *gatewaytest.Fixture) string {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return f.Server }, nil)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}

// recorder keeps what the gateway produced.
type recorder struct {
	mu       sync.Mutex
	listings []*schema.Listing
	events   [][]byte
	records  []audit.Record
	fail     error // returned by Publish and Produce while set
}

func (r *recorder) Publish(_ context.Context, l *schema.Listing, ev []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	d, err := schema.DecodeListing(ev)
	if err != nil {
		return err
	}
	if d.EventID != l.EventID {
		return errors.New("listing and event disagree")
	}
	r.listings = append(r.listings, d)
	r.events = append(r.events, append([]byte(nil), ev...))
	return nil
}

func (r *recorder) Produce(_ context.Context, recs ...*audit.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	for _, rec := range recs {
		c := *rec
		c.Call = append([]byte(nil), rec.Call...)
		r.records = append(r.records, c)
	}
	return nil
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

func (r *recorder) recs() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Record(nil), r.records...)
}

func (r *recorder) lists() []*schema.Listing {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*schema.Listing(nil), r.listings...)
}

// fastUpstreams are supervision settings for tests.
var fastUpstreams = upstream.Config{MinBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, RelistInterval: 10 * time.Millisecond, KeepAlive: -1, TerminateWait: 500 * time.Millisecond}

// started is a running gateway.
type started struct {
	gw  *Gateway
	url string
	rec *recorder
}

// start runs a gateway of cfg until the test ends and waits until every
// upstream is listed.
func start(t *testing.T, cfg Config, opts Options) *started {
	t.Helper()
	st := startNoWait(t, cfg, opts)
	waitFor(t, 20*time.Second, "every upstream listed", func() bool {
		ok, _ := st.gw.Ready()
		return ok
	})
	return st
}

// startNoWait is start without waiting for the upstreams.
func startNoWait(t *testing.T, cfg Config, opts Options) *started {
	t.Helper()
	rec := &recorder{}
	opts.Config = cfg
	if opts.Listings == nil {
		opts.Listings = rec
	}
	if opts.Audit == nil {
		opts.Audit = rec
	}
	if opts.Hints == nil {
		opts.Hints = suggest.New()
	}
	if opts.Upstream.MinBackoff == 0 {
		opts.Upstream = fastUpstreams
	}
	opts.ResolverBuild = "test"
	gw, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	srv := httptest.NewServer(gw.Handler())
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		srv.CloseClientConnections()
		srv.Close()
	})
	return &started{gw: gw, url: srv.URL, rec: rec}
}

// waitChanged waits until the gateway's catalogue has the second
// definition of the tool (the listing is produced before it is applied).
func (st *started) waitChanged(t testing.TB, name string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the gateway applied the change of "+name, func() bool {
		return len(st.rec.lists()) == 2 && st.gw.cat.Load().at.Equal(st.rec.lists()[1].ObservedAt)
	})
}

func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client is a Go SDK client session with the gateway.
type client struct {
	cs      *mcp.ClientSession
	changed chan struct{}
}

// Protocol revisions the tests speak: the session-based one (initialize,
// Mcp-Session-Id) and the stateless one (server/discover, _meta).
const (
	legacy    = "2025-11-25"
	stateless = "2026-07-28"
)

// connect opens a session of the 2025-11-25 revision.
func connect(t *testing.T, url string, header http.Header) *client {
	t.Helper()
	return connectRevision(t, url, header, legacy)
}

// connectRevision connects a Go SDK client speaking the revision,
// subscribed to list_changed.
func connectRevision(t *testing.T, url string, header http.Header, revision string) *client {
	t.Helper()
	return connectOptions(t, url, header, revision, true)
}

type headerTransport struct{ h http.Header }

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (c *client) list(t *testing.T) map[string]*mcp.Tool {
	t.Helper()
	res, err := c.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mcp.Tool{}
	for _, tl := range res.Tools {
		out[tl.Name] = tl
	}
	return out
}

// rejection is a call not answered by an upstream: a JSON-RPC error
// (Code, Message, Data) or a result with isError (IsError, Message its
// text, Data its _meta decision).
type rejection struct {
	Code    int64
	Message string
	Data    json.RawMessage
	IsError bool
}

// call calls a tool with arguments given as JSON; it returns the result's
// text, or the rejection (an upstream's own isError result is a result).
func (c *client) call(t *testing.T, name, args string) (string, *rejection) {
	t.Helper()
	var a any
	if args != "" {
		a = json.RawMessage(args)
	}
	res, err := c.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: a})
	if err != nil {
		var je *jsonrpc.Error
		if errors.As(err, &je) {
			return "", &rejection{Code: je.Code, Message: je.Message, Data: je.Data}
		}
		t.Fatalf("call %s: %v", name, err)
	}
	s := ""
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			s += tc.Text
		}
	}
	if d, ok := res.Meta[MetaDecision]; ok {
		if !res.IsError || res.StructuredContent != nil {
			t.Fatalf("call %s: a decision in _meta of a result with isError %v, structuredContent %v", name, res.IsError, res.StructuredContent)
		}
		b, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		return "", &rejection{Message: s, Data: b, IsError: true}
	}
	return s, nil
}

// answer decodes the data of a rejection.
type answer struct {
	EventID        string `json:"event_id"`
	Verdict        string `json:"verdict"`
	Class          string `json:"class"`
	Reason         string `json:"reason"`
	Path           string `json:"path"`
	ResolvedServer string `json:"resolved_server"`
	ResolvedTool   string `json:"resolved_tool"`
	Source         string `json:"source"`
	Action         string `json:"action"`
	SuggestedTool  string `json:"suggested_tool"`
	SeenDigest     string `json:"seen_digest"`
	CurrentDigest  string `json:"current_digest"`
	Hints          struct {
		Tools    []string        `json:"tools"`
		Keys     []string        `json:"keys"`
		Missing  []string        `json:"missing"`
		Expected json.RawMessage `json:"expected"`
	} `json:"hints"`
}

func decodeAnswer(t *testing.T, je *rejection) answer {
	t.Helper()
	var a answer
	if err := json.Unmarshal(je.Data, &a); err != nil {
		t.Fatalf("rejection data %s: %v", je.Data, err)
	}
	return a
}
