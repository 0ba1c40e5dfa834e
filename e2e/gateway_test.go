package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/toolaudit/toolaudit/chengine"
	"github.com/toolaudit/toolaudit/chengine/chenginetest"
	"github.com/toolaudit/toolaudit/gateway/gatewaytest"
	"github.com/toolaudit/toolaudit/schema"
)

var gatewayListening = regexp.MustCompile(`msg="gateway listening" addr=(\S+)`)

// startGateway runs `resolverd gateway` with the configuration text
// against the environment's broker and returns its MCP endpoint.
func (e *env) startGateway(config string, extra ...string) (*daemon, string) {
	e.t.Helper()
	cfg := filepath.Join(e.t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		e.t.Fatal(err)
	}
	args := append([]string{"gateway", "--config", cfg, "--brokers", strings.Join(e.brokers, ","), "--listen", "127.0.0.1:0"}, extra...)
	d := e.spawn(args...)
	d.waitLog(e.t, "gateway listening", 30*time.Second)
	m := gatewayListening.FindStringSubmatch(d.log.String())
	if m == nil {
		e.t.Fatal("no listening address in the gateway's log")
	}
	url := "http://" + m[1]
	// Ready once every upstream has been listed: a later listing would
	// send list_changed to the client in the middle of its steps.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("gateway not ready after 60s: %v", err)
		}
	}
	return d, url
}

// gatewayRows returns the rows of source gateway, FINAL, by call key.
func (e *env) gatewayRows() map[string][4]string {
	e.t.Helper()
	rows, err := e.connect().Query(context.Background(), fmt.Sprintf(
		"SELECT call_key, class, action, concat(server, '/', tool), session_id FROM %s.decisions FINAL WHERE source = 'gateway'", e.db))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][4]string{}
	for rows.Next() {
		var k string
		var r [4]string
		if err := rows.Scan(&k, &r[0], &r[1], &r[2], &r[3]); err != nil {
			e.t.Fatal(err)
		}
		if _, dup := out[k]; dup {
			e.t.Fatalf("%s: two gateway rows under FINAL", k)
		}
		out[k] = r
	}
	return out
}

