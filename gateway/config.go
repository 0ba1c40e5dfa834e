package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/toolaudit/toolaudit/resolve"
)

// Config is the gateway's configuration file (YAML or JSON): what it
// serves and the upstreams it merges. The plumbing it shares with
// resolverd run (Kafka, topics, tokens, TLS) comes from flags.
//
//	registry: fleet-a            # the registry of every event (default "gateway")
//	separator: "__"              # qualified names server__tool
//	mode: strict                 # or pin-assisted
//	observe: false               # true: forward rejected calls too (action observed)
//	list_ttl: 1m                 # how long a client may keep a tools/list answer
//	poll_tools: 1m               # list every upstream's tools this often as well
//	limits:
//	  max_sessions: 1000
//	  max_request_bytes: 1048576
//	  max_in_flight: 256
//	  session_idle: 30m
//	  session_grace: 30s
//	  upstream_timeout: 30s
//	upstreams:
//	  - name: files
//	    trust: 2
//	    command: [node, /srv/mcp/server-filesystem/dist/index.js, /data]
//	    env: {NODE_OPTIONS: --max-old-space-size=256}
//	    inherit_env: [HTTP_PROXY]
//	  - name: search
//	    trust: 1
//	    url: https://search.internal/mcp
//	    bearer_token_file: /run/secrets/search-token
//
// Decoding is strict: an unknown or repeated key is an error.
type Config struct {
	// Registry names the deployment in every listing and call event.
	Registry string `json:"registry"`
	// Separator joins a server's name and a tool's name in the names
	// clients see. 1 to 4 characters of [A-Za-z0-9_.-]; no server name
	// may contain it.
	Separator string `json:"separator"`
	// Mode resolves names several servers provide: strict or
	// pin-assisted (resolve.Mode).
	Mode string `json:"mode"`
	// Formats asserts format (date-time, uri, ...) as resolverd's
	// --formats assert does: "annotate" (the default, JSON Schema
	// 2020-12's) or "assert". The gateway decides as the stream then
	// does.
	Formats string `json:"formats"`
	// Observe forwards rejected calls too and records the action
	// "observed" (a rollout mode); false enforces: rejected calls are
	// answered -32602 and never reach an upstream.
	Observe bool `json:"observe"`
	// ListTTL is the ttlMs of every tools/list answer: how long a client
	// may keep the definitions it was shown. A client without a session
	// (protocol 2026-07-28) is checked against it: a call to a tool whose
	// definition changed within ListTTL before the call is M4 unless the
	// client listed since the change (see the package documentation).
	// Default 1m.
	ListTTL Duration `json:"list_ttl"`
	// PollTools lists every upstream's tools this often, besides on
	// connecting and on notifications/tools/list_changed: a server that
	// changes a definition without saying so (one that does not declare
	// listChanged may) is seen within it, and its clients are told. An
	// unchanged listing is not produced again. Default 1m, at least 1s.
	PollTools Duration   `json:"poll_tools"`
	Limits    Limits     `json:"limits"`
	Upstreams []Upstream `json:"upstreams"`
}

// Limits bound what clients can hold of the gateway.
type Limits struct {
	// MaxSessions bounds the client sessions open at once; a new one
	// beyond it is refused (HTTP 503). Default 1000.
	MaxSessions int `json:"max_sessions"`
	// MaxRequestBytes bounds one HTTP request body (HTTP 413). Default
	// 1 MiB.
	MaxRequestBytes int64 `json:"max_request_bytes"`
	// MaxInFlight bounds the tools/call requests decided or forwarded at
	// once, all sessions together; beyond it a call is answered an error
	// at once. Default 256.
	MaxInFlight int `json:"max_in_flight"`
	// SessionIdle closes a session that sent nothing for this long.
	// Default 30m.
	SessionIdle Duration `json:"session_idle"`
	// SessionGrace closes a session whose client had an event stream
	// (GET) open and has none now, nor a request in progress, for this
	// long: a client that closed its transport without DELETE. Clients
	// reconnect a dropped stream within it. Default 30s.
	SessionGrace Duration `json:"session_grace"`
	// UpstreamTimeout bounds one forwarded call, unless the upstream
	// sets its own timeout. Default 30s.
	UpstreamTimeout Duration `json:"upstream_timeout"`
}

// Upstream is one MCP server the gateway merges.
type Upstream struct {
	// Name is the server's name: in qualified names, listing events and
	// decisions. Letters, digits, '_' and '-'.
	Name string `json:"name"`
	// Trust is the server's trust tier (higher is more trusted).
	Trust int `json:"trust"`
	// Command runs a stdio server (argv); URL reaches a Streamable HTTP
	// one. Exactly one is given.
	Command []string `json:"command,omitempty"`
	URL     string   `json:"url,omitempty"`
	// Dir is the command's working directory.
	Dir string `json:"dir,omitempty"`
	// Env sets variables of the command. The command gets PATH, HOME,
	// LANG and TMPDIR from the gateway, the variables InheritEnv names,
	// and Env: nothing else (the gateway's environment holds its own
	// secrets).
	Env        map[string]string `json:"env,omitempty"`
	InheritEnv []string          `json:"inherit_env,omitempty"`
	// BearerTokenFile holds the token sent to URL, read at each request.
	BearerTokenFile string `json:"bearer_token_file,omitempty"`
	// Timeout overrides Limits.UpstreamTimeout for this server.
	Timeout Duration `json:"timeout,omitempty"`
}

// Defaults of Config.
const (
	DefaultRegistry        = "gateway"
	DefaultSeparator       = "__"
	DefaultMaxSessions     = 1000
	DefaultMaxRequestBytes = 1 << 20
	DefaultMaxInFlight     = 256
	DefaultSessionIdle     = 30 * time.Minute
	DefaultSessionGrace    = 30 * time.Second
	DefaultUpstreamTimeout = 30 * time.Second
	DefaultListTTL         = time.Minute
	DefaultPollTools       = time.Minute
)

