// Package gateway is an MCP gateway that puts closed-world resolution in
// the call path of real MCP clients and servers: it serves one Streamable
// HTTP MCP endpoint that merges the tools of several upstream servers,
// decides every tools/call against the registry its upstreams' listings
// make, and forwards only the calls that resolve. It is built on the
// official Go SDK (github.com/modelcontextprotocol/go-sdk), which speaks
// the protocol on both sides; the gateway answers initialize (to keep a
// session table), tools/list and tools/call itself, in a receiving
// middleware, and leaves the rest of the protocol to the SDK.
//
// # Listings
//
// Package upstream keeps each upstream connected and lists its tools on
// every connection, every notifications/tools/list_changed and every
// Config.PollTools (a server may change a definition without saying so). The
// gateway turns a listing into a listing event (wire contract v1:
// registry, server, trust, op snapshot, observed_at, the tools as the SDK
// read them), decodes it with the pipeline's own decoder, produces it to
// the listings topic (Publisher; acknowledged), and only then applies it
// to its own registry.Store, rebuilds the catalogue and tells
// every client session that the tool list changed. The registry the
// gateway decides against is therefore the one the pipeline reads from
// Kafka. A listing the registry would refuse whole (a tool without a name
// or an object inputSchema, a name twice) withdraws the server (op
// remove) rather than leaving its previous tools callable. A relisting
// identical to the server's previous listing is not produced again (the
// listings topic is kept forever). An upstream that is down keeps its
// tools listed: calls to it are answered an error, and a crash loop
// produces no listing churn.
//
// Event times are milliseconds, as events are written: listings are
// stamped strictly increasing and a call never before the latest listing
// (clock), so the version a call is decided against is the one the
// client was shown, whatever the wall clock does.
//
// # The catalogue
//
// Clients see every tool of every upstream under its qualified name,
// server + Separator + tool ("files__read_file"; a server name may not
// contain the separator, so a qualified name reads one way), with the
// definition the upstream listed and its digest in _meta
// ("io.toolaudit/digest"). tools/list answers the whole catalogue in one
// page with ttlMs Config.ListTTL (cacheScope private), and the session
// remembers the catalogue it was shown.
//
// # Two protocol revisions
//
// Clients of 2025-11-25 and earlier open a session (initialize,
// Mcp-Session-Id) and are served by the SDK's session-based transport;
// the gateway keeps a table of their sessions. A request of 2026-07-28
// or later without a session id (its Mcp-Protocol-Version header) is
// served statelessly, as that revision is: server/discover answers the
// revision, the version and client capabilities come in each request's
// _meta, and notifications/tools/list_changed reaches the clients that
// hold a subscriptions/listen stream open (bounded by
// Limits.MaxSessions, as sessions are). The same call gets the same
// decision under either revision.
//
// # Clients without a session
//
// Without a session there is no catalogue the client was shown (nor in
// a session that has not listed yet: its client may hold the listing of
// an earlier session, one closed under it); what it
// may hold is bounded by the ttlMs of the tools/list answers, ListTTL:
// an answer obtained at any time in the ListTTL before a call may still
// be in use. So a call is checked against the definition of its tool
// before the tool's latest change when that change was observed within
// ListTTL before the call, and against the current one otherwise: a
// definition changed within ListTTL of the call is M4 unless the client
// listed since (a tools/list answered after the change, to the same
// authenticated client: bearer token name; an anonymous client cannot be
// told from another, so it waits out ListTTL). Such a client may say
// which definition it holds instead: the digest the gateway listed, in
// the call's _meta under MetaDigest, is then the call's seen_digest,
// checked exactly with no window (a session that listed is checked
// against its catalogue whatever its client says). A tool new within
// ListTTL has no older definition to hold; one withdrawn and listed
// again within ListTTL is checked against the one withdrawn. The text
// of such an M4 says what is known, not that the client was shown the
// earlier digest (it may never have been): how long ago the definition
// changed, that the client may hold the earlier one for ListTTL, and
// what helps it (an anonymous client: list again and retry after the
// time left of ListTTL, send the digest it holds in _meta, or
// authenticate; an authenticated client or a session: list again, which
// counts at once). A session that listed is told the digest it was
// shown.
//
// # A call
//
// A tools/call becomes a call event: event_id unique to this process,
// emitted_at now, the configured registry, session_id the MCP session,
// agent_id the authenticated client's name, surface "mcp_gateway", and
//
//   - a name of the catalogue the session was shown: server and tool
//     pinned;
//   - a qualified name of a configured upstream the session was not
//     shown: pinned;
//   - any other name, as it is: the resolver reads server/tool,
//     mcp__server__tool and server__tool, and decides a bare name
//     several servers provide by Mode (strict: M2; pin-assisted:
//     resolved; shadowed by a lower-trust server: M3); a fabricated one
//     is M1;
//
// and seen_digest the digest of the definition the client holds of the
// tool the name resolves to, whatever the spelling: a session holds the
// catalogue it was last shown; a client without a session, what it may
// have kept of a tools/list answer (Config.ListTTL, see Clients
// without a session). A definition changed since is M4, the rug pull,
// by every spelling. A name of the session's catalogue carries its digest from
// the start; another is decided once to learn the tool it resolves to,
// then, when the client holds a different definition of it, again with
// that digest.
//
// Absent or null arguments are {} (MCP lets a client omit them). The
// event has no "visible" frontier (H4 is not applied): it would repeat the
// whole catalogue in every event. The event is decided, recorded and
// answered by the call path's one step, the resolve API's too (package
// callpath): decided (resolve.Resolver.Decide), produced to the audit
// trail (Options.Audit, acknowledged) and only then acted on. A rejected
// call never reaches an upstream, and is answered as the MCP
// specification (2025-11-25 and 2026-07-28, Tools / Error Handling)
// separates errors:
//
//   - a name that identifies no one tool (H1, M1, M2, M3) and a
//     MALFORMED call are protocol errors: JSON-RPC -32602
//     (CodeRejected) whose message gives the class and reason and the
//     names to call instead (the nearest names; for M2 and M3 the
//     qualified names to pin), with the answer object as its data. M2
//     and M3 are errors of the name, not of the arguments: the fix is
//     another name, which the message gives, and the tool a call with
//     that name would run is not one the gateway would run.
//   - arguments that fail the tool (H2, H3, H5, M5) and a definition the
//     client holds that is not the current one (M4) are tool execution
//     errors, which clients give the model to correct the call: a
//     CallToolResult with isError true whose text says what is wrong,
//     where (the JSON pointer) and what would be right (the nearest
//     declared key, the missing keys, what the schema expects, the tool
//     the arguments fit, or to list again), with the answer object in
//     the result's _meta (MetaDecision), never in structuredContent
//     (clients check that against the tool's outputSchema).
//
// The answer object is the decision, source, action and hints
// (callpath.AppendAnswer). Hints and suggested_tool name tools as
// clients call them (server + Separator + tool), in the answer and in
// the audit record; the resolver's reasons keep its own server/tool.
// An accepted call is forwarded, its arguments byte for byte as decided,
// to the resolved server's tool, and the upstream's result (or JSON-RPC
// error) is the answer. When the audit trail cannot take the decision,
// the call is answered -32603 (CodeUnavailable) and not executed: fail
// closed. With Config.Observe, rejected calls that name a server are
// forwarded too and recorded with action "observed"; otherwise the
// action is "enforced".
//
// # Limits
//
// Sessions (Limits.MaxSessions; a new session beyond it is answered HTTP
// 503), request bodies (MaxRequestBytes, 413), calls decided or forwarded
// at once (MaxInFlight; beyond it -32603 at once, no queue), idle
// sessions (SessionIdle), sessions of clients gone without DELETE
// (SessionGrace: a client that kept an event stream open, as both SDKs
// do, and has none now nor a request in progress, is gone unless it
// reconnects within it), and each forwarded call (UpstreamTimeout, or
// the upstream's own). An upstream that is down, starting, or whose
// current listing is not recorded is an error at once, never a wait.
//
// Until every upstream has listed its tools once, a call to a name that
// is neither in the session's catalogue nor qualified with an upstream's
// name is answered -32603 naming the upstreams not listed yet, and is not
// decided: an upstream still starting may provide that name with a
// higher trust, and the verdict from the partial registry (allowed) would
// be M3 a moment later. Catalogue and qualified names are pinned and are
// served meanwhile.
//
// # Authentication
//
// With Options.Auth, every request needs a bearer token (401 otherwise);
// the client's name becomes the agent_id of its calls, and a session is
// bound to the client that opened it (the SDK answers 403 to another
// token presenting its id).
package gateway
