package modelproxy_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolaudit/toolaudit/modelproxy"
)

// FuzzUpstream answers the proxy's requests with any bytes, as a whole
// response and as an event stream, for each API and policy: whatever
// the upstream sends, the proxy answers, without a panic or a hang. The
// seeds are the recorded responses (of every API, through every route).
// That a call reaches the SDKs only decided is TestStreamSmuggledCalls'
// and TestCaseFoldedNames', with the SDKs reading the answers.
func FuzzUpstream(f *testing.F) {
	files, _ := filepath.Glob("testdata/*/*.*")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(0), b)
		f.Add(uint8(1), b)
		f.Add(uint8(2), b)
	}
	routes := `routes:
  - {prefix: /openai, api: openai, upstream: "http://upstream.invalid", registry: fleet, policy: block}
  - {prefix: /observe, api: openai, upstream: "http://upstream.invalid", registry: fleet, policy: observe}
  - {prefix: /retry, api: openai, upstream: "http://upstream.invalid", registry: fleet, policy: retry}
  - {prefix: /anthropic, api: anthropic, upstream: "http://upstream.invalid", registry: fleet, policy: block}
  - {prefix: /aretry, api: anthropic, upstream: "http://upstream.invalid", registry: fleet, policy: retry}
`
	cfg, err := modelproxy.ParseConfig([]byte(routes))
	if err != nil {
		f.Fatal(err)
	}
	requests := []struct{ path, body string }{
		{"/openai/v1/chat/completions", benchRequest},
		{"/observe/v1/chat/completions", benchRequest},
		{"/retry/v1/chat/completions", benchRequest},
		{"/openai/v1/responses", `{"model":"gpt-5.1","input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]`},
		{"/anthropic/v1/messages", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`},
		{"/aretry/v1/messages", `{"model":"claude","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`},
	}
	f.Fuzz(func(t *testing.T, mode uint8, body []byte) {
		ct, extra := "application/json", "}"
		if mode%3 != 0 {
			ct, extra = "text/event-stream", `,"stream":true}`
		}
		p, err := modelproxy.New(modelproxy.Options{Config: cfg, Transport: canned{ct, body}})
		if err != nil {
			t.Fatal(err)
		}
		for _, rq := range requests {
			w := httptest.NewRecorder()
			p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, rq.path, bytes.NewReader([]byte(rq.body+extra))))
			if w.Code == 0 {
				t.Fatalf("%s: no answer", rq.path)
			}
		}
	})
}
