// Command benchapi measures the latency of POST /v1/resolve under an
// open-loop (constant-rate) load: requests are sent at fixed times,
// whether or not earlier ones were answered, so a slow server shows as
// latency and errors, not as a lower offered rate (no coordinated
// omission). For each rate and batch size it prints the requests sent,
// answered 200, failed, the rate achieved, and the latency quantiles.
//
// By default it serves the API itself, in-process, as resolverd run
// --http does: the real handler and bounded server on a loopback port,
// the shared sample's listings, and the audit trail on, producing to an
// embedded Kafka-protocol broker (kfake) and waiting for its
// acknowledgement before each answer (its records are deleted as the run
// goes, since no resolverd consumes them). The load generator runs in the
// same process, on the same cores. -url measures another server instead
// (a real resolverd run; -token for its tokens file).
//
//	go run ./cmd/benchapi -rates 5000,10000,20000 -batches 1,10 -duration 10s
//
// Latency is measured from the moment a request is handed to the HTTP
// client to the end of its answer, like wrk and vegeta; "lag p99" is how
// late the generator itself was in sending (the time from a request's
// scheduled moment to its sending), which says whether the offered rate
// was really offered; "achieved/s" counts the answers over the time from
// the first measured request's moment to the last answer. "CPU/req" is
// the process's CPU time (server, generator and, in-process, the broker)
// per request sent, warm-up included: on a machine whose cores are shared
// it is the figure that does not depend on the neighbours, and its
// inverse times the cores bounds the rate one machine can serve.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/internal/testkit/benchutil"
	"github.com/toolaudit/toolaudit/registry"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchapi:", err)
		os.Exit(1)
	}
}

type options struct {
	url, token       string
	rates, batches   []int
	duration, warmup time.Duration
	workers          int
	audit            bool
	listings, calls  string
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("benchapi", flag.ContinueOnError)
	var o options
	rates := fs.String("rates", "5000,10000,20000", "request `rates` per second, comma-separated")
	batches := fs.String("batches", "1,10", "call events per request, comma-separated")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per rate and batch")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "time at the rate before measuring")
	fs.IntVar(&o.workers, "workers", 512, "most requests in flight from the generator")
	fs.BoolVar(&o.audit, "audit", true, "in-process server: audit every decision to the embedded broker before answering")
	fs.StringVar(&o.url, "url", "", "base `URL` of a running resolverd to measure (default: serve in-process)")
	fs.StringVar(&o.token, "token", "", "bearer `TOKEN` for -url")
	fs.StringVar(&o.listings, "listings", "testdata/corpus/sample/listings.jsonl", "listings `FILE` of the in-process server")
	fs.StringVar(&o.calls, "calls", "testdata/corpus/sample/calls.jsonl", "call events `FILE` sent, in turn")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	if err := fs.Parse(args); err != nil {
		return err
	}
	stopProfile, err := benchutil.CPUProfile(*cpuprofile)
	if err != nil {
		return err
	}
	defer stopProfile()
	if o.rates, err = benchutil.Ints(*rates); err != nil {
		return err
	}
	if o.batches, err = benchutil.Ints(*batches); err != nil {
		return err
	}
	calls, err := readLines(o.calls)
	if err != nil {
		return err
	}
	base, stop := o.url, func() {}
	where := "resolverd at " + o.url
	if base == "" {
		if base, stop, err = serve(o); err != nil {
			return err
		}
		where = "in-process server, audit trail "
		if o.audit {
			where += "on (embedded kfake broker, acks before each answer)"
		} else {
			where += "off"
		}
	}
	defer stop()
	fmt.Fprintf(out, "benchapi %s, %s, GOMAXPROCS %d, %s; open loop, %v per step after %v of warm-up\n",
		time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOMAXPROCS(0), where, o.duration, o.warmup)
	// Fixed widths, not a tabwriter: each row is printed as soon as its
	// step ends, and a tabwriter aligns only what one flush holds.
	const row = "%7v %10v %8v %8v %7v %11v %10v %10v %10v %10v %10v %11v %8v\n"
	fmt.Fprintf(out, row, "req/s", "calls/req", "sent", "200", "errors", "achieved/s", "p50", "p90", "p99", "p99.9", "max", "lag p99", "CPU/req")
	for _, batch := range o.batches {
		bodies := makeBodies(calls, batch)
		for _, rate := range o.rates {
			r := load(base, o, bodies, rate)
			fmt.Fprintf(out, row, rate, batch, r.sent, r.ok, r.errors,
				fmt.Sprintf("%.0f", float64(r.ok+r.errors)/r.elapsed.Seconds()), ms(r.q(0.5)), ms(r.q(0.9)), ms(r.q(0.99)), ms(r.q(0.999)), ms(r.q(1)), ms(r.lag),
				fmt.Sprintf("%.0fµs", r.cpu.Seconds()*1e6/float64(max(1, r.sent+r.warm))))
			if len(r.errorKinds) > 0 {
				fmt.Fprintf(out, "  errors at %d req/s x %d: %s\n", rate, batch, r.errorSummary())
			}
		}
	}
	return nil
}

func readLines(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no call events", path)
	}
	return out, nil
}

