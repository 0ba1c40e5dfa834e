package httpapi

import (
	"bufio"
	"bytes"
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
	"go.uber.org/goleak"

	"github.com/toolaudit/toolaudit/offline"
	"github.com/toolaudit/toolaudit/registryversions"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func server(t *testing.T, ready func() error) (*httptest.Server, *prometheus.Registry) {
	t.Helper()
	store := registryversions.New()
	f, err := os.Open("../testdata/corpus/sample/listings.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := offline.LoadListings(f, store, nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	h, err := New(Config{Store: store, Ready: ready, Gatherer: reg, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s, reg
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url+"/v1/resolve", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var d map[string]any
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("bad decision %q: %v", b, err)
		}
	}
	return resp.StatusCode, d
}

// TestResolveAPIMatchesCheck: every sample call posted one by one, eight at
// a time, gets the class `resolverd check` gives it.
func TestResolveAPIMatchesCheck(t *testing.T) {
	s, reg := server(t, nil)
	calls, _ := os.ReadFile("../testdata/corpus/sample/calls.jsonl")
	exp, _ := os.ReadFile("../testdata/corpus/sample/expected.jsonl")
	want := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(exp))
	for sc.Scan() {
		var e struct{ EventID, Class string }
		var raw map[string]any
		json.Unmarshal(sc.Bytes(), &raw)
		e.EventID, e.Class = raw["event_id"].(string), raw["class"].(string)
		want[e.EventID] = e.Class
	}
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	var wg sync.WaitGroup
	var bad atomic.Int64
	sem := make(chan struct{}, 8)
	for _, l := range lines {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			code, d := post(t, s.URL, l)
			if code != 200 || d["class"] != want[d["event_id"].(string)] {
				bad.Add(1)
				t.Errorf("%s: status %d class %v, want %s", d["event_id"], code, d["class"], want[d["event_id"].(string)])
			}
		}()
	}
	wg.Wait()
	if bad.Load() == 0 {
		mfs, _ := reg.Gather()
		var total float64
		for _, mf := range mfs {
			if mf.GetName() == "toolaudit_api_decisions_total" {
				for _, m := range mf.GetMetric() {
					total += m.GetCounter().GetValue()
				}
			}
		}
		if int(total) != len(lines) {
			t.Fatalf("metric counted %v decisions, want %d", total, len(lines))
		}
	}
}

func TestResolveAPIErrors(t *testing.T) {
	s, _ := server(t, nil)
	code, d := post(t, s.URL, `{"event_id":"x","tool":""}`)
	if code != 200 || d["class"] != "MALFORMED" || d["verdict"] != "reject" {
		t.Fatalf("status %d decision %v", code, d)
	}
	if code, _ := post(t, s.URL, `{"pad":"`+strings.Repeat("x", MaxBody)+`"}`); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: status %d", code)
	}
	resp, err := http.Get(s.URL + "/v1/resolve")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/resolve: status %d", resp.StatusCode)
	}
}

func TestProbesAndMetrics(t *testing.T) {
	var ready atomic.Bool
	s, _ := server(t, func() error {
		if !ready.Load() {
			return errors.New("registry history not caught up")
		}
		return nil
	})
	get := func(path string) (int, string) {
		resp, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
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
	post(t, s.URL, `{"event_id":"x"}`)
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, `toolaudit_api_decisions_total{class="MALFORMED",verdict="reject"} 1`) {
		t.Fatalf("metrics %d:\n%s", code, body)
	}
}
