package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/dashboards"
	"github.com/toolaudit/toolaudit/internal/testkit/browsertest"
	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
	"github.com/toolaudit/toolaudit/report"
	"github.com/toolaudit/toolaudit/schema"
)

// freePorts returns n ports free on 127.0.0.1 a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// daemon is `resolverd run --embedded` running in this process.
type daemon struct {
	http, kafka, clickhouse string
	log                     *lockedbuf.Buffer
}

// startDaemon runs `resolverd run --embedded` in-process, as the demo
// does, until the test ends; it skips without the engine library unless
// the run requires it (need.Engine).
func startDaemon(t *testing.T, extra ...string) *daemon {
	t.Helper()
	need.Engine(t)
	p := freePorts(t, 4)
	d := &daemon{http: fmt.Sprintf("127.0.0.1:%d", p[0]), kafka: fmt.Sprintf("127.0.0.1:%d", p[1]),
		clickhouse: fmt.Sprintf("127.0.0.1:%d", p[2]), log: &lockedbuf.Buffer{}}
	args := append([]string{"run", "--embedded", t.TempDir(), "--http", d.http, "--listing-hold", "0s", "--analysis", "live", "--registry-history",
		"--embedded-kafka-port", strconv.Itoa(p[1]), "--embedded-clickhouse-port", strconv.Itoa(p[2]),
		"--embedded-clickhouse-http-port", strconv.Itoa(p[3])}, extra...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdio{strings.NewReader(""), d.log, d.log}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("resolverd run exited %d:\n%s", code, d.log)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("resolverd run did not stop:\n%s", d.log)
		}
	})
	waitUntil(t, 120*time.Second, "resolverd ready", func() bool {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("resolverd run exited %d:\n%s", code, d.log)
		default:
		}
		resp, err := http.Get("http://" + d.http + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return d
}

func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// produceListings sends the sample's listings and waits until resolverd
// applied them, so that the calls produced next are decided against them.
func (d *daemon) produceListings(t *testing.T) int {
	t.Helper()
	n := d.produceFile(t, "tool-listings", corpus("sample", "listings.jsonl"))
	waitUntil(t, 30*time.Second, "the listings applied", func() bool {
		return sum(d.metrics(t), "toolaudit_stream_listings_applied_total") >= float64(n)
	})
	return n
}

// produceFile sends a JSONL file's events to topic, keyed as the
// contract says.
func (d *daemon) produceFile(t *testing.T, topic, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.kafka))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var rs []*kgo.Record
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		key := ""
		if topic == "tool-listings" {
			l, err := schema.DecodeListing(line)
			if err != nil {
				t.Fatal(err)
			}
			key = l.Key()
		}
		rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(key), Value: line})
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

