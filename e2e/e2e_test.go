package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/htb"
	"github.com/toolaudit/toolaudit/internal/testkit/bins"
	"github.com/toolaudit/toolaudit/internal/testkit/leakcheck"
	"github.com/toolaudit/toolaudit/internal/testkit/lockedbuf"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/schema"
)

var resolverd string // the binary under test

func TestMain(m *testing.M) {
	gatewaytest.ServeFixtureIfChild() // the gateway's tests run this binary as an MCP server
	var err error
	if resolverd, err = bins.Build("resolverd", bins.Dev); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	leakcheck.Main(m, leakcheck.Run(chenginetest.Main))
}

// corpus is the input of every test: the shared sample (every class) and a
// simulated fleet (htb's single and mcp tracks), with the class
// `resolverd check` gives each call.
type corpus struct {
	listings, calls [][]byte
	want            map[string]string // event_id -> class
}

var (
	corpusOnce sync.Once
	theCorpus  corpus
)

func load(t *testing.T) corpus {
	t.Helper()
	corpusOnce.Do(func() {
		var c corpus
		read := func(p string) [][]byte {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			return bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		}
		c.listings = read("../testdata/corpus/sample/listings.jsonl")
		c.calls = read("../testdata/corpus/sample/calls.jsonl")
		tracks, err := htb.Build(htb.Config{Seed: 3, Tracks: []string{htb.TrackSingle, htb.TrackMCP}, Trials: 150, Honest: 150})
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range tracks {
			c.listings = append(c.listings, tr.Listings...)
			for _, x := range tr.Trials {
				c.calls = append(c.calls, x.Line)
			}
		}
		store := registry.New()
		if _, err := check.LoadListings(bytes.NewReader(bytes.Join(c.listings, []byte("\n"))), store, nil); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if _, err := check.Check(context.Background(), check.Config{}, store.Snapshot(), bytes.NewReader(bytes.Join(c.calls, []byte("\n"))), &out); err != nil {
			t.Fatal(err)
		}
		c.want = map[string]string{}
		sc := bufio.NewScanner(&out)
		for sc.Scan() {
			id, class := field(sc.Text(), "event_id"), field(sc.Text(), "class")
			c.want[id] = class
		}
		theCorpus = c
	})
	if theCorpus.want == nil {
		t.Fatal("corpus not loaded")
	}
	return theCorpus
}

// field extracts a string member from a decision line (our own encoder's
// output, so a plain search is exact).
func field(line, name string) string {
	i := strings.Index(line, `"`+name+`":"`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+4:]
	return rest[:strings.IndexByte(rest, '"')]
}

// engine is the ClickHouse engine a test runs against: a chengine.Server,
// a chengine.Supervisor, or the engine of a `resolverd stack` (stackEngine).
type engine interface{ Addr() string }

type env struct {
	t        *testing.T
	brokers  []string
	ch       engine
	db       string
	conn     driver.Conn
	producer *kgo.Client
}

// newEnv gives a test an in-process broker with the topics resolverd
// reads, in front of the engine ch.
func newEnv(t *testing.T, ch engine, partitions int32) *env {
	t.Helper()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "tool-calls"),
		kfake.SeedTopics(3, "tool-listings"), kfake.SeedTopics(1, "tool-calls-dlq"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return envOn(t, k.ListenAddrs(), ch)
}

// envOn gives a test a database of its own on ch, and a producer to the
// brokers.
func envOn(t *testing.T, brokers []string, ch engine) *env {
	t.Helper()
	e := &env{t: t, brokers: brokers, ch: ch, db: "e2e_" + strings.ToLower(strings.NewReplacer("/", "_", "-", "_").Replace(t.Name()))}
	var err error
	e.producer, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.producer.Close)
	return e
}

func (e *env) connect() driver.Conn {
	e.t.Helper()
	if e.conn == nil {
		c, err := clickhouse.Open(&clickhouse.Options{Addr: []string{e.ch.Addr()}})
		if err != nil {
			e.t.Fatal(err)
		}
		e.conn = c
		e.t.Cleanup(func() { c.Close() })
	}
	return e.conn
}

// produce sends records to a topic, keyed as the contract says (schema's
// keys), paced over `over`.
func (e *env) produce(topic string, lines [][]byte, over time.Duration) {
	e.t.Helper()
	if err := e.tryProduce(topic, lines, over); err != nil {
		e.t.Fatal(err)
	}
}

// produceAsync produces as produce does, from a goroutine of its own:
// a failure fails the test without stopping the goroutine that runs it.
func (e *env) produceAsync(topic string, lines [][]byte, over time.Duration) {
	go func() {
		if err := e.tryProduce(topic, lines, over); err != nil {
			e.t.Error(err)
		}
	}()
}

