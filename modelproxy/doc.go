// Package modelproxy puts closed-world resolution at the model API: an
// HTTP proxy in front of an upstream model API (OpenAI Chat Completions
// and Anthropic Messages and OpenAI Responses, non-streaming and
// streaming) that decides every tool call a
// response returns against the tools its request declared, records the
// decisions in the audit trail, and only then answers the client. An
// unmodified SDK pointed at it (its base URL) works as before.
// `resolverd proxy` serves it (docs/commands.md).
//
// # Routes
//
// A route is a path prefix, an API, an upstream base URL, a registry and
// a policy (Config). The rest of the request's path is the upstream's:
// an OpenAI SDK with baseURL http://proxy/openai/v1 posts
// /openai/v1/chat/completions, forwarded to upstream + /v1/chat/completions.
// Only the endpoints whose tool calls the proxy decides are served (POST
// .../chat/completions and .../responses, POST /v1/messages); any other path of a route is
// answered 404 in the API's error shape rather than passed on undecided
// (the Responses API, batches and the like may return tool calls too).
// A route's clients (RouteClient) name the registry and agent of the
// requests whose credential has a given SHA-256; other credentials are
// the route's, or refused (403) on a route without a registry of its own.
//
// # The declared tools are a listing
//
// The tools a request declares are a listing event of the route's
// registry (wire contract v1.2): one unnamed server (the single-registry
// case), each tool its name, description and inputSchema (OpenAI's
// function.parameters, an omitted one being an empty parameter list;
// Anthropic's input_schema). Its registry version is the content hash
// package registry gives any listing (package registry/declared), a digest of the declared
// definitions: a fleet's unchanged tool set is one version, compiled once
// and kept (declared.DefaultSets), whichever client sends it. `resolverd
// check` given the same tools as a listing and the audited call events
// decides the same (the tests assert it). Tools the API runs itself
// (Anthropic's web_search, web_fetch, code_execution, tool_search) are
// not in the listing: their server_tool_use blocks come back executed,
// never for the client to execute, and are not decided. Tools the API
// defines and the client executes (Anthropic's bash, text_editor,
// computer, memory) are in it with an open schema ({"type":"object"}):
// their names are checked, their arguments are the API's to define.
// OpenAI custom tools (free-text input) and the deprecated functions are
// refused (400): their calls carry no arguments object to decide.
//
// Declared tools that are not a usable listing (two of one name, one
// without a name or an object schema) are refused (400). A request body
// with a member name repeated anywhere is refused too (400): JSON readers
// differ on which repetition wins, and the proxy must read the
// declarations the upstream reads. The same holds of responses (502)
// and of stream events. Every body and event is parsed once, by
// jsontape, and its members are read by their exact names, as the SDKs
// read them (encoding/json's struct fields also take "Name" for "name":
// a call written with both was decided by one and executed by the
// other).
//
// # A call is an event of that version
//
// Each tool call of a response (OpenAI: choices[].message.tool_calls[];
// Anthropic: content[] blocks of type tool_use) becomes a call event:
// event_id the response's id and the call's, emitted_at now, the route's
// registry and agent, the response's model, provider openai or
// anthropic, surface schema_enforced when the tool was declared strict
// (constrained decoding), raw_json otherwise, the name as returned, the
// arguments (OpenAI's arguments string when it is JSON, else
// arguments_raw, MALFORMED). It is decided, recorded and answered by the
// call path's one step (package callpath, source "model-proxy"): every
// decision of a response is produced to the audit topic and acknowledged
// before the client gets the response. When the audit trail does not take
// them, the client gets 503 in the API's error shape and no call (fail
// closed). A response without tool calls needs no decision and passes.
// tool_choice and parallel_tool_calls are forwarded as they are.
// tool_choice is the call's visible frontier (H4, contract v1.2) as each
// API defines it: a forced tool (OpenAI {"type":"function"}, Anthropic
// {"type":"tool"}) allows only it, "none" (Anthropic {"type":"none"})
// none, OpenAI's allowed_tools those it lists; auto, required and any
// every declared tool (no frontier). A call off the frontier is H4.
//
// # Policies
//
// observe forwards every response unchanged and records the decisions
// (action observed). block (action enforced) withholds rejected calls:
// the client never receives one as something to execute. What it
// receives instead is a response the official SDKs and their agent
// loops handle as an ordinary one:
//
//   - OpenAI: the rejected calls are dropped from message.tool_calls and
//     a note appended to message.content (the fix text of each: class,
//     reason, path, hints). A choice left without calls has no
//     tool_calls and finish_reason "stop": runTools and every agent loop
//     end the turn with the note as the assistant's answer, where a
//     tool_calls finish with no call would make them loop or fail.
//   - Anthropic: the rejected tool_use blocks are dropped and the note
//     appended as a text block; a message left without tool_use gets
//     stop_reason "end_turn" (stop_sequence null), for the same reason.
//
// Parallel calls of which only some resolve: the ones that resolve are
// kept, in order, with their ids, and finish_reason / stop_reason stays
// tool_calls / tool_use; the client executes them once and sends their
// results, which the API accepts (a result is owed only for the calls of
// the assistant turn the client holds). The proxy executes nothing.
// Response headers say what was decided: Toolaudit-Calls,
// Toolaudit-Rejected, Toolaudit-Withheld (the ids withheld) and
// Toolaudit-Registry-Version.
//
// # Pass-through and bounds
//
// The client's headers pass to the upstream but the hop-by-hop ones,
// Content-Length and Accept-Encoding (Go's transport asks for gzip and
// decodes it: the proxy reads what it decides); credentials
// (Authorization, x-api-key) pass through and are never logged or kept.
// An upstream answer that is not 2xx passes through as it is, status,
// headers and body. Request bodies (Limits.MaxRequestBytes: 413),
// declared tools (Limits.MaxTools: 400) and successful response bodies
// (Limits.MaxResponseBytes: 502, the calls cannot be decided) are
// bounded, and so is the exchange (Limits.UpstreamTimeout).
//
// # Retry
//
// retry (action enforced) answers the model itself before the client
// sees a rejection: it sends the upstream the request as the client sent
// it (headers and credentials too) followed by the model's turn and one
// tool result per call of that turn, as each API expresses a tool
// result: for a rejected call its fix text as that tool's error
// (Anthropic: a tool_result with is_error; OpenAI Chat Completions has no
// error flag, so the text says it was rejected), and for a call that
// resolves that it is kept, has not run, and must not be asked again
// (both APIs require a result for every call of a turn, and the proxy
// executes nothing). The answer is decided and recorded like the first,
// up to Route.Retries repair requests within Route.RetryDeadline. The
// client receives the first answer whose calls all resolve, carrying
// before its own calls the calls of earlier answers that resolved, with
// their ids (a repeat of one in any attempt, same name and arguments
// equal as JSON values, is dropped: no call runs twice), usage summed
// over every attempt, finish_reason
// tool_calls / stop_reason tool_use; or, when the retries or the deadline
// run out or an attempt fails upstream, the block answer of the last
// answer decided (with the calls carried). Toolaudit-Retries says how
// many repair requests were sent; every attempt's calls are in the audit
// trail, one record each. An OpenAI response of several choices (n > 1)
// is not repaired: it gets the block answer.
//
// # Streaming
//
// A request with stream: true gets the upstream's event stream as it
// comes (each event flushed): text, thinking and every other block pass
// through at once; a tool call's events are held only until the call is
// complete, then it is decided and released or withheld, and what is
// written after it reaches the client only once its decision is recorded
// (acknowledged): the decisions made while the upstream's bytes were
// being read are recorded together before the proxy waits for more, so
// that calls which arrive together cost one acknowledgement. OpenAI: a call is complete when the choice's next call
// starts (tool_calls deltas come by index, one call after another) or
// the choice finishes; a released call goes out whole in one delta,
// renumbered so the client's indexes have no gap; at the finish the
// note of the withheld calls is sent as a content delta and, when no
// call is left, finish_reason "tool_calls" becomes "stop". Anthropic: a
// tool_use block is held from content_block_start to content_block_stop
// (its input the concatenated input_json_delta); the blocks after a
// withheld one are renumbered; before message_delta the note is sent as
// a text block and, when no tool_use is left, stop_reason "tool_use"
// becomes "end_turn". The SDKs' stream accumulators and their streaming
// agent loops read the result as an ordinary stream (the tests assert
// it). When a call cannot be recorded, or the stream cannot be read (a
// line longer than Limits.MaxSSELineBytes, an event longer than
// Limits.MaxResponseBytes, a chunk not understood), or
// it carries a call where the SDKs would find one and the proxy does not
// decide it, the
// stream ends with an error event in the API's shape (the decisions made
// before it recorded all the same, their calls not sent) (OpenAI: a data
// chunk with "error"; Anthropic: event error), which the SDKs raise, and
// the call is not sent. The headers are sent before any call is decided,
// so they carry only Toolaudit-Registry-Version; the other Toolaudit
// headers come as HTTP trailers.
//
// The proxy reads a stream as the SDKs' accumulators do, and refuses
// what they would read otherwise (and, in a stream event or a response
// body, any member named __proto__ but inside a tool's input: the OpenAI
// SDK merges a delta into its message with Object.assign, so such a
// member became the message's prototype, and a call hidden in it was
// executed by runTools) (TestStreamSmuggledCalls, each case a
// call the SDKs received undecided before): a line holding a carriage
// return not before its line feed (the SDKs end a line there), or
// starting with a byte order mark (the JS SDKs drop it from every line);
// an Anthropic event whose name (an empty one too) and data type differ
// (the SDKs act on the type), a message_start holding content blocks (the SDKs start the
// message from it), or blocks out of order (the SDKs add a block at each
// start whatever its index and apply a delta at its index: each block
// must run from its start to its stop, its index the count of blocks
// before it); a Chat Completions chunk whose choice holds a
// message (the SDK merges a choice's members into its snapshot), or an
// error and choices both (the SDK reads the choices when the error is
// null), or a deprecated function_call delta; a Responses event whose
// response holds a function call before the final event (the SDK's
// snapshot is that response), a function_call item at an output_index
// where none was added (the SDK takes an output_item.done's item
// whatever was added), a call whose added item, arguments deltas or
// arguments done differ from its done item, items out of order (the SDK
// appends each added item whatever its index and applies the other
// events at theirs: an item must be added at the count of those before
// it, an event be of an item added and not done, and no item be added
// while a function call is held), and a final response holding
// a function call other than one the stream released or withheld. A
// streamed tool_use is decided on the input the SDKs read: its
// input_json_delta deltas' partial_json, else its start block's input
// (TestStreamReadAsSDK). A released Chat Completions call is sent as the
// proxy read it (one delta, re-encoded), so the SDK cannot read another.
//
// Under retry (repairStream) each attempt's end (Chat Completions: the
// finish, the usage chunk, [DONE]; Messages: message_delta,
// message_stop; Responses: response.completed) is held, and its text and calls kept.
// When it withheld calls, the repair request (as retry builds it, from
// the turn the stream carried) is sent streaming and its stream goes on
// in the client's: the text sent before cannot be taken back, so the
// repair continues it (Chat Completions: its text after a blank line;
// Messages, Responses: without its message_start or response.created,
// its blocks or items after the client's last, its events numbered
// after the last sent), its calls renumbered after those sent, a repeat of one dropped. The last
// attempt's end is sent at the end: tool_calls / tool_use when any call
// was sent, usage summed over the attempts, and when the retries run
// out the note and stop / end_turn, as under block. A Responses
// stream's response.completed holds the items sent in every attempt.
// What is kept of a turn is bounded by Limits.MaxResponseBytes: a longer
// one is answered as under block, not repaired (and logged).
//
// # Responses
//
// The OpenAI Responses API (an openai route's POST .../responses) is
// decided like Chat Completions: function tools are the listing (strict
// unless strict: false, as that API defines them, hence surface
// schema_enforced), the API's own tools (web_search, file_search,
// code_interpreter, image_generation, mcp) run at the API and are not
// decided, and tools whose calls the client executes in another shape
// (computer use, shell, apply_patch, custom) are refused (400). Each
// function_call output item is a call (its call_id the call's id). The
// other items that pass undecided are listed (passedItems: text,
// reasoning, the API's own tools' calls, outputs, a tool search the
// server ran); any other, a call in another shape or a type this proxy
// does not know, is refused (502, or a stream's error event): the client
// may execute it (TestUndecidedItem). Block
// drops the rejected function_call items and appends the note as an
// assistant message item (the SDK's output_text shows it). The API
// stores a response with every call it returned (store defaults to true)
// and refuses a request continuing it (previous_response_id) without an
// output for each: so the proxy remembers, for the last
// DefaultWithheldResponses block answers, the calls it withheld, and
// puts a function_call_output of each (the note) before the input of a
// request that continues one, unless the client gives it: a request of
// the same route and credentials (another client knowing the response id
// gets nothing). A conversation (the Conversations API's conversation
// member) is not continued so: its upstream refuses the next turn for
// the withheld call's missing output, which fails closed. Retry sends the
// input so far, the response's output items as they came (a reasoning
// item with what followed it) and a function_call_output per call.
//
// Streamed (stream: true), its typed events pass through as they come
// but a function_call item's (output_item.added, the arguments' deltas,
// output_item.done), held until the item is done and decided, then sent
// as they came or, withheld under block, dropped: the items after it are
// renumbered (output_index) so the SDK's accumulator finds each at its
// place, the note goes out as a message item of its own before
// response.completed (the events of one, sequence numbers after the
// upstream's), and response.completed's response holds the items as sent;
// a request continuing it gets the withheld calls' outputs as above.
//
// # One trace per client request
//
// Every call event of a request's responses carries the request's trace
// id (trace_id: the client's traceparent, else a new one) and its
// response's own span id (span_id): the attempts of a retry, other
// responses with other calls, are one trace in the audit rows and the
// decisions table, each attempt a span of it; and a traced agent's run
// leads to the decisions of its model calls.
package modelproxy
