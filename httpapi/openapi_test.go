package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	"github.com/toolaudit/toolaudit/approvals"
	"github.com/toolaudit/toolaudit/resolve"
)

// openAPI is api/openapi.yaml as JSON, and its schemas compiled.
type openAPI struct {
	doc      map[string]any
	decision *jsonschema.Schema
	batch    *jsonschema.Schema
	err      *jsonschema.Schema
}

func loadOpenAPI(t *testing.T) openAPI {
	t.Helper()
	y, err := os.ReadFile("../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSONStrict(y) // refuses repeated keys
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	var o openAPI
	if err := json.Unmarshal(j, &o.doc); err != nil {
		t.Fatal(err)
	}
	if o.doc["openapi"] != "3.1.0" {
		t.Fatalf("openapi %v, want 3.1.0", o.doc["openapi"])
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	const url = "file:///openapi.json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	compile := func(ptr string) *jsonschema.Schema {
		s, err := c.Compile(url + "#" + ptr)
		if err != nil {
			t.Fatalf("%s: %v", ptr, err)
		}
		return s
	}
	o.decision = compile("/components/schemas/Decision")
	o.batch = compile("/paths/~1v1~1resolve/post/responses/200/content/application~1json/schema")
	o.err = compile("/components/schemas/Error")
	return o
}

// at walks the document by keys.
func (o openAPI) at(t *testing.T, keys ...string) any {
	t.Helper()
	var v any = o.doc
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: not an object at %s", keys, k)
		}
		if v, ok = m[k]; !ok {
			t.Fatalf("api/openapi.yaml has no %s", strings.Join(keys, "."))
		}
	}
	return v
}

func propertyNames(t *testing.T, o openAPI, schema string) []string {
	props := o.at(t, "components", "schemas", schema, "properties").(map[string]any)
	var names []string
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func validate(t *testing.T, s *jsonschema.Schema, body []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("answer does not match api/openapi.yaml: %v\n%s", err, body)
	}
	return v
}

