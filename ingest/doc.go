// Package ingest turns agent logs into the wire contract's events (call and
// listing) and hands them to a [Sink]: Kafka through a franz-go [Producer],
// or JSONL through a [JSONLSink].
//
// # Formats
//
// Each input line is one JSON object. A provider's object is read as the
// agent's own parser reads it (JSON.parse, the SDKs) or refused as a
// per-line error: an object that repeats a member name, invalid UTF-8,
// and a member whose name is a field's only when case is folded
// ("FUNCTION", "Name"), which encoding/json would take for the field and
// the agent ignores, so that the trail would name a call other than the
// one that ran. (A contract event so written passes through: the
// resolver decides it MALFORMED.) [Detect] tells its [Format]:
//
//   - [FormatEvent]: the contract's own call or listing events. They pass
//     through byte for byte once they are good enough to route: "type" is
//     "call" or "listing" and "event_id" is a non-empty string. An
//     unusable time is only a warning (the record is then stamped with the
//     time of the event before it, see Records), because the resolver must
//     still see the event to mark it MALFORMED.
//   - [FormatOpenAI]: Chat Completions responses (choices[].message.tool_calls)
//     and bare assistant messages (tool_calls, or the legacy function_call).
//     function.arguments is a JSON string: it is parsed, and when it is not
//     valid JSON the text goes to arguments_raw and arguments is left out.
//   - [FormatAnthropic]: Messages API responses, bare assistant messages, or
//     bare content blocks; tool_use blocks (and mcp_tool_use blocks, whose
//     server_name pins the server) become calls.
//   - [FormatBedrock]: Converse responses (output.message.content[].toolUse),
//     bare messages or bare {"toolUse":…} blocks.
//   - [FormatMCP]: JSON-RPC tools/call requests become calls (surface "mcp";
//     absent params.arguments means {} as in MCP); tools/list results become
//     snapshot listings. A result with nextCursor is held until the next
//     tools/list result for the same registry/server, and the pages are
//     merged into one listing (timed by the first page). A pagination still
//     open at the end of a source is reported as an error on its first line
//     and not emitted: a partial snapshot would drop tools downstream. Other
//     JSON-RPC messages are ignored.
//   - [FormatOTel]: OTLP/JSON exports, traces (resourceSpans) or logs
//     (resourceLogs), read by package otlp (its documentation maps every
//     attribute): the tool calls a model returned (GenAI output messages
//     on spans or the inference-details log record, gen_ai.choice log
//     events, OpenInference llm.output_messages), execute_tool spans and
//     MCP tools/call client spans become calls, one call for a model's
//     call and its execute_tool span; tool definitions (gen_ai.tool.definitions,
//     OpenInference llm.tools) become a snapshot listing in a registry
//     named by the tool set (the configured registry, ":tools-" and 16 hex
//     digits of its digest), which the calls of that answer name too; MCP
//     tools/list spans become listings of the configured registry. A call
//     without recorded arguments is sent with "arguments_recorded": false
//     (decided on its name, never allowed), with a warning; one the
//     decoder could not read (over a bound, no name) is kept without name
//     or arguments (MALFORMED downstream), with a warning saying why.
//
// # Envelope
//
// Provider objects lack the contract's context. A line may wrap one in an
// envelope, an object with exactly one format key:
//
//	{"emitted_at":"2026-11-29T10:00:05.250Z","registry":"fleet-a",
//	 "agent_id":"a-7","session_id":"s-19","model":"gpt-4o","provider":"openai",
//	 "surface":"raw_json","server":"github","trust":1,
//	 "visible":["create_issue"],"seen_digests":{"create_issue":"sha256:…"},
//	 "openai":{…the provider object…}}
//
// The format key is one of "openai", "anthropic", "bedrock", "mcp" and
// "otel"; every other field is optional ("observed_at" is an alias of
// "emitted_at"; an empty string counts as not given). Each field of an
// event is taken from the first that has it: the envelope, then the
// provider object itself (OpenAI created and model, Anthropic model, OTel
// attributes and span time), then the defaults given to the [Converter]
// (command-line flags), then the format's own fallback (provider "openai",
// "anthropic", "bedrock"; surface "mcp" for MCP, "raw_json" otherwise). A
// call or listing with no time at all is a per-line error.
//
// # Event ids
//
// The store keeps one decision per event_id, and a provider's tool-call id
// is unique at best within one response (tau-bench's gpt-4o airline
// trajectories give 134 distinct ids to 1,164 calls, one id to calls of 28
// conversations). So a converted call's id is derived (callID): SHA-256
// over the source's name, the line's number, the call's index in the
// line and the line's text, led by the provider's id when there is one
// (OpenAI tool_calls[].id, Anthropic tool_use id, Bedrock toolUseId, OTel
// gen_ai.tool.call.id; printable ASCII of up to 64 bytes) as
// "<provider id>~" and 16 hex digits, else "c-" and 20 hex digits (MCP
// tools/call: JSON-RPC ids are only unique per connection). Two calls
// never share one (they differ in place or text), and re-ingesting the
// same file under the same name gives the same ids; a file rotated under
// the same name gives its new lines new ids. A listing's id is "l-" and a
// hash of the source's name, the line and its index. Contract events keep
// their own event_id.
//
// The Ingester remembers the ids of a run (MaxTrackedIDs of them) and
// counts an id seen again: a repeat when the event is the same, a
// conflict, reported through OnError (ErrIDConflict), when it differs.
//
// # Records
//
// Events are encoded by package schema (schema.AppendCall,
// schema.AppendListing), which also decodes them, and keyed by its rule: a
// call's key is its session_id, else its agent_id, else none; a listing's
// key is registry + "/" + server (schema.CallKey, schema.ListingKey). Every
// record carries a timestamp: the event's own time (emitted_at,
// observed_at) when the resolver can use it, else (a contract event whose
// time is unusable) the own time of the event before it in its source, or
// for a source's first, the time ingest read it. The re-analysis places
// such a call at its record's timestamp: where the log had it.
package ingest
