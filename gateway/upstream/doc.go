// Package upstream keeps the gateway connected to one MCP server: a
// command spawned and spoken to over stdio, or a Streamable HTTP URL. It
// uses the official Go SDK's client (github.com/modelcontextprotocol/go-sdk).
//
// # Supervision
//
// Run connects, lists the server's tools, hands them to the Lister, and
// from then on forwards calls; when the session ends (the process exited,
// the HTTP endpoint failed, a keep-alive ping went unanswered) it
// reconnects after a backoff that doubles from MinBackoff to MaxBackoff
// and starts again from MinBackoff once a connection has stayed up for
// MaxBackoff. A command's process group is killed when its session ends,
// so a server that forked helpers leaves none behind; the last lines the
// process wrote to stderr are logged when it ends unexpectedly.
//
// # Calls never hang
//
// Call answers ErrUnavailable at once while the server is down or its
// first listing of the current connection is not yet recorded (a server
// restarted with other definitions must not be called against the old
// ones), and every call is bounded by CallTimeout (ErrTimeout). The SDK
// sends the server a cancellation when a call is given up.
//
// # Listings
//
// On every connection, on every notifications/tools/list_changed, and
// every Poll (a server may change a definition without a notification),
// the tools are listed (all pages, at most MaxTools tools, within
// ListTimeout) and given to the Lister, which records them (the gateway
// produces a listing event and applies it to its registry). A Lister
// error is retried with the backoff while the session lives. Change
// notifications are coalesced: at most one listing runs at a time, one
// more is queued however many notifications arrive, and listings are at
// least RelistInterval apart, so a server cannot make the gateway list
// (and produce listing events) faster than that.
//
// The SDK decodes a listing into its own types: each tool's inputSchema
// is a map (numbers as float64, a member repeated in the server's JSON
// read once, the last one), and members of a tool that the SDK does not
// know (such as "execution") are not kept. Tools are handed on as the SDK
// read them.
//
// # Environment
//
// A command does not inherit the gateway's environment, which holds the
// gateway's own secrets (Kafka passwords): it gets Config.Env only
// (the gateway's configuration passes PATH, HOME, LANG and TMPDIR and
// what the operator lists).
package upstream
