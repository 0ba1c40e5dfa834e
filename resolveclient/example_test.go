package resolveclient_test

import (
	"context"
	"encoding/json"
	"log"
	"time"

	"github.com/toolaudit/toolaudit/resolveclient"
)

// Wrapping an agent's tool executor: a call runs only when the resolver
// allows it; a rejection comes back as an error the model can act on.
// (Example_resolveclientGuard in package httpapi runs this against the
// real handler and shows the answers.)
func ExampleClient_Guard() {
	client := resolveclient.New("http://127.0.0.1:8080", resolveclient.WithToken("TOKEN"))
	run := client.Guard(func(ctx context.Context, call resolveclient.Call) (json.RawMessage, error) {
		return json.RawMessage(`{"issue":42}`), nil // the tool itself
	})
	result, err := run(context.Background(), resolveclient.Call{
		EventID: "c-1", EmittedAt: time.Now(), Registry: "demo", SessionID: "s-1",
		Tool: "create_issue", Arguments: json.RawMessage(`{"title":"flaky test"}`),
	})
	switch {
	case resolveclient.IsRejected(err):
		log.Print(err) // hand it to the model: it says what to fix
	case err != nil:
		log.Print("not run, the API did not answer: ", err)
	default:
		log.Print(string(result))
	}
}
