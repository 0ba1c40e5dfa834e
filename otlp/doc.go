// Package otlp decodes OpenTelemetry payloads (OTLP traces and logs, as
// protobuf or JSON: the Collector's Kafka exporter encodings otlp_proto
// and otlp_json, and OTLP/JSON files) into tool calls and tool listings,
// with the OpenTelemetry project's own data model
// (go.opentelemetry.io/collector/pdata v1.71, the Collector v0.165 line).
// It knows no event ids, registries or defaults: `ingest --format otel`
// and the stream give those, and encode the contract's events.
//
// # Mapping
//
// The GenAI semantic conventions are of Development stability; the names
// below are those of semantic-conventions v1.37 and later and of
// semantic-conventions-genai v0.1 (where they moved), and the older ones
// that instrumentations still emit. "OI" is OpenInference.
//
//	attribute / event                              → field            release, instrumentation
//	span gen_ai.output.messages[].parts[]          → a call per part  v1.37+; @ai-sdk/otel (JSON string)
//	  type "tool_call": name, id, arguments        →   tool, call id, arguments (object, or JSON text)
//	  emitted_at: the span's end (the answer complete), else its start
//	log event gen_ai.client.inference.operation.details
//	  attribute gen_ai.output.messages (structured) → as above        v1.37+; instrumentation-openai 0.22, Responses
//	  emitted_at: the record's time, else its observed time
//	log event gen_ai.choice, body message.tool_calls[]                up to v1.36, deprecated; instrumentation-openai 0.22,
//	  id, function.name, function.arguments        →   call id, tool, arguments (JSON text)     Chat Completions
//	  (the event's name: event_name, else the older attribute event.name)
//	span llm.output_messages.<i>.message.tool_calls.<j>.tool_call.
//	  id, function.name, function.arguments        → call id, tool, arguments  OI; openinference-instrumentation-openai
//	span gen_ai.operation.name "execute_tool" (or no operation and a name "execute_tool <tool>")
//	  gen_ai.tool.name (else from the span name), gen_ai.tool.call.id, gen_ai.tool.call.arguments
//	                                               → tool, call id, arguments  v1.31+ (arguments v1.38+, opt-in)
//	  emitted_at: the span's start
//	MCP client span mcp.method.name "tools/call"   → a call, surface "mcp"     MCP conventions (semconv #2083; genai v0.1)
//	  gen_ai.tool.name (else the span name), gen_ai.tool.call.arguments
//	  mcp.server.name, else server.address[:server.port] → server
//	span gen_ai.tool.definitions (array, or its JSON string)          v1.37+; @ai-sdk/otel
//	  each: name, description, inputSchema | parameters | input_schema, or {"function":{…}}
//	                                               → a listing of the definitions the model was given
//	span llm.tools.<i>.tool.json_schema (+ tool.name, tool.description)  → the same   OI
//	MCP client span "tools/list" with gen_ai.tool.definitions → a listing of that server
//
// Context, first present wins, the item's own attributes, then (spans)
// its ancestors' in the same payload's trace, then the resource's:
//
//	session  gen_ai.conversation.id, session.id (OI), mcp.session.id
//	agent    gen_ai.agent.id, gen_ai.agent.name, agent.name (OI)
//	model    gen_ai.request.model, gen_ai.response.model, llm.model_name (OI)
//	provider gen_ai.provider.name, gen_ai.system (deprecated), llm.provider, llm.system (OI)
//
// A tool definition becomes an MCP Tool object {name, description,
// inputSchema}; one without a schema declares no arguments
// ({"type":"object"}); one without a name, or a name given twice, is
// dropped and counted (Listing.Dropped): a call to it resolves as an
// unknown name. One tool set given to several chat spans of a payload is
// one listing (at the earliest); Listing.Digest names the set.
//
// # One call seen twice
//
// The model's tool call and the execute_tool (or MCP) span of the same
// call id in the same trace are one call: the model's record, first seen
// of them, is kept (its arguments are the model's own: an SDK such as the
// Vercel AI SDK strips undeclared arguments before it records
// execute_tool, and records no execute_tool span for a call its schema
// refuses), and the others fill what it lacks (arguments not recorded,
// server, context). Across payloads (a log record and a span are never in
// one) nothing is paired: a call's identity (Call.ID) is its trace, the
// span it was read from and its call id, so the same item read twice is
// one call, and an execution exported apart from the model's record is a
// call of its own, which never replaces the model's decision.
//
// # Hostile input
//
// A payload over Limits.MaxPayload is refused before it is unmarshalled;
// OTLP/JSON nested deeper than an attribute value may be is refused before
// pdata reads it (pdata's protobuf reader stops at 100 levels by itself);
// more spans and log records than Limits.MaxItems refuse the payload. In a
// payload, a span or log record over Limits.MaxAttributes, or a value over
// MaxValueBytes or MaxDepth, or a tool call without a name, is a Call
// with Malformed set: never silently dropped, since it may have carried
// calls. A span or log record that is no call and no listing at all is
// counted in Result.Skipped. A span's attributes are read in a fixed number
// of passes (OpenInference's flattened ones in one), never a lookup per
// attribute.
package otlp