func (d *daemon) metrics(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + d.http + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

func sum(mfs map[string]*dto.MetricFamily, name string) float64 {
	var s float64
	if mf := mfs[name]; mf != nil {
		for _, m := range mf.Metric {
			s += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return s
}

// TestDashboardsPromQL: every Prometheus expression of the pipeline
// dashboard, evaluated by promtool on the metrics a running resolverd
// exports (after deciding the sample's calls, applying its listings and
// answering an API call), returns data; an expression naming a metric or
// label resolverd does not export returns none and fails. The same run
// checks that resolverd records the registry history (registry diff).
func TestDashboardsPromQL(t *testing.T) {
	promtool := need.Tool(t, "promtool", "apt-get install prometheus to check the dashboards' PromQL (.ci/run does)")
	d := startDaemon(t)
	listings := d.produceListings(t)
	calls := d.produceFile(t, "tool-calls", corpus("sample", "calls.jsonl"))
	call, err := os.ReadFile(corpus("sample", "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := bytes.Cut(call, []byte("\n"))
	resp, err := http.Post("http://"+d.http+"/v1/resolve", "application/json", bytes.NewReader(first))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var mfs map[string]*dto.MetricFamily
	waitUntil(t, 60*time.Second, "the calls decided and the history written", func() bool {
		mfs = d.metrics(t)
		return sum(mfs, "toolaudit_stream_decisions_total") >= float64(calls) &&
			sum(mfs, "toolaudit_stream_listings_applied_total") >= float64(listings) &&
			sum(mfs, "toolaudit_registry_history_changes_written_total") > 0
	})

	exprs, err := dashboards.PromQL()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var rules, tests strings.Builder
	rules.WriteString("groups:\n  - name: dashboards\n    rules:\n")
	tests.WriteString("rule_files: [rules.yml]\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	for _, s := range inputSeries(mfs) {
		fmt.Fprintf(&tests, "      - series: %s\n        values: %s\n", strconv.Quote(s.series), strconv.Quote(s.values))
	}
	tests.WriteString("    alert_rule_test:\n")
	for i, e := range exprs {
		expr := strings.ReplaceAll(e.Expr, "$__rate_interval", "5m")
		fmt.Fprintf(&rules, "      - alert: E%d\n        expr: %s\n", i, strconv.Quote("count("+expr+") > 0"))
		fmt.Fprintf(&tests, "      - eval_time: 10m\n        alertname: E%d\n        exp_alerts:\n          - exp_labels: {}\n", i)
	}
	for name, s := range map[string]string{"rules.yml": rules.String(), "tests.yml": tests.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "test", "rules", "tests.yml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		var which strings.Builder
		for i, e := range exprs {
			fmt.Fprintf(&which, "E%d = %s: %s\n", i, e.Panel, e.Expr)
		}
		t.Fatalf("promtool test rules: %v\n%s\n%s", err, out, which.String())
	}
	t.Logf("%d expressions of the pipeline dashboard return data on resolverd's metrics (%d families)", len(exprs), len(mfs))

	// The registry history: the sample's registries, through `registry diff`.
	code, out, stderr := runCmd(t, "", "registry", "diff", "--clickhouse", d.clickhouse, "--registry", "fleet-e44d9e")
	if code != 0 {
		t.Fatalf("registry diff: exit %d\n%s%s", code, out, stderr)
	}
	if !strings.Contains(out, " added ") {
		t.Errorf("registry diff shows no added tool:\n%s", out)
	}
}

type series struct{ series, values string }

// inputSeries turns scraped families into promtool input series, as
// Prometheus would have scraped them from one instance every minute:
// counters and histograms grow by 1 a minute, gauges stay.
func inputSeries(mfs map[string]*dto.MetricFamily) []series {
	var out []series
	lbl := func(m *dto.Metric, extra ...string) string {
		parts := []string{`instance="resolverd-1:8080"`, `job="resolverd"`}
		for _, l := range m.Label {
			parts = append(parts, l.GetName()+"="+strconv.Quote(l.GetValue()))
		}
		for i := 0; i+1 < len(extra); i += 2 {
			parts = append(parts, extra[i]+"="+strconv.Quote(extra[i+1]))
		}
		slices.Sort(parts)
		return "{" + strings.Join(parts, ",") + "}"
	}
	grow := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "+1x15" }
	keep := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) + "x15" }
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out = append(out, series{name + lbl(m), grow(m.GetCounter().GetValue())})
			case dto.MetricType_GAUGE:
				out = append(out, series{name + lbl(m), keep(m.GetGauge().GetValue())})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.Bucket {
					out = append(out, series{name + "_bucket" + lbl(m, "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), grow(float64(b.GetCumulativeCount()))})
				}
				out = append(out, series{name + "_bucket" + lbl(m, "le", "+Inf"), grow(float64(h.GetSampleCount()))},
					series{name + "_count" + lbl(m), grow(float64(h.GetSampleCount()))},
					series{name + "_sum" + lbl(m), grow(h.GetSampleSum())})
			case dto.MetricType_UNTYPED:
				out = append(out, series{name + lbl(m), keep(m.GetUntyped().GetValue())})
			}
		}
	}
	slices.SortFunc(out, func(a, b series) int { return strings.Compare(a.series, b.series) })
	return out
}

// TestReportCommand: as the demo does, resolverd run decides the sample,
// report --expect waits for every call, and report --since all writes the
// analytics to the terminal and as HTML, with a session's timeline: the
// answer first, and a page that fits a laptop's and a desktop's window
// (screenshots kept as test artifacts).
func TestReportCommand(t *testing.T) {
	d := startDaemon(t)
	d.produceListings(t)
	calls := d.produceFile(t, "tool-calls", corpus("sample", "calls.jsonl"))
	code, out, stderr := runCmd(t, "", "report", "--clickhouse", d.clickhouse, "--expect", strconv.Itoa(calls), "--timeout", "60s")
	if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), fmt.Sprintf("total %d", calls)) {
		t.Fatalf("report --expect: exit %d\n%s%s", code, out, stderr)
	}
	file := filepath.Join(t.TempDir(), "report.html")
	code, out, stderr = runCmd(t, "", "report", "--clickhouse", d.clickhouse, "--since", "all", "--html", file, "--session", "s-38bd3c69")
	if code != 0 {
		t.Fatalf("report: exit %d\n%s%s", code, out, stderr)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		fmt.Sprintf("decisions %d (allowed 167, rejected 103)", calls),
		"Top problems, by calls affected 1.", "Colliding and shadowed names", "== Session s-38bd3c69", "HTML report: " + file,
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	page, err := os.ReadFile(file)
	if err != nil || !bytes.Contains(page, []byte(`data-q="fleet.verdicts" data-col="decisions" data-v="270"`)) {
		t.Errorf("HTML report (%v) lacks the decisions tile of 270", err)
	}
	if !bytes.Contains(page, []byte(`<ol class="problems">`)) {
		t.Error("HTML report has no top problems")
	}
	browsertest.CheckFits(t, string(page), report.CSP, ".answer", file, t.ArtifactDir(), "demo")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--since", "yesterday"}, "--since"},
		{[]string{"--since", "-1h"}, "--since"},
		{[]string{"--to", "noon"}, "--to"},
	} {
		code, _, stderr := runCmd(t, "", append([]string{"report", "--clickhouse", d.clickhouse}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("report %v: exit %d, %q", tc.args, code, stderr)
		}
	}
}
