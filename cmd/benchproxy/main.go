// Command benchproxy measures the latency the model API proxy
// (resolverd proxy, package modelproxy) adds to a model API response: the
// same HTTP client sends the same Chat Completions request to a local
// upstream directly and through the proxy, under an open-loop
// (constant-rate) load, and the latency quantiles of both are printed
// with their differences: non-streaming (the whole answer) and streaming
// (first byte and last byte of the event stream).
//
// Everything runs in this process, on loopback: the upstream answers at
// once with a recorded response shape carrying 3 tool calls (2 resolve,
// 1 is H1: modelproxy's testdata, openai/parallel.json and .sse); the
// proxy is the real one (decision of every call, audit to an embedded
// Kafka-protocol broker, kfake, acknowledged with acks=all before the
// answer, policy block). Direct and proxied rounds alternate, -rounds
// times per rate.
//
//	go run ./cmd/benchproxy -rates 1000 -duration 5s -warmup 1s -rounds 3
//
// Requests are sent at fixed times whether or not earlier ones were
// answered (no coordinated omission). "added" is the proxy's quantile
// minus the direct one, per round, and the median over rounds is
// printed. "CPU/req" is the process's CPU per answered request (client,
// proxy, upstream and broker together); the proxied row minus the direct
// one is what the proxy costs, per request and per tool call (3 per
// request).
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/benchutil"
	"github.com/toolaudit/toolaudit/modelproxy"
	"github.com/toolaudit/toolaudit/resolve/suggest"
)

const request = `{"model":"gpt-5.1","messages":[{"role":"user","content":"Weather in Paris?"}],` +
	`"tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false}}},` +
	`{"type":"function","function":{"name":"search_docs","description":"Search the docs","parameters":{"type":"object","properties":{"query":{"type":"string"},"limit":{"type":"integer"}},"required":["query","limit"],"additionalProperties":false},"strict":true}}]%s}`

// callsPerResponse are the tool calls of the recorded response.
const callsPerResponse = 3

func main() {
	rates := flag.String("rates", "1000", "offered requests per second, comma-separated")
	duration := flag.Duration("duration", 5*time.Second, "measured time per round")
	warmup := flag.Duration("warmup", time.Second, "unmeasured time before each round")
	rounds := flag.Int("rounds", 3, "rounds per rate and target")
	audit := flag.Bool("audit", true, "audit every decision to an embedded broker (kfake), acknowledged before the answer")
	data := flag.String("testdata", "modelproxy/testdata/openai", "directory of parallel.json and parallel.sse")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the whole run to `FILE`")
	modes := flag.String("modes", "json,sse", "response modes to measure, comma-separated: json, sse")
	proxyFlags := flag.String("proxy-flags", "", "more flags of -resolverd's proxy command, space-separated (e.g. \"--gc-percent 100\")")
	peer := flag.Bool("peer", true, "with -resolverd, measure the peer too: this binary in its own process forwarding each request and producing its tool calls' audit records, acknowledged, before the answer, and nothing else (the floor under any auditing proxy here)")
	servePeer := flag.String("serve-peer", "", "serve as the peer on `ADDR` (started so by the bench itself)")
	peerUpstream := flag.String("peer-upstream", "", "with -serve-peer, the upstream's `URL`")
	peerBrokers := flag.String("peer-brokers", "", "with -serve-peer, the audit's brokers, comma-separated (none: no audit)")
	resolverd := flag.String("resolverd", "", "run the proxy as `BINARY` proxy, in its own process, as it is deployed (its CPU read from /proc); empty: in this process")
	flag.Parse()
	if *servePeer != "" {
		if err := serveAsPeer(*servePeer, *peerUpstream, *peerBrokers); err != nil {
			fmt.Fprintln(os.Stderr, "benchproxy -serve-peer:", err)
			os.Exit(1)
		}
		return
	}
	if *profile != "" {
		stop, err := benchutil.CPUProfile(*profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchproxy:", err)
			os.Exit(1)
		}
		defer stop()
	}
	if err := run(*rates, *modes, *resolverd, strings.Fields(*proxyFlags), *peer, *duration, *warmup, *rounds, *audit, *data); err != nil {
		fmt.Fprintln(os.Stderr, "benchproxy:", err)
		os.Exit(1)
	}
	if *memprofile != "" {
		if err := writeHeapProfile(*memprofile); err != nil {
			fmt.Fprintln(os.Stderr, "benchproxy:", err)
			os.Exit(1)
		}
	}
}

