package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolaudit/toolaudit/audit"
	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/registry"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var (
	storeOnce sync.Once
	theStore  *registry.Store
)

// sampleStore is the shared sample's registry history, loaded once.
func sampleStore(t testing.TB) *registry.Store {
	t.Helper()
	storeOnce.Do(func() {
		s := registry.New()
		if _, err := check.LoadListingsFile("../testdata/corpus/sample/listings.jsonl", s, nil); err != nil {
			t.Fatal(err)
		}
		theStore = s
	})
	return theStore
}

// server serves the handler of cfg (Store set to the sample's) on a test
// server, with its own metrics registry.
func server(t testing.TB, cfg Config) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	if cfg.Store == nil {
		cfg.Store = sampleStore(t)
	}
	cfg.Gatherer, cfg.Registerer = reg, reg
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s, reg
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decision(t testing.TB) map[string]any {
	t.Helper()
	var d map[string]any
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return d
}

func (r response) decisions(t testing.TB) []map[string]any {
	t.Helper()
	var ds []map[string]any
	if err := json.Unmarshal(r.body, &ds); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return ds
}

func do(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{resp.StatusCode, resp.Header, b}
}

func post(t testing.TB, url, query, body string) response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/v1/resolve"+query, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req)
}

// sample returns the sample's call lines and the class `resolverd check`
// gives each (expected.jsonl is check's output, scored 100%).
func sample(t testing.TB) ([]string, map[string]string) {
	t.Helper()
	calls, err := os.ReadFile("../testdata/corpus/sample/calls.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	exp, err := os.ReadFile("../testdata/corpus/sample/expected.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(exp))
	for sc.Scan() {
		var e struct {
			EventID string `json:"event_id"`
			Class   string `json:"class"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		want[e.EventID] = e.Class
	}
	return strings.Split(strings.TrimSpace(string(calls)), "\n"), want
}

// recorder is an audit.Producer that keeps what it is given.
type recorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (r *recorder) Produce(_ context.Context, recs ...*audit.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range recs {
		c := *x
		c.Call = bytes.Clone(x.Call)
		r.recs = append(r.recs, c)
	}
	return nil
}

// TestResolveAPIMatchesCheck: every sample call, posted alone (eight
// requests at a time) and in batches of ten, gets the class `resolverd
// check` gives it, with source api, and one audit record each whose
// decision is the answer's.
func TestResolveAPIMatchesCheck(t *testing.T) {
	lines, want := sample(t)
	rec := &recorder{}
	s, reg := server(t, Config{Audit: rec, ResolverBuild: "test"})
	var bad atomic.Int64
	check := func(d map[string]any) {
		id, _ := d["event_id"].(string)
		if d["class"] != want[id] || d["source"] != "api" || d["action"] != "" || d["resolver_build"] != "test" || d["policy_version"] != "strict" {
			if bad.Add(1) < 5 {
				t.Errorf("%s: %v, want class %s", id, d, want[id])
			}
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for _, l := range lines {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := post(t, s.URL, "", l)
			if r.status != 200 {
				t.Errorf("status %d: %s", r.status, r.body)
				return
			}
			check(r.decision(t))
		})
	}
	wg.Wait()
	for i := 0; i < len(lines); i += 10 {
		batch := lines[i:min(i+10, len(lines))]
		r := post(t, s.URL, "", "[\n"+strings.Join(batch, ",\n")+"\n]")
		ds := r.decisions(t)
		if r.status != 200 || len(ds) != len(batch) {
			t.Fatalf("batch: status %d, %d answers for %d calls", r.status, len(ds), len(batch))
		}
		for j, d := range ds {
			check(d)
			var e struct {
				EventID string `json:"event_id"`
			}
			json.Unmarshal([]byte(batch[j]), &e)
			if e.EventID != "" && d["event_id"] != e.EventID {
				t.Fatalf("batch answer %d is %v, call %s: out of order", j, d["event_id"], e.EventID)
			}
		}
	}
	if bad.Load() > 0 {
		t.Fatalf("%d answers differ from check", bad.Load())
	}
	if got := metricSum(t, reg, "toolaudit_api_decisions_total"); int(got) != 2*len(lines) {
		t.Fatalf("toolaudit_api_decisions_total %v, want %d", got, 2*len(lines))
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.recs) != 2*len(lines) {
		t.Fatalf("%d audit records for %d answers", len(rec.recs), 2*len(lines))
	}
	for _, r := range rec.recs {
		if r.Source != "api" || want[r.Decision.EventID] != string(r.Decision.Class) || r.DecidedAt.IsZero() || r.ResolverBuild != "test" {
			t.Fatalf("audit record %+v", r)
		}
	}
}

func metricSum(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return total
}

func TestProbesAndMetrics(t *testing.T) {
	var ready atomic.Bool
	s, _ := server(t, Config{Ready: func() error {
		if !ready.Load() {
			return errors.New("registry history not caught up")
		}
		return nil
	}})
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", s.URL+path, nil)
		r := do(t, req)
		return r.status, string(r.body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, body := get("/readyz"); code != 503 || body != "not ready: registry history not caught up\n" {
		t.Fatalf("readyz before ready: %d %q", code, body)
	}
	ready.Store(true)
	if code, body := get("/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("readyz after ready: %d %q", code, body)
	}
	post(t, s.URL, "", `{"event_id":"x"}`)
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `toolaudit_api_decisions_total{class="MALFORMED",verdict="reject"} 1`) ||
		!strings.Contains(body, `toolaudit_api_requests_total{error="",status="200"} 1`) {
		t.Fatalf("metrics %d:\n%s", code, body)
	}
}

// TestNoVerdictBeforeComplete: while Config.Decides says the registry is
// not complete, a call gets 503 not_ready (JSON, Retry-After) and no
// decision; once it is, the same call is decided.
func TestNoVerdictBeforeComplete(t *testing.T) {
	var complete atomic.Bool
	s, _ := server(t, Config{Decides: func() error {
		if !complete.Load() {
			return errors.New("the listings topic has not been read to its end yet")
		}
		return nil
	}})
	calls, want := sample(t)
	var c struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal([]byte(calls[0]), &c); err != nil {
		t.Fatal(err)
	}
	r := post(t, s.URL, "", calls[0])
	var e struct{ Error, Message string }
	if r.status != 503 || r.header.Get("Retry-After") == "" || json.Unmarshal(r.body, &e) != nil ||
		e.Error != codeNotReady || !strings.Contains(e.Message, "not been read to its end") {
		t.Fatalf("before: status %d, Retry-After %q, %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	complete.Store(true)
	r = post(t, s.URL, "", calls[0])
	if d := r.decision(t); r.status != 200 || d["class"] != want[c.EventID] {
		t.Fatalf("after: status %d, %v, want class %s", r.status, d, want[c.EventID])
	}
}
