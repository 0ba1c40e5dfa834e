// Command benchgateway measures the latency the MCP gateway adds to a
// tool call: the same Go SDK client calls the same upstream server
// directly and through the gateway, under an open-loop (constant-rate)
// load, and the latency quantiles of both are printed side by side with
// their differences.
//
// Everything runs in this process, on loopback: the upstream is the
// tests' fixture server (gateway/gatewaytest, the Go SDK's server) over
// Streamable HTTP, the gateway is the real one (decision, audit,
// forwarding) served over Streamable HTTP; with -audit every decision is
// first produced to an embedded Kafka-protocol broker (kfake) and
// acknowledged, as in production. The load generator opens -sessions
// sessions to each and spreads the calls over them; it speaks Streamable
// HTTP itself, with little work per call, since on a small machine the
// Go SDK's client would take as much CPU as the servers measured. Direct and gateway runs alternate, -rounds times
// per rate, so that the machine's noise falls on both alike.
//
//	go run ./cmd/benchgateway -rates 1000,5000 -duration 10s -rounds 3 -revisions 2025-11-25,2026-07-28
//
// -revisions names the MCP protocol revisions measured, each against
// both targets: 2025-11-25 (a session per client: initialize,
// Mcp-Session-Id) and 2026-07-28 (no session: the revision in each
// request's _meta and headers; the upstream is then reached directly
// through the SDK's stateless handler, as the gateway serves it).
//
// Calls are sent at fixed times whether or not earlier ones were answered
// (no coordinated omission); latency runs from handing a call to the
// client to its answer; "lag p99" is how late the generator was in
// sending, which says whether the rate was really offered. "added" is the
// gateway's quantile minus the direct one, per round; the summary gives
// the median of the rounds. "CPU/call" is the process's CPU time per
// answered call (client, gateway, upstream and broker together, warm-up
// included): on shared cores the figure that does not depend on the
// neighbours; the gateway's row minus the direct one is what the gateway
// costs, and its inverse times the cores bounds the rate a machine can
// serve.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolaudit/toolaudit/gateway"
	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/internal/testkit/benchutil"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchgateway:", err)
		os.Exit(1)
	}
}