// TestGatewayPipeline: the real binaries side by side. resolverd gateway
// merges the three reference servers (npm) and the Go fixture; the official
// TypeScript SDK's client calls through it, then the Go SDK's client of
// the 2026-07-28 revision (no session); resolverd run stores the
// audit trail. Every upstream's listing reaches the listings topic, and
// every call's decision reaches ClickHouse once, with source gateway,
// action enforced and the class the client was answered, even when
// resolverd run is killed with SIGKILL and restarted.
//
// On an engine of its own, supervised, as every test that kills a client
// of the engine: the kill resets the client's idle connection, which can
// abort the embedded engine (package chengine, "Why the engine aborts when
// a client is killed"); on the package's shared engine it once took every
// test after it down.
func TestGatewayPipeline(t *testing.T) {
	t.Parallel() // its own broker and database
	npm := gatewaytest.FindNPM(t)
	e := newEnv(t, chenginetest.Supervise(t, chengine.Options{}), 3)
	e.createTopics(3, "tool-audit")
	run := e.start()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	note := filepath.Join(dir, "note.txt")
	q := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	_, url := e.startGateway(fmt.Sprintf(`registry: e2e-gateway
upstreams:
  - {name: everything, trust: 1, command: %s}
  - {name: memory, trust: 1, command: %s, env: {MEMORY_FILE_PATH: %q}}
  - {name: fs, trust: 2, command: %s}
  - {name: fx, trust: 2, command: [%q], env: {%s: fx}}
`, q(npm.Everything()), q(npm.Memory()), filepath.Join(dir, "memory.jsonl"), q(npm.Filesystem(dir)), exe, gatewaytest.FixtureEnv))

	steps := []struct {
		step  gatewaytest.Step
		class string
	}{
		{gatewaytest.Step{Op: "list"}, ""},
		{gatewaytest.Call("everything__echo", `{"message":"through the pipeline"}`), "OK"},
		{gatewaytest.Call("everything__get-sum", `{"a":20,"b":22}`), "OK"},
		{gatewaytest.Call("memory__create_entities", `{"entities":[{"name":"e2e","entityType":"test","observations":["stored"]}]}`), "OK"},
		{gatewaytest.Call("fs__write_file", `{"path":`+q(note)+`,"content":"written through the gateway"}`), "OK"},
		{gatewaytest.Call("fs__read_text_file", `{"path":`+q(note)+`}`), "OK"},
		{gatewaytest.Call("fs__read_text_file", `{"path":`+q(note)+`,"tail":"3"}`), "H3"},
		{gatewaytest.Call("fx__add", `{"a":1,"b":2}`), "OK"},
		{gatewaytest.Call("everything__delete_everything", `{}`), "M1"},
		{gatewaytest.Call("everything__echo", `{"message":"x","sudo":true}`), "H2"},
		{gatewaytest.Call("everything__get-sum", `{"a":"1","b":2}`), "H3"},
		{gatewaytest.Call("echo", `{"message":"x"}`), "M3"}, // fx (trust 2) and everything (trust 1) both have echo
		{gatewaytest.Call("fx__change_schema", `{}`), "OK"},
		{gatewaytest.Step{Op: "wait_changed", TimeoutMS: 10000}, ""},
		{gatewaytest.Call("fx__transfer", `{"to":"bob","amount":1}`), "M4"},
	}
	var ss []gatewaytest.Step
	for _, s := range steps {
		ss = append(ss, s.step)
	}
	outs := npm.RunClient(t, url+"/mcp", "", ss...)
	classes := map[string]int{}
	rejected := map[string]string{} // event id -> class answered
	for i, s := range steps {
		o := outs[i]
		switch {
		case s.class == "":
		case s.class == "OK":
			if !o.OK || o.IsError {
				t.Fatalf("%s: %s", s.step.Name, o.Message)
			}
			classes["OK"]++
		default:
			// A name is a JSON-RPC error, arguments and a stale
			// definition a result with isError; both carry the decision.
			var a struct{ EventID, Class string }
			data, wantErr := o.Data, s.class == "M1" || s.class == "M3"
			if !wantErr {
				data = o.Meta["io.toolaudit/decision"]
			}
			json.Unmarshal(data, &struct {
				EventID *string `json:"event_id"`
				Class   *string `json:"class"`
			}{&a.EventID, &a.Class})
			if (wantErr && (o.OK || o.Code != -32602)) || (!wantErr && (!o.OK || !o.IsError)) || a.Class != s.class || a.EventID == "" {
				t.Fatalf("%s: ok %v isError %v code %d class %q, want %s (%s)", s.step.Name, o.OK, o.IsError, o.Code, a.Class, s.class, o.Message)
			}
			rejected[a.EventID] = a.Class
			classes[a.Class]++
		}
	}
	// Honest calls got the servers' real results.
	var results []string
	for _, o := range outs {
		for _, c := range o.Content {
			results = append(results, c.Text)
		}
	}
	for _, want := range []string{"through the pipeline", "42", "written through the gateway"} {
		if !strings.Contains(strings.Join(results, "\n"), want) {
			t.Errorf("no %q in the results %q", want, results)
		}
	}
	// The Go SDK v1.8.0 client of the 2026-07-28 revision: no session,
	// the same decisions, stored the same way (without a session id).
	stateless := map[string]bool{} // event ids
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-2026", Version: "1"}, nil).Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp"}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if cs.ID() != "" || cs.InitializeResult().ProtocolVersion != "2026-07-28" {
		t.Fatalf("2026-07-28 client: session %q, protocol %s", cs.ID(), cs.InitializeResult().ProtocolVersion)
	}
	for _, c := range []struct{ name, args, class string }{
		{"everything__echo", `{"message":"stateless"}`, "OK"},
		{"everything__delete_everything", `{}`, "M1"},
		{"everything__echo", `{"message":"x","sudo":true}`, "H2"},
		{"echo", `{"message":"x"}`, "M3"},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: c.name, Arguments: json.RawMessage(c.args)})
		var data []byte
		switch {
		case err != nil:
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("2026-07-28 %s: %v", c.name, err)
			}
			data = je.Data
		case res.IsError:
			data, _ = json.Marshal(res.Meta["io.toolaudit/decision"])
		}
		var a struct {
			EventID string `json:"event_id"`
			Class   string `json:"class"`
		}
		json.Unmarshal(data, &a)
		if a.Class == "" {
			a.Class = "OK"
		}
		if a.Class != c.class {
			t.Fatalf("2026-07-28 %s: %s, want %s", c.name, a.Class, c.class)
		}
		if a.EventID != "" {
			rejected[a.EventID] = a.Class
			stateless[a.EventID] = true
		}
		classes[a.Class]++
	}
	calls := 0
	for _, n := range classes {
		calls += n
	}

	// SIGKILL resolverd run and start it again: the audit records not yet
	// committed are stored again, and FINAL keeps one row each.
	run.waitLog(t, `msg="partitions assigned" topic=tool-audit`, 60*time.Second) // see TestKill9
	run.kill()
	run = e.start()
	// The new process owns the audit partitions (and its SIGINT handler is
	// installed) before the rows are counted and it is stopped.
	run.waitLog(t, `msg="partitions assigned" topic=tool-audit`, 60*time.Second)
	var rows map[string][4]string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if rows = e.gatewayRows(); len(rows) >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d gateway decisions stored after 60s", len(rows), calls)
		}
	}
	got := map[string]int{}
	noSession := 0
	for k, r := range rows {
		got[r[0]]++
		if r[3] == "" {
			noSession++
		}
		if r[1] != "enforced" || (stateless[k] && r[3] != "") {
			t.Errorf("%s: action %q session %q", k, r[1], r[3])
		}
		if want, ok := rejected[k]; ok && want != r[0] {
			t.Errorf("%s: stored %s, answered %s", k, r[0], want)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(classes) || len(rows) != calls {
		t.Errorf("stored classes %v, answered %v", got, classes)
	}
	if noSession != 4 {
		t.Errorf("%d rows without a session, want the 4 calls of the 2026-07-28 client", noSession)
	}
	run.stop(t)

	// Every upstream's listing is in the listings topic (fx twice: the
	// rug pull), keyed registry/server.
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics("tool-listings"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(context.Background(), "tool-listings")
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	servers := map[string]int{}
	for n := int64(0); n < total; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			l, err := schema.DecodeListing(r.Value)
			if err != nil || string(r.Key) != schema.ListingKey(l.Registry, l.Server) || l.Registry != "e2e-gateway" {
				t.Errorf("listing record %s: %v", r.Key, err)
				return
			}
			servers[l.Server]++
		})
	}
	if servers["everything"] < 1 || servers["memory"] != 1 || servers["fs"] != 1 || servers["fx"] != 2 {
		t.Errorf("listings per server: %v", servers)
	}
}