// writeHeapProfile writes the allocations of the whole run (pprof's
// alloc_space and alloc_objects samples) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func run(rates, modes, resolverd string, proxyFlags []string, peer bool, duration, warmup time.Duration, rounds int, withAudit bool, data string) error {
	rs, err := benchutil.Ints(rates)
	if err != nil {
		return err
	}
	var streams []bool
	for _, m := range strings.Split(modes, ",") {
		switch strings.TrimSpace(m) {
		case "json":
			streams = append(streams, false)
		case "sse":
			streams = append(streams, true)
		default:
			return fmt.Errorf("-modes: %q is neither json nor sse", m)
		}
	}
	body, err := os.ReadFile(filepath.Join(data, "parallel.json"))
	if err != nil {
		return err
	}
	sse, err := os.ReadFile(filepath.Join(data, "parallel.sse"))
	if err != nil {
		return err
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Query().Has("stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write(sse)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	defer up.Close()
	routes := `routes: [{prefix: /openai, api: openai, upstream: "` + up.URL + `", registry: fleet, policy: block}]`
	targets := []target{{"direct", up.URL + "/v1/chat/completions"}}
	var subs []*subprocess
	defer func() {
		for _, s := range subs {
			s.stop()
		}
	}()
	// otherCPU is the CPU of the servers in processes of their own; an
	// idle one adds next to nothing to the rounds of the others.
	otherCPU := func() time.Duration {
		var d time.Duration
		for _, s := range subs {
			d += s.cpu()
		}
		return d
	}
	if resolverd != "" {
		var brokers []string
		if withAudit {
			addrs, stop, err := benchutil.Kfake()
			if err != nil {
				return err
			}
			defer stop()
			brokers = addrs
		}
		if peer {
			sub, err := startPeer(up.URL, brokers)
			if err != nil {
				return err
			}
			subs = append(subs, sub)
			targets = append(targets, target{"peer", sub.url + "/openai/v1/chat/completions"})
		}
		sub, err := startResolverd(resolverd, proxyFlags, routes, brokers)
		if err != nil {
			return err
		}
		subs = append(subs, sub)
		targets = append(targets, target{"proxy", sub.url + "/openai/v1/chat/completions"})
	} else {
		opts := modelproxy.Options{Hints: suggest.New(), ResolverBuild: "bench"}
		if withAudit {
			p, stop, err := benchutil.KfakeAudit()
			if err != nil {
				return err
			}
			defer stop()
			opts.Audit = p
		}
		cfg, err := modelproxy.ParseConfig([]byte(routes))
		if err != nil {
			return err
		}
		opts.Config = cfg
		p, err := modelproxy.New(opts)
		if err != nil {
			return err
		}
		proxy := httptest.NewServer(p)
		defer proxy.Close()
		targets = append(targets, target{"proxy", proxy.URL + "/openai/v1/chat/completions"})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, DialContext: (&net.Dialer{}).DialContext}}
	where := "in this process"
	if resolverd != "" {
		where = "in its own process (" + strings.Join(append([]string{resolverd, "proxy"}, proxyFlags...), " ") + ")"
		if peer {
			where += "; the peer (forward, audit acknowledged, answer: no parsing, no decisions) in its own process"
		}
	}
	fmt.Printf("GOMAXPROCS %d; %d tool calls per response (2 OK, 1 H1), policy block, audit %v; the proxy %s\n", runtime.GOMAXPROCS(0), callsPerResponse, withAudit, where)
	fmt.Println("rate\tmode\ttarget\tround\tachieved/s\terrors\tp50\tp99\tfirst-byte p50\tfirst-byte p99\tCPU/req")
	for _, rate := range rs {
		for _, stream := range streams {
			mode := map[bool]string{false: "json", true: "sse"}[stream]
			res := map[string][]result{}
			for round := range rounds {
				for _, tg := range targets {
					r := load(client, tg.url, stream, rate, warmup, duration, otherCPU)
					res[tg.name] = append(res[tg.name], r)
					fmt.Printf("%d\t%s\t%s\t%d\t%.0f\t%d\t%v\t%v\t%v\t%v\t%v\n", rate, mode, tg.name, round+1, r.achieved, r.errors,
						r.p50, r.p99, r.fb50, r.fb99, r.cpu)
				}
			}
			added := func(over string, f func(result) time.Duration) time.Duration {
				var ds []time.Duration
				for i := range rounds {
					ds = append(ds, f(res[over][i])-f(res["direct"][i]))
				}
				slices.Sort(ds)
				return ds[len(ds)/2]
			}
			for _, tg := range targets[1:] {
				a := func(f func(result) time.Duration) time.Duration { return added(tg.name, f) }
				fmt.Printf("== %d/s %s, %s: added p50 %v, p99 %v; first byte p50 %v, p99 %v; CPU per request %v, per tool call %v (medians of %d rounds)\n",
					rate, mode, tg.name, a(func(r result) time.Duration { return r.p50 }), a(func(r result) time.Duration { return r.p99 }),
					a(func(r result) time.Duration { return r.fb50 }), a(func(r result) time.Duration { return r.fb99 }),
					a(func(r result) time.Duration { return r.cpu }), a(func(r result) time.Duration { return r.cpu })/callsPerResponse, rounds)
			}
		}
	}
	return nil
}