type options struct {
	rates            []int
	duration, warmup time.Duration
	rounds           int
	sessions         int
	workers          int
	audit            bool
	only             string
	revisions        []string
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("benchgateway", flag.ContinueOnError)
	var o options
	rates := fs.String("rates", "1000,5000", "call `rates` per second, comma-separated")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per run")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "time at the rate before measuring")
	fs.IntVar(&o.rounds, "rounds", 3, "direct and gateway runs per rate, alternating")
	fs.IntVar(&o.sessions, "sessions", 16, "clients (sessions, under "+sessionRevision+") to each of the upstream and the gateway, per revision")
	fs.IntVar(&o.workers, "workers", 2048, "most calls in flight from the generator")
	fs.BoolVar(&o.audit, "audit", true, "audit every decision to an embedded Kafka broker before acting on it")
	fs.StringVar(&o.only, "only", "", "run only `target` (direct or gateway), to profile it")
	revisions := fs.String("revisions", sessionRevision+","+statelessRevision, "MCP protocol `revisions` measured, comma-separated: "+sessionRevision+" (sessions), "+statelessRevision+" (stateless)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the measured runs to `FILE`")
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
	for _, r := range strings.Split(*revisions, ",") {
		if r != sessionRevision && r != statelessRevision {
			return fmt.Errorf("-revisions: unknown revision %q (want %s or %s)", r, sessionRevision, statelessRevision)
		}
		o.revisions = append(o.revisions, r)
	}
	env, err := setUp(o)
	if err != nil {
		return err
	}
	defer env.close()

	audit := "off"
	if o.audit {
		audit = "on (embedded kfake broker, acknowledged before each call is acted on)"
	}
	fmt.Fprintf(out, "benchgateway %s, %s, GOMAXPROCS %d; upstream: fixture over Streamable HTTP; audit %s; %d clients each; open loop, %v per run after %v of warm-up, %d rounds\n",
		time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOMAXPROCS(0), audit, o.sessions, o.duration, o.warmup, o.rounds)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "revision\tcalls/s\tround\ttarget\tsent\terrors\tachieved/s\tp50\tp90\tp99\tp99.9\tmax\tlag p99\tCPU/call\t")
	type added struct{ p50, p99 []time.Duration }
	type key struct {
		revision string
		rate     int
	}
	sums := map[key]*added{}
	for _, rev := range o.revisions {
		tgs := env.targets[rev]
		for _, rate := range o.rates {
			sum := &added{}
			sums[key{rev, rate}] = sum
			for round := 1; round <= o.rounds; round++ {
				order := []*target{tgs.direct, tgs.gateway}
				if o.only != "" {
					order = []*target{tgs.direct}
					if o.only == "gateway" {
						order[0] = tgs.gateway
					}
				}
				if round%2 == 0 && len(order) == 2 {
					order[0], order[1] = order[1], order[0]
				}
				res := map[string]result{}
				for _, tg := range order {
					r := measure(tg, rate, o)
					res[tg.name] = r
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", rev, rate, round, tg.name, r.sent, r.errors, r.achieved,
						ms(r.q(0.5)), ms(r.q(0.9)), ms(r.q(0.99)), ms(r.q(0.999)), ms(r.q(1)), ms(r.lag), us(r.cpu))
				}
				if o.only != "" {
					continue
				}
				d, g := res["direct"], res["gateway"]
				sum.p50 = append(sum.p50, g.q(0.5)-d.q(0.5))
				sum.p99 = append(sum.p99, g.q(0.99)-d.q(0.99))
				fmt.Fprintf(tw, "%s\t%d\t%d\tadded\t\t\t\t%s\t%s\t%s\t%s\t\t\t\t\n", rev, rate, round,
					ms(g.q(0.5)-d.q(0.5)), ms(g.q(0.9)-d.q(0.9)), ms(g.q(0.99)-d.q(0.99)), ms(g.q(0.999)-d.q(0.999)))
			}
		}
	}
	tw.Flush()
	if o.only != "" {
		return nil
	}
	fmt.Fprintln(out)
	for _, rev := range o.revisions {
		for _, rate := range o.rates {
			s := sums[key{rev, rate}]
			fmt.Fprintf(out, "%s, %d calls/s: added latency, median of %d rounds: p50 %s, p99 %s (rounds p99: %s)\n",
				rev, rate, o.rounds, ms(median(s.p50)), ms(median(s.p99)), list(s.p99))
		}
	}
	return nil
}

// target is a set of client sessions to call one tool through.
type target struct {
	name     string
	tool     string
	sessions []*session
	next     atomic.Uint64
}

func (t *target) call(ctx context.Context, args json.RawMessage) error {
	return t.sessions[t.next.Add(1)%uint64(len(t.sessions))].call(ctx, t.tool, args)
}

// env is the upstream, the gateway and the clients of each revision.
type env struct {
	targets map[string]*targets
	closers []func()
}

// targets are a revision's clients of the upstream and of the gateway.
type targets struct{ direct, gateway *target }

func (e *env) close() {
	for _, c := range slices.Backward(e.closers) {
		c()
	}
}