func (e *env) tryProduce(topic string, lines [][]byte, over time.Duration) error {
	ctx := context.Background()
	chunk := max(1, len(lines)/20)
	for i := 0; i < len(lines); i += chunk {
		var rs []*kgo.Record
		for _, l := range lines[i:min(i+chunk, len(lines))] {
			key := schema.CallKey(field(string(l), "session_id"), field(string(l), "agent_id"))
			if topic == "tool-listings" {
				key = schema.ListingKey(field(string(l), "registry"), field(string(l), "server"))
			}
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(key), Value: l})
		}
		if err := e.producer.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("produce to %s: %w", topic, err)
		}
		if over > 0 {
			time.Sleep(over / 20)
		}
	}
	return nil
}

type daemon struct {
	cmd *exec.Cmd
	log *lockedbuf.Buffer
}

// waitLog waits until the daemon's log holds substr.
func (d *daemon) waitLog(t *testing.T, substr string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := strings.Contains(d.log.String(), substr)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the resolverd log after %v", substr, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// start runs resolverd against the environment.
func (e *env) start(extra ...string) *daemon {
	e.t.Helper()
	args := append([]string{"run", "--brokers", strings.Join(e.brokers, ","), "--clickhouse", e.ch.Addr(),
		"--database", e.db, "--http", "", "--listing-hold", "300ms", "--batch-wait", "50ms", "--batch-rows", "500",
		"--session-timeout", "6s", "--rebalance-timeout", "12s"}, extra...)
	return e.spawn(args...)
}

// spawn starts the resolverd binary with args; the test's cleanup stops
// it if it still runs and, when the test failed, logs its log's tail.
// The cleanup interrupts it first and kills it only after 10 s: a killed
// client's connection reset can abort the embedded engine (package
// chengine), which most tests share.
func (e *env) spawn(args ...string) *daemon {
	e.t.Helper()
	cmd := exec.Command(resolverd, args...)
	sw := &lockedbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = sw, sw
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Signal(os.Interrupt)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		if e.t.Failed() {
			e.t.Logf("resolverd %s log:\n%s", args[0], tail(sw.String(), 40))
		}
	})
	return &daemon{cmd: cmd, log: sw}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// exited reports whether resolverd has ended: it logs "resolverd stopped"
// when it stops, and prints "resolverd: <error>" when it fails.
// (cmd.ProcessState stays nil until someone waits for the process.)
func (d *daemon) exited() bool {
	log := d.log.String()
	return strings.Contains(log, `msg="resolverd stopped"`) || strings.Contains(log, "\nresolverd: ")
}

func (d *daemon) kill() {
	d.cmd.Process.Kill()
	d.cmd.Wait()
}

func (d *daemon) stop(t *testing.T) {
	d.cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- d.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("resolverd exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		d.cmd.Process.Kill()
		t.Fatal("resolverd did not stop on SIGINT within 30 s")
	}
}