type result struct {
	achieved             float64
	errors               int64
	p50, p99, fb50, fb99 time.Duration
	cpu                  time.Duration // process CPU per answered request
}

// load sends rate requests per second to url for warmup+duration and
// measures those sent after warmup: latency to the last byte, and to the
// first byte of the body.
func load(client *http.Client, url string, stream bool, rate int, warmup, duration time.Duration, otherCPU func() time.Duration) result {
	extra := ""
	if stream {
		url += "?stream=1"
		extra = `,"stream":true`
	}
	body := []byte(fmt.Sprintf(request, extra))
	var mu sync.Mutex
	var lat, fb []time.Duration
	var errs, done atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	measureFrom := start.Add(warmup)
	end := measureFrom.Add(duration)
	interval := time.Second / time.Duration(rate)
	cpu0 := benchutil.CPUTime() + otherCPU()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if !at.Before(end) {
			break
		}
		time.Sleep(time.Until(at))
		wg.Add(1)
		go func(at time.Time) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer sk-bench")
			resp, err := client.Do(req)
			if err != nil {
				errs.Add(1)
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			_, err = br.Peek(1)
			first := time.Since(at)
			if err == nil {
				_, err = io.Copy(io.Discard, br)
			}
			last := time.Since(at)
			if err != nil || resp.StatusCode != 200 {
				errs.Add(1)
				return
			}
			done.Add(1)
			if at.Before(measureFrom) {
				return
			}
			mu.Lock()
			lat, fb = append(lat, last), append(fb, first)
			mu.Unlock()
		}(at)
	}
	wg.Wait()
	cpu := benchutil.CPUTime() + otherCPU() - cpu0
	slices.Sort(lat)
	slices.Sort(fb)
	r := result{achieved: float64(len(lat)) / duration.Seconds(), errors: errs.Load(),
		p50: benchutil.Quantile(lat, 0.5), p99: benchutil.Quantile(lat, 0.99),
		fb50: benchutil.Quantile(fb, 0.5), fb99: benchutil.Quantile(fb, 0.99)}
	if n := done.Load(); n > 0 {
		r.cpu = cpu / time.Duration(n)
	}
	return r
}

// target is what a round loads: the upstream itself, the peer or the
// proxy.
type target struct{ name, url string }

// subprocess is a server running beside the bench: resolverd proxy, or
// the peer.
type subprocess struct {
	url  string
	cpu  func() time.Duration
	stop func()
}

// startResolverd starts bin proxy with routes, auditing to brokers (none:
// no audit), and waits until it answers.
func startResolverd(bin string, flags []string, routes string, brokers []string) (*subprocess, error) {
	dir, err := os.MkdirTemp("", "benchproxy")
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "proxy.yaml")
	if err := os.WriteFile(cfg, []byte(routes+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	sub, err := startServer(bin, func(addr string) []string {
		return append([]string{"proxy", "--config", cfg, "--listen", addr, "--log-level", "warn", "--brokers", strings.Join(brokers, ",")}, flags...)
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("-resolverd: %w", err)
	}
	stop := sub.stop
	sub.stop = func() { stop(); os.RemoveAll(dir) }
	return sub, nil
}

// startPeer starts this binary as the peer (servePeer) in front of
// upstream, auditing to brokers (none: no audit).
func startPeer(upstream string, brokers []string) (*subprocess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	sub, err := startServer(self, func(addr string) []string {
		return []string{"-serve-peer", addr, "-peer-upstream", upstream, "-peer-brokers", strings.Join(brokers, ",")}
	})
	if err != nil {
		return nil, fmt.Errorf("the peer: %w", err)
	}
	return sub, nil
}

// startServer starts bin with the arguments args gives for a free
// loopback address and waits until it answers /healthz there.
func startServer(bin string, args func(addr string) []string) (*subprocess, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, args(addr)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// A bench killed does not leave its servers running (Linux, as /proc).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	url := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("%s exited: %v", bin, err)
		default:
		}
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s: not answering on %s after 30s", bin, addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pid := cmd.Process.Pid
	return &subprocess{url: url, stop: stop, cpu: func() time.Duration {
		d, err := benchutil.ProcessCPU(pid)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchproxy: the CPU of", bin+":", err)
		}
		return d
	}}, nil
}