func setUp(o options) (_ *env, err error) {
	e := &env{targets: map[string]*targets{}}
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	fx := gatewaytest.NewFixture("up")
	upURL, stop, err := serve(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fx.Server }, nil))
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, stop)
	// The upstream as a client of the stateless revision reaches it: the
	// SDK serves that revision only statelessly.
	upStatelessURL, stop, err := serve(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fx.Server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, stop)

	gopts := gateway.Options{Config: gateway.Config{
		Limits:    gateway.Limits{MaxSessions: 4 * o.sessions, MaxInFlight: o.workers},
		Upstreams: []gateway.Upstream{{Name: "up", Trust: 1, URL: upURL}},
	}}
	if o.audit {
		auditor, stop, err := benchutil.KfakeAudit()
		if err != nil {
			return nil, err
		}
		e.closers = append(e.closers, stop)
		gopts.Audit = auditor
	}
	gw, err := gateway.New(gopts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	e.closers = append(e.closers, func() { cancel(); <-done })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if ok, _ := gw.Ready(); ok {
			break
		}
		if time.Now().After(deadline) {
			return nil, errors.New("the gateway did not list its upstream within 30s")
		}
	}
	gwURL, stop, err := serve(gw.Handler())
	if err != nil {
		return nil, err
	}
	e.closers = append(e.closers, stop)

	// Enough idle connections for every call in flight: a client that
	// opened a new connection per call would measure TCP, not MCP.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConns: o.workers, MaxIdleConnsPerHost: o.workers, IdleConnTimeout: time.Minute}}
	for _, rev := range o.revisions {
		tgs := &targets{direct: &target{name: "direct", tool: "echo"}, gateway: &target{name: "gateway", tool: "up__echo"}}
		e.targets[rev] = tgs
		direct := upURL
		if rev == statelessRevision {
			direct = upStatelessURL
		}
		for _, tg := range []struct {
			t   *target
			url string
		}{{tgs.direct, direct}, {tgs.gateway, gwURL}} {
			for range o.sessions {
				s, err := dial(context.Background(), hc, tg.url, rev)
				if err != nil {
					return nil, fmt.Errorf("connect to %s (%s): %w", tg.t.name, rev, err)
				}
				tg.t.sessions = append(tg.t.sessions, s)
			}
			if err := tg.t.call(context.Background(), json.RawMessage(`{"message":"warm"}`)); err != nil {
				return nil, fmt.Errorf("first call to %s (%s): %w", tg.t.name, rev, err)
			}
		}
	}
	return e, nil
}

// serve serves h on a loopback port.
func serve(h http.Handler) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}

// result is one run's measurements.
type result struct {
	sent, errors int
	achieved     float64
	lat          []time.Duration // sorted
	lag          time.Duration   // p99
	cpu          time.Duration   // per call
}

func (r result) q(p float64) time.Duration { return benchutil.Quantile(r.lat, p) }

// measure runs one warm-up and one measured period at rate against tg.
func measure(tg *target, rate int, o options) result {
	args := json.RawMessage(`{"message":"hello"}`)
	interval := time.Second / time.Duration(rate)
	total := int((o.warmup + o.duration) / interval)
	warm := int(o.warmup / interval)
	lat := make([]time.Duration, total)
	lags := make([]time.Duration, total)
	failed := make([]bool, total)
	var inflight atomic.Int64
	var wg sync.WaitGroup
	cpu0 := benchutil.CPUTime()
	start := time.Now()
	var lastEnd atomic.Int64
	for i := 0; i < total; {
		now := time.Now()
		for ; i < total && !start.Add(time.Duration(i)*interval).After(now); i++ {
			if inflight.Load() >= int64(o.workers) {
				failed[i] = true // the generator's bound: counted as an error
				continue
			}
			inflight.Add(1)
			lags[i] = now.Sub(start.Add(time.Duration(i) * interval))
			i := i // the loop goes on
			wg.Go(func() {
				defer inflight.Add(-1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				t0 := time.Now()
				err := tg.call(ctx, args)
				end := time.Now()
				lat[i] = end.Sub(t0)
				failed[i] = err != nil
				for {
					prev := lastEnd.Load()
					if end.UnixNano() <= prev || lastEnd.CompareAndSwap(prev, end.UnixNano()) {
						break
					}
				}
			})
		}
		if i < total {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		}
	}
	wg.Wait()
	answered := 0
	for i := range total {
		if !failed[i] {
			answered++
		}
	}
	r := result{cpu: (benchutil.CPUTime() - cpu0) / time.Duration(max(answered, 1))}
	var ok, lg []time.Duration
	for i := warm; i < total; i++ {
		r.sent++
		lg = append(lg, lags[i])
		if failed[i] {
			r.errors++
			continue
		}
		ok = append(ok, lat[i])
	}
	slices.Sort(ok)
	slices.Sort(lg)
	r.lat, r.lag = ok, benchutil.Quantile(lg, 0.99)
	first := start.Add(time.Duration(warm) * interval)
	if span := time.Unix(0, lastEnd.Load()).Sub(first); span > 0 {
		r.achieved = float64(len(ok)) / span.Seconds()
	}
	return r
}
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return benchutil.Quantile(s, 0.5)
}

func list(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, ms(d))
	}
	return strings.Join(s, " ")
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3fms", float64(d)/1e6) }
func us(d time.Duration) string { return fmt.Sprintf("%.0fµs", float64(d)/1e3) }
