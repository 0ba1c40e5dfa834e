package modelproxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/resolve/suggest"
)

// canned answers every request with one recorded response, in memory:
// the benchmarks measure the proxy's own work, without sockets (cmd/
// benchproxy measures it over loopback, the audit acknowledged).
type canned struct {
	contentType string
	body        []byte
}

func (c canned) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {c.contentType}},
		Body: io.NopCloser(bytes.NewReader(c.body)), Request: r}, nil
}

const benchRequest = `{"model":"gpt-5.1","messages":[{"role":"user","content":"Weather in Paris?"}],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}}},` +
	`{"type":"function","function":{"name":"search_docs","description":"Search the docs","parameters":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query","limit"],"additionalProperties":false},"strict":true}}]`

// BenchmarkProxy is one Chat Completions response of 3 tool calls (2
// resolve, 1 is rejected: withheld under block), whole and streamed.
func BenchmarkProxy(b *testing.B) {
	for _, tc := range []struct {
		name, file, contentType, extra string
	}{
		{"json", "testdata/openai/parallel.json", "application/json", "}"},
		{"sse", "testdata/openai/parallel.sse", "text/event-stream", `,"stream":true}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body, err := os.ReadFile(tc.file)
			if err != nil {
				b.Fatal(err)
			}
			cfg, err := modelproxy.ParseConfig([]byte(`routes: [{prefix: /openai, api: openai, upstream: "http://upstream.invalid", registry: fleet, policy: block}]`))
			if err != nil {
				b.Fatal(err)
			}
			p, err := modelproxy.New(modelproxy.Options{Config: cfg, Hints: suggest.New(), ResolverBuild: "bench",
				Transport: canned{tc.contentType, body}})
			if err != nil {
				b.Fatal(err)
			}
			req := []byte(benchRequest + tc.extra)
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				r := httptest.NewRequest(http.MethodPost, "/openai/v1/chat/completions", bytes.NewReader(req))
				p.ServeHTTP(w, r)
				if w.Code != 200 || w.Header().Get(modelproxy.HeaderRejected) != "1" && tc.name == "json" {
					b.Fatalf("%d %s", w.Code, w.Body)
				}
			}
		})
	}
}