// TestOpenAPIAgrees: api/openapi.yaml and the handler agree: every real
// answer (each sample call, a batch, every error) validates against the
// documented schema, which refuses undocumented members; every
// documented member of Decision, Hints and Error appears in some real
// answer; every status the handler answers is documented, with the error
// codes it uses; the parameters' values are those the handler takes; the
// batch limit is the default.
func TestOpenAPIAgrees(t *testing.T) {
	o := loadOpenAPI(t)
	lines, _ := sample(t)
	s, _ := server(t, Config{Audit: &recorder{}})
	seen := map[string]bool{} // Decision and Hints members in real answers
	note := func(v any) {
		d := v.(map[string]any)
		for k := range d {
			seen["Decision."+k] = true
		}
		for k := range d["hints"].(map[string]any) {
			seen["Hints."+k] = true
		}
	}
	for _, l := range lines {
		for _, q := range []string{"", "?mode=pin-assisted&action=enforced"} {
			r := post(t, s.URL, q, l)
			note(validate(t, o.decision, r.body))
		}
	}
	// Under an approvals policy (warn: decided as without), answers carry
	// approval and baseline_version.
	warn, _ := approvals.ParsePolicy("warn")
	sa, _ := server(t, Config{Audit: &recorder{}, Resolver: resolve.Resolver{Approvals: approvals.NewGate(warn, nil)}})
	for _, l := range lines {
		note(validate(t, o.decision, post(t, sa.URL, "", l).body))
	}
	r := post(t, s.URL, "?action=observed", "["+strings.Join(lines[:10], ",")+"]")
	for _, v := range validate(t, o.batch, r.body).([]any) {
		note(v)
	}
	for _, schema := range []string{"Decision", "Hints"} {
		for _, p := range propertyNames(t, o, schema) {
			if !seen[schema+"."+p] {
				t.Errorf("%s.%s is documented but no answer has it", schema, p)
			}
		}
	}

	// Errors: every status and code the handler answers.
	tk, _ := tokensFile(t, "a:"+tokenA+"\n")
	empty, _ := tokensFile(t, "\n")
	auth, _ := server(t, Config{Tokens: tk})
	none, _ := server(t, Config{Tokens: empty})
	small, _ := server(t, Config{MaxBody: 64, MaxBatch: 1})
	codes := map[string]bool{}
	for _, tc := range []struct {
		url, method, path, body string
		status                  int
	}{
		{s.URL, "POST", "/v1/resolve", "", 400},
		{auth.URL, "POST", "/v1/resolve", "{}", 401},
		{none.URL, "POST", "/v1/resolve", "{}", 403},
		{s.URL, "GET", "/v1/other", "", 404},
		{s.URL, "GET", "/v1/resolve", "", 405},
		{small.URL, "POST", "/v1/resolve", `{"pad":"` + strings.Repeat("x", 64) + `"}`, 413},
		{small.URL, "POST", "/v1/resolve", `[{},{}]`, 413},
	} {
		req, _ := http.NewRequest(tc.method, tc.url+tc.path, strings.NewReader(tc.body))
		r := do(t, req)
		if r.status != tc.status {
			t.Fatalf("%s %s: %d, want %d", tc.method, tc.path, r.status, tc.status)
		}
		e := validate(t, o.err, r.body).(map[string]any)
		codes[e["error"].(string)] = true
		op := "post"
		if tc.path == "/v1/other" {
			o.at(t, "paths", "/v1/{other}", "get", "responses", strconv.Itoa(tc.status))
			continue
		}
		o.at(t, "paths", "/v1/resolve", op, "responses", strconv.Itoa(tc.status))
	}
	// 408 and 503 are answered by TestSlowBody, TestInFlightRequests,
	// TestAuditFailClosed and TestNoVerdictBeforeComplete; here:
	// documented, with the codes errors.go has.
	for _, st := range []string{"408", "503"} {
		o.at(t, "paths", "/v1/resolve", "post", "responses", st)
	}
	for _, c := range []string{codeTimeout, codeOverloaded, codeAuditDown, codeNotReady} {
		codes[c] = true
	}
	var documented []string
	for _, v := range o.at(t, "components", "schemas", "Error", "properties", "error", "enum").([]any) {
		documented = append(documented, v.(string))
	}
	for c := range codes {
		if !slices.Contains(documented, c) {
			t.Errorf("error code %s is answered but not documented", c)
		}
	}
	if len(documented) != len(codes) {
		t.Errorf("documented codes %v, answered %v", documented, codes)
	}

	// Parameters and limits.
	params := o.at(t, "paths", "/v1/resolve", "post", "parameters").([]any)
	for _, p := range params {
		pm := p.(map[string]any)
		enum := pm["schema"].(map[string]any)["enum"].([]any)
		for _, v := range enum {
			r := post(t, s.URL, "?"+pm["name"].(string)+"="+v.(string), lines[0])
			if r.status != 200 {
				t.Errorf("?%s=%s: %d", pm["name"], v, r.status)
			}
		}
		if r := post(t, s.URL, "?"+pm["name"].(string)+"=other", lines[0]); r.status != 400 {
			t.Errorf("?%s=other: %d", pm["name"], r.status)
		}
	}
	one := o.at(t, "paths", "/v1/resolve", "post", "requestBody", "content", "application/json", "schema", "oneOf").([]any)
	if max := one[1].(map[string]any)["maxItems"]; max != float64(DefaultMaxBatch) {
		t.Errorf("documented batch maximum %v, default %d", max, DefaultMaxBatch)
	}
}

// TestOpenAPIRetryAfter: every 503 of a /v1 endpoint in api/openapi.yaml
// declares Retry-After, as apierror.Write sends it with every one.
func TestOpenAPIRetryAfter(t *testing.T) {
	o := loadOpenAPI(t)
	n := 0
	for path, item := range o.at(t, "paths").(map[string]any) {
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for method, op := range item.(map[string]any) {
			op, ok := op.(map[string]any)
			if !ok || op["responses"] == nil {
				continue
			}
			r, ok := op["responses"].(map[string]any)["503"].(map[string]any)
			if !ok {
				continue
			}
			n++
			if h, _ := r["headers"].(map[string]any); h["Retry-After"] == nil {
				t.Errorf("%s %s: 503 without Retry-After", method, path)
			}
		}
	}
	if n < 2 {
		t.Fatalf("%d 503s of /v1 documented, want /v1/resolve's and /v1/approvals'", n)
	}
}
