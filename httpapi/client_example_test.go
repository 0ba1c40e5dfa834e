package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/toolaudit/toolaudit/check"
	"github.com/toolaudit/toolaudit/httpapi"
	"github.com/toolaudit/toolaudit/registry"
	"github.com/toolaudit/toolaudit/resolveclient"
)

// A registry with one tool, as its MCP server lists it.
const listing = `{"type":"listing","event_id":"l-1","observed_at":"2026-01-01T00:00:00Z","registry":"demo","server":"","op":"snapshot",
 "tools":[{"name":"create_issue","inputSchema":{"type":"object","properties":{"title":{"type":"string"},"priority":{"type":"integer"}},"required":["title"]}}]}`

// demoServer stands in for `resolverd run --http`: the real handler over
// a registry holding the listing above.
func demoServer() *httptest.Server {
	store := registry.New()
	if _, err := check.LoadListings(strings.NewReader(strings.ReplaceAll(listing, "\n", "")), store, nil); err != nil {
		panic(err)
	}
	h, err := httpapi.New(httpapi.Config{Store: store})
	if err != nil {
		panic(err)
	}
	return httptest.NewServer(h)
}

// Wrapping an agent's tool executor: a call runs only when the resolver
// allows it; a rejection comes back as an error the model can act on.
func Example_resolveclientGuard() {
	srv := demoServer()
	defer srv.Close()

	client := resolveclient.New(srv.URL)
	run := client.Guard(func(ctx context.Context, call resolveclient.Call) (json.RawMessage, error) {
		fmt.Println("executing", call.Tool, string(call.Arguments))
		return json.RawMessage(`{"issue":42}`), nil
	})

	ctx := context.Background()
	call := func(id, tool, args string) resolveclient.Call {
		return resolveclient.Call{EventID: id, EmittedAt: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC),
			Registry: "demo", SessionID: "s-1", Tool: tool, Arguments: json.RawMessage(args)}
	}
	for _, c := range []resolveclient.Call{
		call("c-1", "create_issue", `{"title":"flaky test"}`),
		call("c-2", "create_issues", `{"title":"flaky test"}`),
		call("c-3", "create_issue", `{"titel":"flaky test"}`),
		call("c-4", "create_issue", `{"title":"flaky test","priority":"high"}`),
	} {
		result, err := run(ctx, c)
		switch {
		case resolveclient.IsRejected(err):
			fmt.Println(err)
		case err != nil:
			fmt.Println("not run, the API did not answer:", err)
		default:
			fmt.Println("result", string(result))
		}
	}
	// Output:
	// executing create_issue {"title":"flaky test"}
	// result {"issue":42}
	// tool call rejected (H1): no tool named "create_issues"; valid tools: create_issue
	// tool call rejected (H2): undeclared argument at /titel; did you mean: title; missing: title
	// tool call rejected (H3): wrong type: want integer, got string at /priority; expected: {"type":"integer"}
}
