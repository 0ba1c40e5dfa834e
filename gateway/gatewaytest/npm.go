package gatewaytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolaudit/toolaudit/internal/testkit/bins"
	"github.com/toolaudit/toolaudit/internal/testkit/need"
)

// NPM is the npm software the tests use, installed in testdata/mcp.
type NPM struct {
	Dir  string // testdata/mcp: package.json, client.mjs, node_modules
	Node string // the node binary
}

// FindNPM returns the installed npm software, or skips the test with
// what to run, or fails it when the run requires everything (package
// need's one rule: .ci/run installs both).
func FindNPM(t testing.TB) *NPM {
	t.Helper()
	root, err := bins.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "testdata", "mcp")
	const hint = "run `npm ci --prefix testdata/mcp` (needs node >= 20 and npm; scripts/install-node.sh prints the directory of both)"
	node := need.Tool(t, "node", hint)
	for _, p := range []string{"sdk", "server-everything", "server-filesystem", "server-memory"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", p, "package.json")); err != nil {
			need.Missing(t, "@modelcontextprotocol/"+p+" is not installed in testdata/mcp", hint)
		}
	}
	return &NPM{Dir: dir, Node: node}
}

// server is the command of a reference server.
func (n *NPM) server(pkg string, args ...string) []string {
	return append([]string{n.Node, filepath.Join(n.Dir, "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")}, args...)
}

// Everything is the command of @modelcontextprotocol/server-everything
// on stdio.
func (n *NPM) Everything() []string { return n.server("server-everything", "stdio") }

// Filesystem is the command of @modelcontextprotocol/server-filesystem
// serving the directories dirs.
func (n *NPM) Filesystem(dirs ...string) []string { return n.server("server-filesystem", dirs...) }

// Memory is the command of @modelcontextprotocol/server-memory; it
// keeps its graph in the file the environment variable MEMORY_FILE_PATH
// names.
func (n *NPM) Memory() []string { return n.server("server-memory") }

// Step is one step of the TypeScript client (testdata/mcp/client.mjs).
type Step struct {
	Op        string          `json:"op"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	TimeoutMS int             `json:"timeout_ms,omitempty"`
}

// Agent is a step of a scripted agent: it calls, and corrects the key
// an error's text names (`send "K" instead of "B"`) until the call
// passes, at most 3 times.
func Agent(name, args string) Step {
	return Step{Op: "agent", Name: name, Arguments: json.RawMessage(args)}
}

// Call is a call step.
func Call(name, args string) Step {
	return Step{Op: "call", Name: name, Arguments: json.RawMessage(args)}
}

// Output is one step's output line.
type Output struct {
	Tools []struct {
		Name        string          `json:"name"`
		Digest      string          `json:"digest"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	OK      bool `json:"ok"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool                       `json:"isError"`
	Meta    map[string]json.RawMessage `json:"meta"`
	Tries   []string                   `json:"tries"` // agent: the error texts it corrected from
	Code    int                        `json:"code"`
	Message string                     `json:"message"`
	Data    json.RawMessage            `json:"data"`
	Changed bool                       `json:"changed"`
	MS      int                        `json:"ms"` // since the client started
}

// Text is the text of a call's content.
func (o *Output) Text() string {
	var b bytes.Buffer
	for _, c := range o.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// RunClient runs the TypeScript SDK's client against the MCP endpoint
// url with the steps, token as its bearer token ("" none), and returns
// one output per step. It fails the test if node fails or says less.
func (n *NPM) RunClient(t testing.TB, url, token string, steps ...Step) []Output {
	t.Helper()
	in, err := json.Marshal(steps)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Node, filepath.Join(n.Dir, "client.mjs"), url)
	cmd.Dir = n.Dir
	cmd.Env = append(os.Environ(), "TOOLAUDIT_TOKEN="+token)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.Bytes())
	}
	var outs []Output
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var o Output
		if err := json.Unmarshal(sc.Bytes(), &o); err != nil {
			t.Fatalf("TypeScript client output %q: %v", sc.Bytes(), err)
		}
		outs = append(outs, o)
	}
	if len(outs) != len(steps) {
		t.Fatalf("TypeScript client: %d outputs for %d steps\nstdout:\n%s\nstderr:\n%s", len(outs), len(steps), out, stderr.Bytes())
	}
	return outs
}