// Duration is a time.Duration written as Go writes one ("30s", "1m30s").
type Duration time.Duration

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// LoadConfig reads a configuration file, applies the defaults and
// validates it.
func LoadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("gateway config: %w", err)
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("gateway config %s: %w", path, err)
	}
	return c, nil
}

// maxConfig bounds a configuration file.
const maxConfig = 1 << 20

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
	c.Default()
	return c, c.Validate()
}

// Default fills what is unset with the defaults.
func (c *Config) Default() {
	if c.Registry == "" {
		c.Registry = DefaultRegistry
	}
	if c.Separator == "" {
		c.Separator = DefaultSeparator
	}
	if c.Mode == "" {
		c.Mode = resolve.Strict.String()
	}
	if c.Formats == "" {
		c.Formats = "annotate"
	}
	if c.ListTTL == 0 {
		c.ListTTL = Duration(DefaultListTTL)
	}
	if c.PollTools == 0 {
		c.PollTools = Duration(DefaultPollTools)
	}
	l := &c.Limits
	if l.MaxSessions == 0 {
		l.MaxSessions = DefaultMaxSessions
	}
	if l.MaxRequestBytes == 0 {
		l.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if l.MaxInFlight == 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.SessionIdle == 0 {
		l.SessionIdle = Duration(DefaultSessionIdle)
	}
	if l.SessionGrace == 0 {
		l.SessionGrace = Duration(DefaultSessionGrace)
	}
	if l.UpstreamTimeout == 0 {
		l.UpstreamTimeout = Duration(DefaultUpstreamTimeout)
	}
}

var (
	separatorRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,4}$`)
	serverRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	envRE       = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// Validate reports the first thing wrong.
func (c *Config) Validate() error {
	if !separatorRE.MatchString(c.Separator) {
		return fmt.Errorf("separator %q: 1 to 4 of A-Z a-z 0-9 _ . -", c.Separator)
	}
	if _, err := resolve.ParseMode(c.Mode); err != nil {
		return err
	}
	if c.Formats != "annotate" && c.Formats != "assert" {
		return fmt.Errorf("formats %q: want annotate or assert", c.Formats)
	}
	if c.ListTTL < Duration(time.Millisecond) {
		return errors.New("list_ttl must be at least 1ms: a stateless client's calls are checked against the definitions it may keep that long")
	}
	if c.PollTools < Duration(time.Second) {
		return errors.New("poll_tools must be at least 1s")
	}
	l := c.Limits
	switch {
	case l.MaxSessions < 1:
		return errors.New("limits.max_sessions must be at least 1")
	case l.MaxRequestBytes < 1024:
		return errors.New("limits.max_request_bytes must be at least 1024")
	case l.MaxInFlight < 1:
		return errors.New("limits.max_in_flight must be at least 1")
	case l.SessionIdle < 0, l.UpstreamTimeout <= 0, l.SessionGrace <= 0:
		return errors.New("limits: session_idle must not be negative, session_grace and upstream_timeout must be positive")
	}
	if len(c.Upstreams) == 0 {
		return errors.New("no upstreams")
	}
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		where := fmt.Sprintf("upstreams[%d] (%s)", i, u.Name)
		switch {
		case !serverRE.MatchString(u.Name):
			return fmt.Errorf("%s: name must be 1 to 64 of A-Z a-z 0-9 _ -", where)
		case strings.Contains(u.Name, c.Separator):
			return fmt.Errorf("%s: the name contains the separator %q, so qualified names could be read two ways", where, c.Separator)
		case seen[u.Name]:
			return fmt.Errorf("%s: name given twice", where)
		case (len(u.Command) == 0) == (u.URL == ""):
			return fmt.Errorf("%s: give a command or a url, not both", where)
		case len(u.Command) > 0 && u.Command[0] == "":
			return fmt.Errorf("%s: empty command", where)
		case u.URL != "" && !strings.HasPrefix(u.URL, "http://") && !strings.HasPrefix(u.URL, "https://"):
			return fmt.Errorf("%s: url must be http:// or https://", where)
		case u.URL == "" && (u.BearerTokenFile != ""):
			return fmt.Errorf("%s: bearer_token_file is for a url", where)
		case u.URL != "" && (len(u.Env) > 0 || len(u.InheritEnv) > 0 || u.Dir != ""):
			return fmt.Errorf("%s: env, inherit_env and dir are for a command", where)
		case u.Timeout < 0:
			return fmt.Errorf("%s: negative timeout", where)
		}
		for _, k := range append(slices.Sorted(maps.Keys(u.Env)), u.InheritEnv...) {
			if !envRE.MatchString(k) {
				return fmt.Errorf("%s: bad environment variable name %q", where, k)
			}
		}
		seen[u.Name] = true
	}
	return nil
}

// baseEnv are the variables every command gets from the gateway.
var baseEnv = []string{"PATH", "HOME", "LANG", "TMPDIR"}

// environ is the command's environment: baseEnv and InheritEnv from
// getenv (when set), then Env.
func (u *Upstream) environ(getenv func(string) string) []string {
	var env []string
	for _, k := range append(slices.Clone(baseEnv), u.InheritEnv...) {
		if _, ok := u.Env[k]; ok {
			continue
		}
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(u.Env)) {
		env = append(env, k+"="+u.Env[k])
	}
	return env
}

// timeout is the upstream's call timeout.
func (c *Config) timeout(u *Upstream) time.Duration {
	if u.Timeout > 0 {
		return time.Duration(u.Timeout)
	}
	return time.Duration(c.Limits.UpstreamTimeout)
}