// waitDecided waits until the table holds n distinct calls, FINAL.
func (e *env) waitDecided(n int, within time.Duration) {
	e.t.Helper()
	deadline := time.Now().Add(within)
	var got uint64
	var err error
	for time.Now().Before(deadline) {
		err = e.connect().QueryRow(context.Background(), fmt.Sprintf("SELECT count() FROM %s.decisions FINAL", e.db)).Scan(&got)
		if err == nil && int(got) >= n {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	if srv, ok := e.ch.(*chengine.Server); ok { // an unsupervised engine may be the cause
		died := make(chan error, 1)
		go func() { died <- srv.Wait() }()
		select {
		case werr := <-died:
			e.t.Fatalf("%d of %d calls decided after %s: ClickHouse engine exited: %v", got, n, within, werr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	e.t.Fatalf("%d of %d calls decided after %s (last query error: %v)", got, n, within, err)
}

// check asserts exactly one decision per call, with the class `check`
// gives it.
func (e *env) check(c corpus) {
	e.t.Helper()
	ctx := context.Background()
	var final, distinct uint64
	if err := e.connect().QueryRow(ctx, fmt.Sprintf("SELECT count(), uniqExact(call_key) FROM %s.decisions FINAL", e.db)).Scan(&final, &distinct); err != nil {
		e.t.Fatal(err)
	}
	if int(final) != len(c.calls) || final != distinct {
		e.t.Fatalf("FINAL holds %d rows for %d distinct calls, want exactly %d", final, distinct, len(c.calls))
	}
	rows, err := e.connect().Query(ctx, fmt.Sprintf("SELECT event_id, class FROM %s.decisions FINAL", e.db))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	bad := 0
	for rows.Next() {
		var id, class string
		if err := rows.Scan(&id, &class); err != nil {
			e.t.Fatal(err)
		}
		if c.want[id] != class {
			bad++
			if bad < 5 {
				e.t.Errorf("%s: class %s, resolverd check says %s", id, class, c.want[id])
			}
		}
	}
	if bad > 0 {
		e.t.Fatalf("%d decisions differ from resolverd check", bad)
	}
}

// TestNInNOut: every call decided once, as `resolverd check` decides it;
// listings produced first.
func TestNInNOut(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 6)
	e.produce("tool-listings", c.listings, 0)
	e.produce("tool-calls", c.calls, 0)
	d := e.start()
	e.waitDecided(len(c.calls), 60*time.Second)
	d.stop(t)
	e.check(c)
}

// TestLateListing: the listings reach Kafka after the calls they govern
// (within the listing hold): decisions are still those of check.
func TestLateListing(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 6)
	d := e.start("--listing-hold", "2s")
	d.waitLog(t, "listings caught up", 30*time.Second) // on an empty listings topic
	d.waitLog(t, "partitions assigned", 30*time.Second)
	e.produce("tool-calls", c.calls, 0)
	time.Sleep(300 * time.Millisecond)
	e.produce("tool-listings", c.listings, 0)
	e.waitDecided(len(c.calls), 60*time.Second)
	d.stop(t)
	e.check(c)
}

// TestKill9: resolverd killed with SIGKILL three times mid-stream and
// restarted: exactly one decision per call.
func TestKill9(t *testing.T) {
	t.Parallel() // its own broker and engine; mostly waiting on kills and outages
	c := load(t)
	e := newEnv(t, chenginetest.Supervise(t, chengine.Options{}), 6)
	e.produce("tool-listings", c.listings, 0)
	done := make(chan struct{})
	go func() { defer close(done); e.produce("tool-calls", c.calls, 6*time.Second) }()
	for _, after := range []time.Duration{2500 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		d := e.start()
		// Killed only once it owns partitions, and then mid-stream. A
		// member killed while its JoinGroup waits on the rebalance stays
		// in a kfake group for good (kfake starts a member's session timer
		// only when its JoinGroup response is delivered, and the leader's
		// SyncGroup clears the pending-sync timeout), and the partitions
		// assigned to it are never consumed; Kafka expires such members.
		d.waitLog(t, "partitions assigned", 30*time.Second)
		time.Sleep(after)
		d.kill()
	}
	<-done
	d := e.start()
	d.waitLog(t, "partitions assigned", 30*time.Second)
	e.waitDecided(len(c.calls), 60*time.Second)
	d.stop(t)
	e.check(c)
}

// TestThreeInstancesOneKilled: three resolverd in one group share six
// partitions; one is killed mid-stream; the others take its partitions.
func TestThreeInstancesOneKilled(t *testing.T) {
	t.Parallel() // its own broker and engine; mostly waiting on kills and outages
	c := load(t)
	e := newEnv(t, chenginetest.Supervise(t, chengine.Options{}), 6)
	e.produce("tool-listings", c.listings, 0)
	ds := []*daemon{e.start(), e.start(), e.start()}
	e.produceAsync("tool-calls", c.calls, 3*time.Second)
	ds[1].waitLog(t, "partitions assigned", 30*time.Second) // see TestKill9
	time.Sleep(1500 * time.Millisecond)
	ds[1].kill()
	e.waitDecided(len(c.calls), 90*time.Second)
	ds[0].stop(t)
	ds[2].stop(t)
	e.check(c)
}

// TestPoison: undecodable records interleaved with calls become MALFORMED
// decisions and DLQ records; every other call is decided.
func TestPoison(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	e := newEnv(t, chenginetest.Server(t), 6)
	e.produce("tool-listings", c.listings, 0)
	poison := [][]byte{[]byte(`{not json`), []byte(`{"type":"listing","event_id":"p-2","observed_at":"2026-01-01T00:00:00Z"}`),
		[]byte(`{"event_id":"p-3","emitted_at":"2026-01-01T00:00:00Z","registry":"r","arguments":{}}`), {0xff, 0xfe}, []byte(`[]`)}
	var mixed [][]byte
	for i, l := range c.calls {
		mixed = append(mixed, l)
		if i%500 == 0 {
			mixed = append(mixed, poison[(i/500)%len(poison)])
		}
	}
	nPoison := len(mixed) - len(c.calls)
	e.produce("tool-calls", mixed, 0)
	d := e.start()
	e.waitDecided(len(mixed), 60*time.Second)
	d.stop(t)
	var malformedExtra uint64
	ctx := context.Background()
	if err := e.connect().QueryRow(ctx, fmt.Sprintf("SELECT count() FROM %s.decisions FINAL WHERE class = 'MALFORMED' AND (event_id = '' OR event_id LIKE 'p-%%')", e.db)).Scan(&malformedExtra); err != nil {
		t.Fatal(err)
	}
	if int(malformedExtra) != nPoison {
		t.Fatalf("%d poison MALFORMED decisions, want %d", malformedExtra, nPoison)
	}
	// The DLQ holds the poison records and the corpus's own MALFORMED calls.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics("tool-calls-dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	wantDLQ := nPoison
	for _, class := range c.want {
		if class == "MALFORMED" {
			wantDLQ++
		}
	}
	var dlq []*kgo.Record
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for len(dlq) < wantDLQ {
		fs := cl.PollFetches(pctx)
		if pctx.Err() != nil {
			break
		}
		dlq = append(dlq, fs.Records()...)
	}
	if len(dlq) != wantDLQ {
		t.Fatalf("%d DLQ records, want %d", len(dlq), wantDLQ)
	}
	for _, r := range dlq {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if h["error"] == "" || h["source-topic"] != "tool-calls" || h["source-offset"] == "" {
			t.Fatalf("DLQ record headers %v", h)
		}
	}
}

// TestClickHouseDown: ClickHouse stopped for 20 s mid-stream, then
// restarted on the same data: no crash, no loss, no duplicate.
func TestClickHouseDown(t *testing.T) {
	t.Parallel() // its own broker and engine; mostly waiting on kills and outages
	if testing.Short() {
		t.Skip("20 s outage")
	}
	c := load(t)
	dir := t.TempDir()
	ch := chenginetest.Start(t, chengine.Options{Dir: dir})
	e := newEnv(t, ch, 6)
	e.produce("tool-listings", c.listings, 0)
	d := e.start()
	// The outage begins mid-stream, not while resolverd migrates the
	// schema at start (an error there ends it, as it should).
	d.waitLog(t, "partitions assigned", 30*time.Second)
	e.produceAsync("tool-calls", c.calls, 4*time.Second)
	time.Sleep(1500 * time.Millisecond)
	tcp, http := portOf(ch.Addr()), portOf(ch.HTTPAddr())
	if err := ch.Stop(); err != nil {
		t.Fatal(err)
	}
	e.conn = nil
	time.Sleep(20 * time.Second)
	if d.exited() {
		t.Fatal("resolverd exited while ClickHouse was down")
	}
	e.ch = chenginetest.Start(t, chengine.Options{Dir: dir, TCPPort: tcp, HTTPPort: http})
	e.waitDecided(len(c.calls), 90*time.Second)
	d.stop(t)
	e.check(c)
}

func portOf(addr string) int {
	var p int
	fmt.Sscanf(addr[strings.LastIndexByte(addr, ':')+1:], "%d", &p)
	return p
}

// TestMigrateAndReport: `resolverd migrate` is idempotent, and `report`
// reads the decisions back.
func TestMigrateAndReport(t *testing.T) {
	t.Parallel() // its own broker and database
	c := load(t)
	ch := chenginetest.Server(t)
	db := "e2e_migrate"
	migrate := func() string {
		out, err := exec.Command(resolverd, "migrate", "--clickhouse", ch.Addr(), "--database", db).CombinedOutput()
		if err != nil {
			t.Fatalf("migrate: %v\n%s", err, out)
		}
		return string(out)
	}
	files, err := fs.Glob(schema.Migrations, "ddl/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if out := migrate(); !strings.Contains(out, fmt.Sprintf("applied %d migration(s)", len(files))) {
		t.Fatalf("first migrate:\n%s", out)
	}
	if out := migrate(); !strings.Contains(out, "applied 0 migration(s)") {
		t.Fatalf("second migrate:\n%s", out)
	}
	e := newEnv(t, ch, 3)
	e.db = db
	e.produce("tool-listings", c.listings, 0)
	e.produce("tool-calls", c.calls, 0)
	d := e.start("--migrate=false")
	out, err := exec.Command(resolverd, "report", "--clickhouse", ch.Addr(), "--database", db, "--expect", fmt.Sprint(len(c.calls)), "--timeout", "60s").CombinedOutput()
	if err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	d.stop(t)
	if !strings.Contains(string(out), fmt.Sprintf("total  %d", len(c.calls))) && !strings.Contains(strings.Join(strings.Fields(string(out)), " "), fmt.Sprintf("total %d", len(c.calls))) {
		t.Fatalf("report:\n%s", out)
	}
}
