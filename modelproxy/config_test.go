package modelproxy_test

import (
	"strings"
	"testing"

	"github.com/toolaudit/toolaudit/modelproxy"
)

// TestConfigErrors: each mistake in a configuration is an error naming
// it; a valid one with clients parses.
func TestConfigErrors(t *testing.T) {
	const sum = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	route := func(extra string) string {
		return `routes: [{prefix: /openai, api: openai, upstream: "http://up.invalid", policy: block` + extra + `}]`
	}
	for _, tc := range []struct{ name, config, err string }{
		{"valid", route(`, registry: fleet`), ""},
		{"valid clients", route(`, clients: [{token_sha256: ` + sum + `, registry: team-a, agent: bot}]`), ""},
		{"client inherits the registry", route(`, registry: fleet, clients: [{token_sha256: ` + sum + `}]`), ""},
		{"no registry", route(``), "routes[0]: no registry"},
		{"client without registry", route(`, clients: [{token_sha256: ` + sum + `}]`), "clients[0]: no registry, and the route names none"},
		{"short digest", route(`, registry: fleet, clients: [{token_sha256: abc}]`), "want the credential's SHA-256"},
		{"digest not hex", route(`, registry: fleet, clients: [{token_sha256: ` + strings.Repeat("z", 64) + `}]`), "want the credential's SHA-256"},
		{"digest twice", route(`, registry: fleet, clients: [{token_sha256: ` + sum + `}, {token_sha256: ` + sum + `}]`), "twice"},
		{"unknown key", route(`, registry: fleet, clients: [{token: x}]`), "unknown field"},
		{"bad policy", `routes: [{prefix: /o, api: openai, upstream: "http://up.invalid", registry: r, policy: allow}]`, `policy "allow"`},
		{"bad api", `routes: [{prefix: /o, api: gemini, upstream: "http://up.invalid", registry: r, policy: block}]`, `api "gemini"`},
		{"bad upstream", `routes: [{prefix: /o, api: openai, upstream: "ftp://x", registry: r, policy: block}]`, "want an http or https base URL"},
		{"prefix twice", `routes: [{prefix: /o, api: openai, upstream: "http://a.invalid", registry: r, policy: block}, {prefix: /o/, api: openai, upstream: "http://a.invalid", registry: r, policy: block}]`, "twice"},
		{"no routes", `mode: strict`, "no routes"},
		{"retries", route(`, registry: r, retries: 11`), "want 1 to 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := modelproxy.ParseConfig([]byte(tc.config))
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}