// makeBodies returns request bodies of batch calls each (one call: the
// event itself; more: an array), going through the calls in turn.
func makeBodies(calls [][]byte, batch int) [][]byte {
	var out [][]byte
	for i := 0; i < len(calls); i += batch {
		if batch == 1 {
			out = append(out, calls[i])
			continue
		}
		var b bytes.Buffer
		b.WriteByte('[')
		for j := 0; j < batch; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(calls[(i+j)%len(calls)])
		}
		b.WriteByte(']')
		out = append(out, b.Bytes())
	}
	return out
}

// serve starts the in-process server and returns its base URL.
func serve(o options) (string, func(), error) {
	f, err := os.Open(o.listings)
	if err != nil {
		return "", nil, err
	}
	store := registry.New()
	_, err = check.LoadListings(f, store, nil)
	f.Close()
	if err != nil {
		return "", nil, err
	}
	cfg := httpapi.Config{Store: store, ResolverBuild: "benchapi", MaxInFlight: 4096}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if o.audit {
		p, stopAudit, err := benchutil.KfakeAudit()
		if err != nil {
			return "", nil, err
		}
		stops = append(stops, stopAudit)
		cfg.Audit = p
	}
	h, err := httpapi.New(cfg)
	if err != nil {
		stop()
		return "", nil, err
	}
	srv, err := httpapi.NewServer(h, httpapi.ServerConfig{MaxConns: 8192}, nil, nil)
	if err != nil {
		stop()
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stop()
		return "", nil, err
	}
	go srv.Serve(ln)
	stops = append(stops, func() { srv.Shutdown(context.Background()) })
	return "http://" + ln.Addr().String(), stop, nil
}

type result struct {
	sent, ok, errors int
	warm             int             // requests of the warm-up
	elapsed          time.Duration   // from the first measured request's moment to the last answer
	cpu              time.Duration   // the process's CPU time (user+system) over the whole step
	lat              []time.Duration // sorted
	lag              time.Duration   // p99 of the generator's own lateness
	errorKinds       map[string]int
}

func (r *result) q(p float64) time.Duration { return benchutil.Quantile(r.lat, p) }

func (r *result) errorSummary() string {
	var parts []string
	for k, n := range r.errorKinds {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 3, 64) + "ms"
}

type job struct {
	due  time.Time
	body []byte
	keep bool // measured (after the warm-up)
}

// load offers rate requests per second for warmup+duration and measures
// those of the last duration.
func load(base string, o options, bodies [][]byte, rate int) *result {
	tr := &http.Transport{MaxIdleConns: o.workers, MaxIdleConnsPerHost: o.workers, DisableCompression: true, IdleConnTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	url := base + "/v1/resolve"
	jobs := make(chan job, rate) // a second of backlog before the generator itself blocks
	type stats struct {
		lat, lag   []time.Duration
		ok, errors int
		errorKinds map[string]int
	}
	all := make([]*stats, o.workers)
	var wg sync.WaitGroup
	for w := range all {
		s := &stats{errorKinds: map[string]int{}}
		all[w] = s
		wg.Go(func() {
			for j := range jobs {
				sent := time.Now()
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(j.body))
				req.Header.Set("Content-Type", "application/json")
				if o.token != "" {
					req.Header.Set("Authorization", "Bearer "+o.token)
				}
				resp, err := client.Do(req)
				kind := ""
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						kind = "status " + strconv.Itoa(resp.StatusCode)
					}
				} else {
					kind = "transport: " + errKind(err)
				}
				done := time.Now()
				if !j.keep {
					continue
				}
				s.lag = append(s.lag, sent.Sub(j.due))
				if kind != "" {
					s.errors++
					s.errorKinds[kind]++
					continue
				}
				s.ok++
				s.lat = append(s.lat, done.Sub(sent))
			}
		})
	}
	interval := time.Second / time.Duration(rate)
	cpu0 := benchutil.CPUTime()
	start := time.Now()
	measureFrom := start.Add(o.warmup)
	end := measureFrom.Add(o.duration)
	sent, warm := 0, 0
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if !due.Before(end) {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d) // sleeps are coarse: requests due meanwhile go out at once
		}
		keep := !due.Before(measureFrom)
		if keep {
			sent++
		} else {
			warm++
		}
		jobs <- job{due: due, body: bodies[i%len(bodies)], keep: keep}
	}
	close(jobs)
	wg.Wait()
	r := &result{sent: sent, warm: warm, elapsed: time.Since(measureFrom), cpu: benchutil.CPUTime() - cpu0, errorKinds: map[string]int{}}
	var lags []time.Duration
	for _, s := range all {
		r.ok += s.ok
		r.errors += s.errors
		r.lat = append(r.lat, s.lat...)
		lags = append(lags, s.lag...)
		for k, n := range s.errorKinds {
			r.errorKinds[k] += n
		}
	}
	slices.Sort(r.lat)
	slices.Sort(lags)
	r.lag = benchutil.Quantile(lags, 0.99)
	return r
}

func errKind(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, io.EOF), strings.Contains(err.Error(), "connection reset"):
		return "connection closed"
	}
	return "other"
}
