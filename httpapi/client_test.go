// The resolve API's Go client (module resolveclient, which imports none
// of this module) against this server: its own module cannot import the
// server without requiring this module, so its tests live here.
package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/internal/bearer"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolveclient"
)

func sampleServer(t *testing.T, cfg httpapi.Config) *httptest.Server {
	t.Helper()
	store := registry.New()
	if _, err := check.LoadListingsFile("../testdata/corpus/sample/listings.jsonl", store, nil); err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	h, err := httpapi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}

func sampleCalls(t *testing.T) []resolveclient.Call {
	t.Helper()
	b, err := os.ReadFile("../testdata/corpus/sample/calls.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var calls []resolveclient.Call
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var c resolveclient.Call
		if json.Unmarshal(l, &c) == nil && c.EventID != "" && !c.EmittedAt.IsZero() && c.Tool != "" && len(c.Arguments) > 0 {
			calls = append(calls, c)
		}
	}
	return calls
}

// TestClientFieldsAgree: the client's Decision and Hints read every member of
// real answers (unknown members refused), and name exactly the members
// api/openapi.yaml documents.
func TestClientFieldsAgree(t *testing.T) {
	s := sampleServer(t, httpapi.Config{})
	calls := sampleCalls(t)
	for _, c := range calls {
		body, _ := json.Marshal(c)
		resp, err := http.Post(s.URL+"/v1/resolve", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var raw json.RawMessage
		json.NewDecoder(resp.Body).Decode(&raw)
		resp.Body.Close()
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		var d resolveclient.Decision
		if err := dec.Decode(&d); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		if d.EventID != c.EventID || d.Source != "api" || d.DecidedAt.IsZero() {
			t.Fatalf("decoded %+v from %s", d, raw)
		}
	}
	y, err := os.ReadFile("../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]any `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := yaml.Unmarshal(y, &doc); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]reflect.Type{"Decision": reflect.TypeOf(resolveclient.Decision{}), "Hints": reflect.TypeOf(resolveclient.Hints{})} {
		documented := doc.Components.Schemas[name].Properties
		fields := map[string]bool{}
		for i := range typ.NumField() {
			tag, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			fields[tag] = true
			if _, ok := documented[tag]; !ok {
				t.Errorf("%s.%s is not in api/openapi.yaml", name, tag)
			}
		}
		for p := range documented {
			if !fields[p] {
				t.Errorf("api/openapi.yaml's %s.%s is not read by the client", name, p)
			}
		}
	}
}

// TestClientResolveBatchAndOptions: a batch comes back in order; mode, action
// and the token reach the server.
func TestClientResolveBatchAndOptions(t *testing.T) {
	tokens := t.TempDir() + "/tokens"
	os.WriteFile(tokens, []byte("c:client-token-0123456789\n"), 0o600)
	tk, err := bearerLoad(tokens)
	if err != nil {
		t.Fatal(err)
	}
	s := sampleServer(t, httpapi.Config{Tokens: tk})
	calls := sampleCalls(t)[:10]
	if _, err := resolveclient.New(s.URL).ResolveBatch(context.Background(), calls); !isStatus(err, 401) {
		t.Fatalf("without a token: %v", err)
	}
	c := resolveclient.New(s.URL, resolveclient.WithToken("client-token-0123456789"), resolveclient.WithMode("pin-assisted"), resolveclient.WithAction("observed"))
	ds, err := c.ResolveBatch(context.Background(), calls)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if d.EventID != calls[i].EventID || d.PolicyVersion != "pin-assisted" || d.Action != "observed" {
			t.Fatalf("decision %d: %+v for %s", i, d, calls[i].EventID)
		}
	}
}

func isStatus(err error, status int) bool {
	var e *resolveclient.Error
	return errors.As(err, &e) && e.Status == status
}

// TestClientGuardFailsClosed: when the audit trail is down the API answers 503,
// and Guard does not run the call.
func TestClientGuardFailsClosed(t *testing.T) {
	down := audit.ProducerFunc(func(context.Context, ...*audit.Record) error { return errors.New("no broker") })
	s := sampleServer(t, httpapi.Config{Audit: down})
	ran := false
	run := resolveclient.New(s.URL).Guard(func(context.Context, resolveclient.Call) (json.RawMessage, error) { ran = true; return nil, nil })
	_, err := run(context.Background(), sampleCalls(t)[0])
	var e *resolveclient.Error
	if !errors.As(err, &e) || e.Code != "audit_unavailable" || !e.Temporary() || e.RetryAfter != time.Second || ran || resolveclient.IsRejected(err) {
		t.Fatalf("err %v (%+v), ran %v", err, e, ran)
	}
}

func bearerLoad(path string) (*bearer.Tokens, error) { return bearer.Load(path, nil) }
